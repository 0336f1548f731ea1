// uring-foreign-loop: a plain epoll loop that serves its own fds and drives a uring executor beside them.
//
//   uring-foreign-loop [--backend auto|native|emulated] [--defer-taskrun] [--ticks N]
//
// The loop owns a timerfd that ticks every millisecond and a pipe it writes to. It watches the executor's
// notify_fd() next to them and calls executor::poll() whenever that is readable; it never blocks in the
// executor. The demo work on the executor uses timers, a read of the loop's pipe, an event notified from
// another thread, and spawned tasks. Exits 0 once the work and the loop's ticks are all done.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <uring/uring.hpp>

using namespace std::chrono_literals;

namespace {

struct demo_state {
  int pipe_read = -1;
  uring::event* ev = nullptr;
  int children_done = 0;
  bool done = false;
  std::string got;
};

uring::task<void> child(demo_state& s, int i) {
  co_await uring::sleep_for(std::chrono::milliseconds(1 + i));
  ++s.children_done;
}

uring::task<void> demo(demo_state& s) {
  for (int i = 0; i < 3; ++i) uring::spawn(child(s, i));
  co_await uring::sleep_for(5ms);
  char buf[16] = {};
  std::size_t n =
      co_await uring::read(s.pipe_read, uring::mutable_buffer(buf, sizeof buf));  // the loop writes it
  s.got.assign(buf, n);
  co_await s.ev->wait();  // notified from another thread
  while (s.children_done < 3) co_await uring::sleep_for(1ms);
  s.done = true;
}

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-foreign-loop [--backend auto|native|emulated] [--defer-taskrun] [--ticks N]\n");
  std::exit(code);
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "uring-foreign-loop: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  uring::executor_options opts;
  long want_ticks = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    if (a == "--backend" && i + 1 < argc) {
      std::string b = argv[++i];
      if (b == "native")
        opts.backend = uring::backend_kind::native;
      else if (b == "emulated")
        opts.backend = uring::backend_kind::emulated;
      else if (b != "auto")
        usage(2);
    } else if (a == "--defer-taskrun") {
      opts.flags = uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
    } else if (a == "--ticks" && i + 1 < argc) {
      want_ticks = std::atol(argv[++i]);
    } else {
      usage(2);
    }
  }

  uring::executor ex(opts);
  int pipe_fds[2];
  check(::pipe2(pipe_fds, O_CLOEXEC) == 0, "pipe2");
  uring::event ev;
  demo_state state;  // (not designated: g++ 12 -Wextra warns about the members left to their defaults)
  state.pipe_read = pipe_fds[0];
  state.ev = &ev;
  uring::spawn(ex, demo(state));
  std::thread notifier([&ev] { ev.notify(); });

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  int tick = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  check(ep >= 0 && tick >= 0, "epoll_create1/timerfd_create");
  itimerspec every_ms{{0, 1'000'000}, {0, 1'000'000}};
  check(::timerfd_settime(tick, 0, &every_ms, nullptr) == 0, "timerfd_settime");
  const int notify = ex.notify_fd();
  for (int fd : {tick, notify}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    check(::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0, "epoll_ctl");
  }

  long ticks = 0, polls = 0, wakeups = 0;
  std::size_t executor_work = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!(state.done && ticks >= want_ticks)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "uring-foreign-loop: stuck (done=%d ticks=%ld): work was stranded\n", state.done,
                   ticks);
      return 1;
    }
    epoll_event events[4];
    int n = ::epoll_wait(ep, events, 4, 1000);
    if (n < 0 && errno == EINTR) continue;  // the kernel's task work for the ring may interrupt the wait
    check(n >= 0, "epoll_wait");
    ++wakeups;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == tick) {
        std::uint64_t expirations = 0;
        if (::read(tick, &expirations, sizeof expirations) == sizeof expirations) {
          ticks += static_cast<long>(expirations);
          if (ticks >= 5 && pipe_fds[1] >= 0) {  // the loop's own event feeds the executor's read
            check(::write(pipe_fds[1], "hello", 5) == 5, "write");
            ::close(pipe_fds[1]);
            pipe_fds[1] = -1;
          }
        }
      } else {
        executor_work += ex.poll();
        ++polls;
      }
    }
  }
  notifier.join();
  std::printf(
      "uring-foreign-loop: backend %s, demo done (read \"%s\"), %ld ticks, %ld wake-ups, %ld polls, "
      "%zu completions and resumptions\n",
      uring::to_string(ex.plan().backend).c_str(), state.got.c_str(), ticks, wakeups, polls, executor_work);
  ::close(tick);
  ::close(ep);
  ::close(pipe_fds[0]);
  return state.got == "hello" ? 0 : 1;
}
