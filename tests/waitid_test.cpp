// waitid on every backend: a child's exit by pidfd and by pid, WNOHANG, a process that is not our child,
// a linked timeout and a stop, the allowlist, and the wait for any child that only the ring can do.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <semaphore>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "children.hpp"
#include "expect_failure.hpp"

namespace {

using namespace std::chrono_literals;
using uring::op_kind;
using uring::task;
using uring::test::children_left;
using uring::test::expect_failure;

extern "C" char** environ;

// A child started by plain posix_spawn (the waits under test reap it), killed and reaped by the
// destructor if a test left it running. `fd` is a pidfd for it. Its stdin is a pipe held open until
// the destructor, so that `cat` runs until it is killed.
struct child {
  pid_t pid = -1;
  int fd = -1;
  int stdin_w = -1;
  explicit child(std::vector<std::string> argv) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    stdin_w = p[1];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], STDIN_FILENO);
    EXPECT_EQ(::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[0]);
    fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u));
    EXPECT_GE(fd, 0) << std::strerror(errno);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child() {
    // By the pidfd: a child a test has reaped may have had its pid reused already.
    ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0u);
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(fd), &info, WEXITED) != 0 && errno == EINTR) {
    }
    ::close(fd);
    ::close(stdin_w);
  }
  // The child has exited (its pidfd is readable), waited for with a bounded deadline.
  [[nodiscard]] bool exited_within(std::chrono::milliseconds limit) const {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(limit.count())) == 1;
  }
  // Still there to be waited for (running or a zombie), without reaping it.
  [[nodiscard]] bool waitable() const {
    siginfo_t info{};
    return ::waitid(P_PIDFD, static_cast<id_t>(fd), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
  }
};

class Waitid : public uring::test::backend_test {
 protected:
  void TearDown() override { EXPECT_EQ(children_left(), ""); }
};

TEST_P(Waitid, TakesAChildsExitByPidfd) {
  child c({"/bin/sh", "-c", "exit 3"});
  run([&]() -> task<void> {
    siginfo_t info{};
    co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED);
    EXPECT_EQ(info.si_signo, SIGCHLD);
    EXPECT_EQ(info.si_code, CLD_EXITED);
    EXPECT_EQ(info.si_pid, c.pid);
    EXPECT_EQ(info.si_status, 3);
  }());
  EXPECT_FALSE(c.waitable());  // reaped
}

TEST_P(Waitid, TakesAChildsExitByPid) {
  child c({"/bin/sh", "-c", "kill -9 $$"});
  run([&]() -> task<void> {
    siginfo_t info{};
    co_await uring::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED);
    EXPECT_EQ(info.si_code, CLD_KILLED);
    EXPECT_EQ(info.si_pid, c.pid);
    EXPECT_EQ(info.si_status, SIGKILL);
  }());
  EXPECT_FALSE(c.waitable());
}

TEST_P(Waitid, WnohangOnARunningChildReportsNothingAndWnowaitLeavesItWaitable) {
  child c({"/bin/cat"});
  run([&]() -> task<void> {
    siginfo_t info{};
    info.si_pid = 12345;
    co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED | WNOHANG);
    EXPECT_EQ(info.si_pid, 0);
    EXPECT_EQ(::kill(c.pid, SIGTERM), 0);
    co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED | WNOWAIT);
    EXPECT_EQ(info.si_code, CLD_KILLED);
    EXPECT_EQ(info.si_status, SIGTERM);
  }());
  EXPECT_TRUE(c.waitable());  // WNOWAIT: still a zombie for the destructor to reap
}

TEST_P(Waitid, AProcessThatIsNotOurChildIsEchild) {
  const pid_t parent = ::getppid();
  const int parent_fd = static_cast<int>(::syscall(SYS_pidfd_open, parent, 0u));
  ASSERT_GE(parent_fd, 0) << std::strerror(errno);
  run([&]() -> task<void> {
    siginfo_t info{};
    co_await expect_failure([&] { return uring::waitid(P_PID, static_cast<id_t>(parent), &info, WEXITED); },
                            ECHILD, "waitid");
    co_await expect_failure(
        [&] { return uring::waitid(P_PIDFD, static_cast<id_t>(parent_fd), &info, WEXITED); }, ECHILD,
        "waitid");
    // A thread of ours, no child; no pid at all; and no process at all by that pid (pid_max is at most
    // 2^22).
    pid_t thread = 0;
    std::binary_semaphore started{0}, finish{0};
    std::thread t([&] {
      thread = static_cast<pid_t>(::gettid());
      started.release();
      finish.acquire();
    });
    started.acquire();
    co_await expect_failure([&] { return uring::waitid(P_PID, static_cast<id_t>(thread), &info, WEXITED); },
                            ECHILD, "waitid");
    finish.release();
    t.join();
    co_await expect_failure([&] { return uring::waitid(P_PID, 0, &info, WEXITED); }, EINVAL, "waitid");
    co_await expect_failure([&] { return uring::waitid(P_PID, 1u << 23, &info, WEXITED); }, ECHILD, "waitid");
  }());
  ::close(parent_fd);
}

