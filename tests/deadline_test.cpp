// with_timeout on whole tasks, on every backend: the deadline reaches every kind of wait inside the task
// (single operations, composites, streams, chains, tickers, joins, sync:: waits, when_all children),
// nests (the earlier wins), fails operations started after it at once, and leaves no timer behind.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "tcp_pair.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::test::pipe_pair;

class Deadline : public uring::test::backend_test {};

struct failure {
  int code = 0;
  std::string what;
};

// How `t` ended: 0 and no text if it succeeded.
template <class T>
task<failure> failure_of(task<T> t) {
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    co_return failure{e.code().value(), e.what()};
  }
  co_return failure{};
}

// Reads a pipe nobody writes: waits until something ends the read.
task<void> read_forever(int fd) {
  char b[1];
  co_await uring::read(fd, b);
}

std::size_t in_flight() { return uring::executor::current()->operations_in_flight(); }

TEST_P(Deadline, AnOperationStartedAfterTheDeadlineFailsAtOnce) {
  pipe_pair p;
  auto r = run([](int fd) -> task<std::pair<int, int>> {
    int first = 0, second = 0;
    co_await uring::with_timeout(
        [](int fd, int& first, int& second) -> task<void> {
          char b[1];
          first = (co_await uring::read(fd, b).nothrow()).res;
          second = (co_await uring::nop().nothrow()).res;  // would succeed at once without the deadline
        }(fd, first, second),
        20ms);
    co_return std::pair{first, second};
  }(p.read_end.get()));
  EXPECT_EQ(r.first, -ETIMEDOUT);
  EXPECT_EQ(r.second, -ETIMEDOUT);
}

// How a send_file of 4 MiB to a peer that never reads ends, under `bound` (with_timeout or
// with_stop_token, applied on the executor). The splice into the full socket blocks in a kernel worker
// thread.
template <class Bound>
task<failure> send_file_to_a_peer_that_never_reads(Bound bound) {
  uring::test::tcp_pair pair;
  uring::test::unique_fd file = uring::test::temp_file();
  if (::ftruncate(file.get(), 4 << 20) != 0)
    throw std::system_error(errno, std::system_category(), "ftruncate");
  uring::net::tcp_stream out(::dup(pair.sender.get()));
  co_return co_await failure_of(bound(out.send_file(file.get(), 0, 4 << 20)));
}

TEST_P(Deadline, ASendFileToAPeerThatNeverReadsEndsAtTheDeadline) {
  auto f = run(send_file_to_a_peer_that_never_reads(
      [](task<std::size_t> t) { return uring::with_timeout(std::move(t), 200ms); }));
  EXPECT_EQ(f.code, ETIMEDOUT) << f.what;
}

// Stopped by a token instead, the worker's interrupted syscall reads as a cancel.
TEST_P(Deadline, ASendFileToAPeerThatNeverReadsStoppedSaysEcanceled) {
  auto f = run(send_file_to_a_peer_that_never_reads([](task<std::size_t> t) {
    auto stop = std::make_shared<std::stop_source>();
    uring::spawn([](std::shared_ptr<std::stop_source> st) -> task<void> {
      co_await uring::sleep_for(100ms);
      st->request_stop();
    }(stop));
    return uring::with_stop_token(std::move(t), stop->get_token());
  }));
  EXPECT_EQ(f.code, ECANCELED) << f.what;
}

TEST_P(Deadline, AZeroTimeoutFailsTheFirstOperation) {
  auto f = run(failure_of(uring::with_timeout([]() -> task<void> { co_await uring::nop(); }(), 0ms)));
  EXPECT_EQ(f.code, ETIMEDOUT);
  EXPECT_EQ(f.what, "nop: Connection timed out");
}

TEST_P(Deadline, TheEarlierOfNestedDeadlinesWins) {
  pipe_pair p;
  const auto t0 = std::chrono::steady_clock::now();
  auto outer_first = run(failure_of(uring::with_timeout(
      [](int fd) -> task<void> { co_await uring::with_timeout(read_forever(fd), 30s); }(p.read_end.get()),
      20ms)));
  EXPECT_EQ(outer_first.code, ETIMEDOUT);
  EXPECT_EQ(outer_first.what, "read: Connection timed out");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // The inner one first: the outer task goes on with time left.
  auto inner_first = run(uring::with_timeout(
      [](int fd) -> task<std::pair<int, int>> {
        failure f = co_await failure_of(uring::with_timeout(read_forever(fd), 20ms));
        co_return std::pair{f.code, (co_await uring::nop().nothrow()).res};
      }(p.read_end.get()),
      30s));
  EXPECT_EQ(inner_first.first, ETIMEDOUT);
  EXPECT_EQ(inner_first.second, 0);
}

