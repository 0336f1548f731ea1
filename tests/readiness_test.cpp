// readiness_test.cpp — waiting on an fd's readiness: what it costs the emulated backend (one epoll_ctl and
// one epoll wait per wait, at most) and that it survives the fd's number passing to another file.
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using uring::task;
using uring::test::unique_fd;
using namespace std::chrono_literals;

// Reads one byte from `fd` that arrives only after the read has started waiting for it: the peer writes
// on a later turn.
task<std::size_t> read_after_it_waits(int fd, int peer) {
  auto reader = [](int fd) -> task<std::size_t> {
    char c = 0;
    co_return co_await uring::with_timeout(uring::read(fd, {&c, 1}), 5s);
  };
  auto writer = [](int peer) -> task<void> {
    co_await uring::nop();
    EXPECT_EQ(::write(peer, "x", 1), 1);
  };
  auto [n, unused] = co_await uring::when_all(reader(fd), writer(peer));
  co_return n;
}

class Readiness : public uring::test::backend_test {};

// The fd stays registered between waits, disarmed: each wait re-arms it with one epoll_ctl (not an ADD
// and a DEL), and a turn that completed something does not also look in epoll.
TEST_P(Readiness, EachWaitCostsAtMostOneInterestChangeAndOneEpollWait) {
  constexpr int kRounds = 200;
  uring::test::stream_pair s;
  uring::executor ex(options());
  ex.run(read_after_it_waits(s.ours.fd(), s.peer.get()));  // the first registration
  const uring::executor_stats before = ex.stats();
  ex.run([](int fd, int peer) -> task<void> {
    for (int i = 0; i < kRounds; ++i) EXPECT_EQ(co_await read_after_it_waits(fd, peer), 1u);
  }(s.ours.fd(), s.peer.get()));
  const std::uint64_t changes = ex.stats().interest_changes - before.interest_changes;
  if (!emulated()) {
    EXPECT_EQ(changes, 0u) << "only the emulation watches fds in epoll";
    return;
  }
  EXPECT_LE(changes, std::uint64_t{kRounds}) << "more than one epoll_ctl per wait";
  EXPECT_LE(ex.stats().enters - before.enters, std::uint64_t{kRounds + kRounds / 16 + 2})
      << "more than one epoll wait per wait";
}

// A number the emulation watched, closed behind its back and given to another socket: a wait on the new
// socket is still woken when its data comes (the stale registration is not taken for the new file's).
TEST_P(Readiness, AReusedFdNumberIsWatchedAfresh) {
  for (bool withdrawn : {false, true}) {
    SCOPED_TRACE(withdrawn ? "the old file's last wait timed out" : "the old file's last wait completed");
    uring::test::stream_pair first;
    const int number = first.ours.fd();
    uring::executor ex(options());
    ex.run(read_after_it_waits(number, first.peer.get()));
    if (withdrawn) {
      uring::io_result r = ex.run([](int fd) -> task<uring::io_result> {
        char c = 0;
        co_return co_await uring::with_timeout(uring::read(fd, {&c, 1}).nothrow(), 1ms);
      }(number));
      EXPECT_TRUE(r.res == -ETIMEDOUT || r.res == -ECANCELED) << r.res;
    }
    uring::test::stream_pair second;
    ASSERT_EQ(::dup2(second.ours.fd(), number), number);  // the first socket's file closes here
    EXPECT_EQ(ex.run(read_after_it_waits(number, second.peer.get())), 1u);
    (void)first.ours.release();  // `number` is the second socket's now; closed below
    ::close(number);
  }
}

// Short-lived sockets whose numbers are reused at once, closed behind the executor's back or by its own
// close, some after a wait that timed out: every wait on every one of them is woken by its byte.
TEST_P(Readiness, ShortLivedSocketsReusingNumbersAreEachWatched) {
  const int rounds = static_cast<int>(uring::test::scaled(300));
  uring::executor ex(options());
  const int woken = ex.run([](int rounds) -> task<int> {
    int woken = 0;
    for (int i = 0; i < rounds; ++i) {
      uring::test::stream_pair p;
      const int fd = p.ours.fd();
      if (i % 3 == 1) {
        char c = 0;
        uring::io_result r = co_await uring::with_timeout(uring::read(fd, {&c, 1}).nothrow(), 1ms);
        EXPECT_TRUE(r.res == -ETIMEDOUT || r.res == -ECANCELED) << "round " << i << ": " << r.res;
      }
      if (co_await read_after_it_waits(fd, p.peer.get()) == 1u) ++woken;
      // Closed by the executor's own close, or else by the pair going out of scope, behind its back.
      if (i % 3 == 2) co_await uring::close(p.ours.release());
    }
    co_return woken;
  }(rounds));
  EXPECT_EQ(woken, rounds);
  if (emulated()) {
    EXPECT_LE(ex.stats().interest_changes, std::uint64_t(3 * rounds)) << "epoll_ctl calls grow with reuse";
  }
}

// A poll on a file epoll cannot watch (a regular file) is answered at once, as the kernel's is.
TEST_P(Readiness, APollOnARegularFileIsReadyAtOnce) {
  unique_fd f = uring::test::temp_file();
  unsigned got = run([](int fd) -> task<unsigned> { co_return co_await uring::poll(fd, POLLIN); }(f.get()));
  EXPECT_TRUE(got & POLLIN);
}

INSTANTIATE_BACKENDS(Readiness);

}  // namespace