TEST_P(Waitid, ALinkedTimeoutEndsTheWaitAndLeavesTheChild) {
  child c({"/bin/cat"});
  run([&]() -> task<void> {
    siginfo_t info{};
    const auto r =
        co_await uring::with_timeout(uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED), 20ms)
            .nothrow();
    EXPECT_EQ(r.res, -ETIMEDOUT);
    // By pid too: the emulation's own pidfd for it is closed with the wait (the fd leak check sees it).
    const auto by_pid =
        co_await uring::with_timeout(uring::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED), 20ms)
            .nothrow();
    EXPECT_EQ(by_pid.res, -ETIMEDOUT);
    EXPECT_TRUE(c.waitable());
    EXPECT_EQ(::kill(c.pid, SIGKILL), 0);
    co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED);
    EXPECT_EQ(info.si_status, SIGKILL);
  }());
}

TEST_P(Waitid, AStopCancelsTheWait) {
  child c({"/bin/cat"});
  run([&]() -> task<void> {
    std::stop_source stop;
    siginfo_t info{};
    auto waiter = [&]() -> task<int> {
      co_return (co_await uring::with_stop_token(
                     uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED), stop.get_token())
                     .nothrow())
          .res;
    };
    auto stopper = [&]() -> task<void> {
      co_await uring::nop();
      stop.request_stop();
    };
    auto [res, done] = co_await uring::when_all(waiter(), stopper());
    (void)done;
    EXPECT_EQ(res, -ECANCELED);
  }());
  EXPECT_TRUE(c.waitable());
}

TEST_P(Waitid, TheAllowlistRefusesIt) {
  child c({"/bin/sh", "-c", "exit 0"});
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::nop};
  uring::executor ex(o);
  ex.run([&]() -> task<void> {
    siginfo_t info{};
    EXPECT_EQ((co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED).nothrow()).res,
              -EACCES);
    std::string what;
    try {
      co_await uring::waitid(P_PIDFD, static_cast<id_t>(c.fd), &info, WEXITED);
    } catch (const std::system_error& e) {
      what = e.what();
    }
    EXPECT_EQ(
        what,
        "waitid: not in this executor's op allowlist (executor_options::allowed_ops): Permission denied");
  }());
  EXPECT_TRUE(c.waitable());  // nothing reaped it
}

// The id of a WNOHANG wait for a pid or a group is no fd, even where an fd of that number has an
// operation waiting on it: the wait answers at once.
TEST_P(Waitid, AWnohangWaitNeverWaitsOnAnFdOfItsIdsNumber) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  run([&]() -> task<void> {
    char byte = 0;
    auto reader = [&]() -> task<std::size_t> { co_return co_await uring::read(p[0], {&byte, 1}); };
    auto checker = [&]() -> task<void> {
      siginfo_t info{};
      const auto r = co_await uring::with_timeout(
                         uring::waitid(P_PGID, static_cast<id_t>(p[0]), &info, WEXITED | WNOHANG), 30s)
                         .nothrow();
      EXPECT_EQ(r.res, -ECHILD);  // no child in a group of that number
      EXPECT_EQ(::write(p[1], "x", 1), 1);
    };
    auto [n, done] = co_await uring::when_all(reader(), checker());
    (void)done;
    EXPECT_EQ(n, 1u);
  }());
  ::close(p[0]);
  ::close(p[1]);
}

// Any child: what is waitable already is reaped on every backend; a wait that would block is the ring's
// alone (the emulation has no fd to wait on and says so).
TEST_P(Waitid, AnyChild) {
  child c({"/bin/sh", "-c", "exit 5"});
  ASSERT_TRUE(c.exited_within(30s));
  run([&]() -> task<void> {
    siginfo_t info{};
    co_await uring::waitid(P_ALL, 0, &info, WEXITED);
    EXPECT_EQ(info.si_pid, c.pid);
    EXPECT_EQ(info.si_status, 5);
    child running({"/bin/cat"});
    const auto r = co_await uring::with_timeout(uring::waitid(P_ALL, 0, &info, WEXITED), 20ms).nothrow();
    EXPECT_EQ(r.res, emulated() ? -EOPNOTSUPP : -ETIMEDOUT);
  }());
}

INSTANTIATE_BACKENDS(Waitid);

// The probe's opcode report names IORING_OP_WAITID, and finds it on a kernel new enough for it; the
// allowlist knows the operation by its own name.
TEST(WaitidProbe, TheProbeReportsTheOpcode) {
  constexpr unsigned kWaitid = 50;
  EXPECT_EQ(uring::opcode_name(kWaitid), "WAITID");
  EXPECT_EQ(std::string(uring::to_string(op_kind::waitid)), "waitid");
  const uring::kernel_features& f = uring::probed_kernel();
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(f.kernel_release.c_str(), "%d.%d", &major, &minor), 2) << f.kernel_release;
  if (major > 6 || (major == 6 && minor >= 7)) {
    EXPECT_TRUE(f.supports(kWaitid)) << f.kernel_release;
    EXPECT_NE(uring::to_string(f).find("WAITID             yes"), std::string::npos);
  }
}

}  // namespace
