// uring::process on every backend: exit codes and signals, a mebibyte echoed through cat with stdin and
// stdout written and read at once, a timed-out wait, a bad program, what the child inherits (fds,
// environment, working directory), destruction of a running child, the allowlist, and the poll road
// taken where the kernel lacks IORING_OP_WAITID. After each test no child is left, running or zombie.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <uring/process.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "children.hpp"
#include "process/process_wait.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::exit_status;
using uring::process;
using uring::process_options;
using uring::stdio;
using uring::task;
using uring::test::children_left;

// What awaiting `t` throws: the system_error's what(), or "" when it succeeds.
template <class T>
task<std::string> what_of(task<T> t) {
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    co_return e.what();
  }
  co_return "";
}

// A child that runs until it is killed: cat on a pipe we hold open.
process endless_cat() { return process::spawn({.argv = {"cat"}, .in = stdio::pipe}); }

class Process : public uring::test::backend_test {
 protected:
  void TearDown() override { EXPECT_EQ(children_left(), ""); }
};

TEST_P(Process, ExitCodes) {
  run([]() -> task<void> {
    auto t = process::spawn({"/bin/true"});
    EXPECT_EQ(co_await t.wait(), (exit_status{.code = 0}));
    auto f = process::spawn({"/bin/false"});
    const exit_status failed = co_await f.wait();
    EXPECT_TRUE(failed.exited());
    EXPECT_EQ(failed.exit_code(), 1);
    auto seven = process::spawn({"sh", "-c", "exit 7"});  // found in PATH
    const exit_status s = co_await seven.wait();
    EXPECT_EQ(s.exit_code(), 7);
    EXPECT_FALSE(s.success());
    EXPECT_EQ(to_string(s), "exited with code 7");
    // Reaped once: a second wait yields the same at once, and kill finds nothing to signal.
    EXPECT_EQ(co_await seven.wait(), s);
    EXPECT_FALSE(seven.kill());
    EXPECT_EQ(seven.pidfd(), -1);
  }());
}

TEST_P(Process, AKilledChildReportsTheSignal) {
  run([]() -> task<void> {
    auto p = endless_cat();
    EXPECT_TRUE(p.kill(SIGKILL));
    const exit_status s = co_await p.wait();
    EXPECT_TRUE(s.signaled);
    EXPECT_EQ(s.signal(), SIGKILL);
    EXPECT_EQ(s.exit_code(), -1);
    EXPECT_EQ(to_string(s), "killed by signal 9 (SIGKILL)");
  }());
}

// More than a pipe holds (64 KiB), so the child blocks writing its stdout until we read: the write and
// the read must run at once.
TEST_P(Process, EchoesAMebibyteThroughCatWritingAndReadingAtOnce) {
  std::string payload(1 << 20, '\0');
  std::mt19937 rng(7);
  for (char& c : payload) c = static_cast<char>(rng());
  run([&]() -> task<void> {
    auto p = process::spawn({.argv = {"cat"}, .in = stdio::pipe, .out = stdio::pipe});
    auto feed = [&]() -> task<void> {
      co_await uring::write_all(p.in(), payload);
      p.close_in();
    };
    auto [fed, echoed] = co_await uring::when_all(feed(), uring::read_all(p.out(), 2 << 20));
    (void)fed;
    EXPECT_EQ(echoed.size(), payload.size());
    EXPECT_TRUE(echoed == payload) << "the echo differs from what was written";
    EXPECT_TRUE((co_await p.wait()).success());
  }());
}

TEST_P(Process, StdoutStderrAndNull) {
  run([]() -> task<void> {
    auto p = process::spawn({.argv = {"sh", "-c", "echo out; echo err >&2; cat"},
                             .in = stdio::null,
                             .out = stdio::pipe,
                             .err = stdio::pipe});
    EXPECT_EQ(p.in(), -1);
    auto [out, err] =
        co_await uring::when_all(uring::read_all(p.out(), 1024), uring::read_all(p.err(), 1024));
    EXPECT_EQ(out, "out\n");
    EXPECT_EQ(err, "err\n");
    EXPECT_TRUE((co_await p.wait()).success());  // cat read /dev/null's end at once
  }());
}

TEST_P(Process, ReadAllStopsAtItsLimit) {
  run([]() -> task<void> {
    auto p = process::spawn({.argv = {"sh", "-c", "head -c 300000 /dev/zero"}, .out = stdio::pipe});
    EXPECT_EQ(co_await what_of(uring::read_all(p.out(), 100000)), "read_all: File too large");
    p.take_out();  // closed: the child ends on EPIPE, or has ended
    co_await p.wait();
  }());
}

TEST_P(Process, ATimedOutWaitLeavesTheChildKillableAndReaped) {
  run([]() -> task<void> {
    auto p = endless_cat();
    EXPECT_EQ(co_await what_of(uring::with_timeout(p.wait(), 20ms)), "waitid: Connection timed out");
    EXPECT_FALSE(p.status());
    EXPECT_GE(p.pidfd(), 0);
    EXPECT_EQ(children_left(), "a running child");
    EXPECT_TRUE(p.kill(SIGTERM));
    EXPECT_EQ((co_await p.wait()).signal(), SIGTERM);
  }());
}