TEST_P(Deadline, AnOperationsOwnShorterTimeoutStillApplies) {
  pipe_pair p;
  auto r = run(uring::with_timeout(
      [](int fd) -> task<int> {
        char b[1];
        co_return (co_await uring::with_timeout(uring::read(fd, b), 20ms).nothrow()).res;
      }(p.read_end.get()),
      30s));
  EXPECT_EQ(r, -ETIMEDOUT);
}

TEST_P(Deadline, ASleepWithinTheDeadlineSucceedsAndOnePastItTimesOut) {
  auto r = run([]() -> task<std::pair<int, int>> {
    failure within = co_await failure_of(
        uring::with_timeout([]() -> task<void> { co_await uring::sleep_for(1ms); }(), 30s));
    failure past = co_await failure_of(
        uring::with_timeout([]() -> task<void> { co_await uring::sleep_for(30s); }(), 10ms));
    co_return std::pair{within.code, past.code};
  }());
  EXPECT_EQ(r.first, 0);
  EXPECT_EQ(r.second, ETIMEDOUT);
}

TEST_P(Deadline, AWaitOnAJoinHandleEndsAtTheDeadlineAndLeavesNoTimer) {
  pipe_pair p;
  uring::sync::event read_ended;
  auto r = run([](pipe_pair& p, uring::sync::event& ended) -> task<std::pair<failure, std::size_t>> {
    auto reader = uring::spawn([](int fd, uring::sync::event& ended) -> task<void> {
      co_await read_forever(fd);
      ended.set();
    }(p.read_end.get(), ended));
    failure f = co_await failure_of(
        uring::with_timeout([](uring::join_handle<void>& h) -> task<void> { co_await h; }(reader), 20ms));
    p.write_end.reset();  // ends the spawned read (end of file); a stopped await left it detached
    co_await ended.async_wait();
    co_return std::pair{f, in_flight()};
  }(p, read_ended));
  EXPECT_EQ(r.first.code, ETIMEDOUT);
  EXPECT_EQ(r.first.what, "with_timeout: Connection timed out");
  EXPECT_EQ(r.second, 0u);  // the deadline's timer was cancelled and reaped
}

