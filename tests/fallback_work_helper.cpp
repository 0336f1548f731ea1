// fallback_work_helper: builds a default executor (backend chosen by the probe) and does real work on it:
// pipes, timers, a linked timeout, cancellation, a regular file, hops to a second executor's thread and
// back. fallback_test runs it where io_uring is blocked or limited (seccomp on io_uring_setup or
// io_uring_register, a small RLIMIT_MEMLOCK as an unprivileged user): the executor must fall back where it
// has to, say why, and still get everything done.
// Prints "backend <name>", "messaging <road>", the plan's notes ("note ..."), "hops by MSG_RING <n>", then
// "work ok"; exits non-zero with a message on any failure.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include <uring/uring.hpp>

using namespace std::chrono_literals;

namespace {

uring::task<std::string> read_some(int fd) {
  char buf[32];
  std::size_t n = co_await uring::read(fd, buf);
  co_return std::string(buf, n);
}

uring::task<void> work() {
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  co_await uring::write(p[1], std::string_view("hello"));
  if (co_await read_some(p[0]) != "hello") throw std::runtime_error("pipe round trip");
  co_await uring::sleep_for(2ms);
  char one;
  auto timed = co_await uring::with_timeout(uring::read(p[0], std::span(&one, 1)), 5ms).nothrow();
  if (timed.res != -ETIMEDOUT) throw std::runtime_error("linked timeout: " + std::to_string(timed.res));
  auto raced = co_await uring::when_any(
      read_some(p[0]), [](auto d) -> uring::task<void> { co_await uring::sleep_for(d); }(3ms));
  if (raced.index() != 1) throw std::runtime_error("when_any");
  int f = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  co_await uring::write_at(f, std::string_view("file"), 0);
  char back[4];
  if (co_await uring::read_at(f, back, 0) != 4) throw std::runtime_error("file read");
  ::close(f);
  ::close(p[0]);
  ::close(p[1]);
}

// There and back again, `n` times: MSG_RING between two native executors planned for it, else the mailbox.
uring::task<void> hop(uring::executor& home, uring::executor& other, int n) {
  for (int i = 0; i < n; ++i) {
    co_await uring::resume_on(other);
    co_await uring::nop();
    co_await uring::resume_on(home);
  }
}

}  // namespace

int main() {
  try {
    uring::executor ex;
    std::printf("backend %s\n", uring::to_string(ex.plan().backend).c_str());
    std::printf("messaging %s\n", ex.plan().msg_ring ? "MSG_RING" : "mailbox");
    for (const auto& note : ex.plan().notes) std::printf("note %s\n", note.c_str());
    ex.run(work());
    uring::executor_group other(1);
    ex.run(hop(ex, other.at(0), 10));
    other.stop();
    other.join();
    std::printf("hops by MSG_RING %llu\n", static_cast<unsigned long long>(ex.stats().messages_sent_by_ring));
    std::printf("work ok\n");
    return 0;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}