TEST_P(Process, ABadProgramSaysWhich) {
  run([]() -> task<void> {
    std::string what;
    const auto err = uring::test::error_of([] { process::spawn({"/no/such/program"}); }, &what);
    EXPECT_EQ(err.value(), ENOENT);
    EXPECT_EQ(what, "spawn /no/such/program: No such file or directory");
    EXPECT_EQ(uring::test::error_of([] { process::spawn({"no-such-program-in-path"}); }).value(), ENOENT);
    EXPECT_EQ(
        uring::test::error_of([] { process::spawn({.argv = {"true"}, .cwd = "/no/such/dir"}); }).value(),
        ENOENT);
    co_return;
  }());
}

// Only 0, 1 and 2 reach the child (ls's own listing adds the directory it reads, 3), while this process
// holds the ring, eventfds, a listener and the pipes of another child.
TEST_P(Process, TheChildInheritsOnlyStdio) {
  run([]() -> task<void> {
    auto l = uring::net::tcp_listener::bind(uring::net::address::ip("127.0.0.1", 0));
    auto other = endless_cat();
    auto p = process::spawn({.argv = {"ls", "/proc/self/fd"}, .in = stdio::null, .out = stdio::pipe});
    EXPECT_EQ(co_await uring::read_all(p.out(), 4096), "0\n1\n2\n3\n");
    EXPECT_TRUE((co_await p.wait()).success());
  }());
}

// What the library opens is close-on-exec, so that no exec, ours or another library's, inherits it.
TEST_P(Process, EveryFdTheLibraryOpensIsCloseOnExec) {
  auto open_fds = [] {
    std::vector<int> fds;
    for (int fd = 0; fd < 1024; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) fds.push_back(fd);
    }
    return fds;
  };
  const std::vector<int> before = open_fds();
  uring::executor ex(options());
  (void)ex.notify_fd();
  ex.run([&]() -> task<void> {
    auto l = uring::net::tcp_listener::bind(uring::net::address::ip("127.0.0.1", 0));
    auto c = co_await uring::net::tcp_stream::connect_to(l.local_address());
    auto accepted = co_await l.accept();
    auto p = process::spawn({.argv = {"cat"}, .in = stdio::pipe, .out = stdio::pipe, .err = stdio::pipe});
    int checked = 0;
    for (int fd : open_fds()) {
      if (std::find(before.begin(), before.end(), fd) != before.end()) continue;
      EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "fd " << fd << " lacks FD_CLOEXEC";
      ++checked;
    }
    EXPECT_GE(checked, 8);  // the ring or epoll, eventfds, three sockets, a pidfd, three pipe ends
  }());
}

TEST_P(Process, EnvironmentAndWorkingDirectory) {
  run([]() -> task<void> {
    auto p = process::spawn({.argv = {"/bin/sh", "-c", "echo \"$GREETING\"; pwd; echo \"${HOME-unset}\""},
                             .env = std::vector<std::string>{"GREETING=hello there"},
                             .cwd = "/proc",
                             .out = stdio::pipe});
    EXPECT_EQ(co_await uring::read_all(p.out(), 4096), "hello there\n/proc\nunset\n");
    co_await p.wait();
  }());
}

TEST_P(Process, DestroyingARunningProcessKillsAndReapsIt) {
  run([]() -> task<void> {
    int pidfd_copy = -1;
    {
      auto p = endless_cat();
      pidfd_copy = ::fcntl(p.pidfd(), F_DUPFD_CLOEXEC, 0);
      auto moved = std::move(p);  // the moved-from one owns nothing
      EXPECT_EQ(p.pidfd(), -1);
      p = endless_cat();  // assigning over a live one ends that one's child first
    }
    // Gone, not a zombie: the pidfd says the process no longer exists to be waited for.
    siginfo_t info{};
    EXPECT_NE(::waitid(P_PIDFD, static_cast<id_t>(pidfd_copy), &info, WEXITED | WNOHANG), 0);
    EXPECT_EQ(errno, ECHILD);
    ::close(pidfd_copy);
    co_return;
  }());
}

TEST_P(Process, TheAllowlistRefusesTheWait) {
  uring::executor_options o = options();
  o.allowed_ops = {uring::op_kind::read};
  uring::executor ex(o);
  ex.run([]() -> task<void> {
    auto p = endless_cat();
    std::string what = co_await what_of(p.wait());
    if (!uring::detail::ring_waits_for_children()) co_return;  // the poll road: refused as poll
    EXPECT_EQ(
        what,
        "waitid: not in this executor's op allowlist (executor_options::allowed_ops): Permission denied");
  }());  // the destructor killed and reaped the child
}

// The road for kernels before 6.7 (a poll of the pidfd, then waitid(2)), taken on every backend here.
TEST_P(Process, TheWaitByPollTakesTheExit) {
  run([]() -> task<void> {
    auto p = process::spawn({"sh", "-c", "exit 4"});
    const siginfo_t info = co_await uring::detail::wait_by_poll(p.pidfd());
    EXPECT_EQ(exit_status::from(info).exit_code(), 4);
    auto q = endless_cat();
    q.kill(SIGINT);
    EXPECT_EQ(exit_status::from(co_await uring::detail::wait_by_poll(q.pidfd())).signal(), SIGINT);
  }());
}

INSTANTIATE_BACKENDS(Process);

}  // namespace