TEST_P(Deadline, AWaitThatEndsInTimeHasTheTimerCancelledBeforeTheResult) {
  uring::sync::event go;
  const auto t0 = std::chrono::steady_clock::now();
  auto left = run([](uring::sync::event& go) -> task<std::size_t> {
    uring::spawn([](uring::sync::event& e) -> task<void> {
      co_await uring::sleep_for(2ms);
      e.set();
    }(go));
    co_await uring::with_timeout([](uring::sync::event& e) -> task<void> { co_await e.async_wait(); }(go),
                                 30s);
    co_return in_flight();
  }(go));
  EXPECT_EQ(left, 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST_P(Deadline, AMutexWaitEndsAtTheDeadlineAndTheMutexStillWorks) {
  uring::sync::mutex m;
  auto r = run([](uring::sync::mutex& m) -> task<std::pair<failure, bool>> {
    m.lock();
    failure f = co_await failure_of(uring::with_timeout(
        [](uring::sync::mutex& m) -> task<void> { auto held = co_await m.async_lock(); }(m), 20ms));
    m.unlock();
    auto held = co_await m.async_lock();
    co_return std::pair{f, held.owns_lock()};
  }(m));
  EXPECT_EQ(r.first.code, ETIMEDOUT);
  EXPECT_TRUE(r.second);
}

TEST_P(Deadline, AWaitInAWhenAllChildEndsAtTheDeadline) {
  uring::sync::event never;
  auto f = run(failure_of(uring::with_timeout(
      [](uring::sync::event& e) -> task<void> {
        co_await uring::when_all([](uring::sync::event& e) -> task<void> { co_await e.async_wait(); }(e),
                                 []() -> task<void> { co_await uring::nop(); }());
      }(never),
      20ms)));
  EXPECT_EQ(f.code, ETIMEDOUT);
}

TEST_P(Deadline, TheAwaitersStopIsACancelNotATimeout) {
  uring::sync::event never;
  std::stop_source stop;
  auto f = run([](uring::sync::event& e, std::stop_source& stop) -> task<failure> {
    uring::spawn([](std::stop_source& s) -> task<void> {
      co_await uring::sleep_for(2ms);
      s.request_stop();
    }(stop));
    co_return co_await failure_of(uring::with_stop_token(
        uring::with_timeout([](uring::sync::event& e) -> task<void> { co_await e.async_wait(); }(e), 30s),
        stop.get_token()));
  }(never, stop));
  EXPECT_EQ(f.code, ECANCELED);
}

TEST_P(Deadline, AnAcceptStreamsNextEndsAtTheDeadlineAndTheStreamGoesOn) {
  auto listener = uring::net::tcp_listener::bind(uring::net::address::ip("127.0.0.1", 0));
  auto r = run([](const uring::net::tcp_listener& l) -> task<std::pair<failure, bool>> {
    auto stream = l.accept_all();
    failure f = co_await failure_of(uring::with_timeout(
        [](uring::net::accept_stream& s) -> task<void> { (void)co_await s.next(); }(stream), 20ms));
    auto [client, server] =
        co_await uring::when_all(uring::net::tcp_stream::connect_to(l.local_address()),
                                 [](uring::net::accept_stream& s) -> task<uring::net::tcp_stream> {
                                   co_return co_await s.next();
                                 }(stream));
    co_return std::pair{f, server.fd() >= 0};
  }(listener));
  EXPECT_EQ(r.first.code, ETIMEDOUT);
  EXPECT_TRUE(r.second);
}

TEST_P(Deadline, AChainEndsAtTheDeadline) {
  pipe_pair p;
  auto f = run(failure_of(uring::with_timeout(
      [](int fd) -> task<void> {
        char b[1];
        (void)co_await uring::chain(uring::read(fd, b), uring::nop());
      }(p.read_end.get()),
      20ms)));
  EXPECT_EQ(f.code, ETIMEDOUT);
}

TEST_P(Deadline, ATickersWaitEndsAtTheDeadline) {
  auto f = run(failure_of(uring::with_timeout(
      []() -> task<void> {
        uring::ticker t(1h);
        (void)co_await t.next();
      }(),
      20ms)));
  EXPECT_EQ(f.code, ETIMEDOUT);
  EXPECT_EQ(f.what, "with_timeout: Connection timed out");
}

// The deadline's timer is armed by the first wait on other coroutines, on that wait's executor; the
// task then hops home and ends there, so the timer is cancelled across threads before the frame goes.
TEST_P(Deadline, ATimerArmedOnAnotherExecutorIsSettledBeforeTheFrameEnds) {
  uring::executor_group group(1, options());
  uring::sync::event go;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run([](uring::executor& other, uring::sync::event& go) -> task<std::pair<int, std::size_t>> {
    uring::executor& home = *uring::executor::current();
    uring::spawn([](uring::sync::event& e) -> task<void> {
      co_await uring::sleep_for(5ms);
      e.set();
    }(go));
    int v = co_await uring::with_timeout(
        [](uring::executor& other, uring::executor& home, uring::sync::event& go) -> task<int> {
          co_await uring::resume_on(other);
          co_await go.async_wait();  // arms the deadline's timer on `other`
          co_await uring::resume_on(home);
          co_return 7;
        }(other, home, go),
        30s);
    co_return std::pair{v, in_flight()};
  }(group.at(0), go));
  EXPECT_EQ(r.first, 7);
  EXPECT_EQ(r.second, 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // the 30 s timer did not hold anything
  group.stop();
  group.join();
}

// The task waits on another executor, where it armed the deadline's timer, when its own executor is
// destroyed: that frees the frame, unsettled, while the timer is still in flight elsewhere. The timer's
// completion (reaped when the other executor shuts down) must touch nothing of the frame (ASan sees it
// if it does). Between members of one executor_group this cannot happen: each drains its ring before any
// frees a frame.
TEST_P(Deadline, AFrameFreedUnsettledWhileItsTimerRunsOnAnotherExecutorLeavesTheTimerSafe) {
  uring::executor_group group(1, options());
  uring::executor& other = group.at(0);
  uring::sync::event never;
  uring::sync::latch waiting(1);
  {
    uring::executor home(options());
    home.run([](uring::executor& other, uring::sync::event& e, uring::sync::latch& l) -> task<void> {
      uring::spawn([](uring::executor& other, uring::sync::event& e, uring::sync::latch& l) -> task<void> {
        co_await uring::with_timeout(
            [](uring::executor& other, uring::sync::event& e, uring::sync::latch& l) -> task<void> {
              co_await uring::resume_on(other);
              l.count_down();
              co_await e.async_wait();  // arms the timer on `other`; never set
            }(other, e, l),
            1h);
      }(other, e, l));
      co_await l.async_wait();
      uring::executor& home = *uring::executor::current();
      co_await uring::resume_on(other);  // a later turn there: the task has suspended by now
      co_await uring::resume_on(home);
    }(other, never, waiting));
  }  // frees the spawned frame, its deadline with it
  group.stop();
  group.join();
}

INSTANTIATE_BACKENDS(Deadline);

}  // namespace
