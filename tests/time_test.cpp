// Timers, timeouts and cancellation, on every backend: sleep_for/sleep_until, with_timeout (a linked
// timeout), stop tokens from the owner thread and from other threads, and poll for readiness.
#include <gtest/gtest.h>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using uring::task;
using uring::test::pipe_pair;

class Time : public uring::test::backend_test {};

bool readable(int fd) {
  pollfd pf{fd, POLLIN, 0};
  return ::poll(&pf, 1, 0) > 0;
}

std::errc error_of(auto&& fn) {
  try {
    fn();
  } catch (const std::system_error& e) {
    return static_cast<std::errc>(e.code().value());
  }
  return std::errc{};
}

TEST_P(Time, SleepForWaitsAtLeastTheDuration) {
  auto elapsed = run([]() -> task<clock_type::duration> {
    auto t0 = clock_type::now();
    co_await uring::sleep_for(20ms);
    co_return clock_type::now() - t0;
  }());
  EXPECT_GE(elapsed, 20ms);
}

TEST_P(Time, SleepUntilAPastDeadlineCompletesAtOnce) {
  run([]() -> task<void> {
    co_await uring::sleep_until(clock_type::now() - 1s);
    co_await uring::sleep_for(0ms);
  }());
}

TEST_P(Time, SleepsCompleteInDeadlineOrder) {
  std::string order = run([]() -> task<std::string> {
    std::string seen;
    int done = 0;
    auto sleeper = [&](char tag, std::chrono::milliseconds d) -> task<void> {
      co_await uring::sleep_for(d);
      seen += tag;
      ++done;
    };
    uring::spawn(sleeper('c', 30ms));
    uring::spawn(sleeper('a', 5ms));
    uring::spawn(sleeper('b', 15ms));
    while (done < 3) co_await uring::sleep_for(1ms);
    co_return seen;
  }());
  EXPECT_EQ(order, "abc");
}

TEST_P(Time, WithTimeoutFailsWithEtimedoutWhenTheOperationOutlivesIt) {
  pipe_pair p;
  auto t0 = clock_type::now();
  auto err = error_of([&] {
    run([&]() -> task<void> {
      char buf[4];
      co_await uring::with_timeout(uring::read(p.read_end.get(), buf), 20ms);
    }());
  });
  EXPECT_EQ(err, std::errc::timed_out);
  EXPECT_GE(clock_type::now() - t0, 20ms);
}

TEST_P(Time, WithTimeoutLetsAFastOperationThrough) {
  pipe_pair p;
  ASSERT_EQ(::write(p.write_end.get(), "hi", 2), 2);
  auto n = run([&]() -> task<std::size_t> {
    char buf[4];
    std::size_t got = co_await uring::with_timeout(uring::read(p.read_end.get(), buf), 10s);
    // The timeout must not fire later and disturb anything: sleep past nothing, then finish.
    co_await uring::sleep_for(1ms);
    co_return got;
  }());
  EXPECT_EQ(n, 2u);
}

// Linked pairs (operation + linked timeout) through an 8-entry SQ: a pair must never be split across two
// submits, and making room for one must not waste or corrupt an SQE. Every operation completes once.
TEST_P(Time, ManyLinkedTimeoutsThroughATinySubmissionQueue) {
  uring::executor_options opts = options();
  opts.sq_entries = 8;
  opts.cq_entries = 16;
  uring::executor ex(opts);
  const long total = uring::test::scaled(5'000);
  std::vector<int> seen(static_cast<std::size_t>(total), 0);
  long done = 0, failed = 0;
  ex.run([&]() -> task<void> {
    for (long i = 0; i < total; ++i) {
      uring::spawn([](int& slot, long& count, long& errors) -> task<void> {
        auto r = co_await uring::with_timeout(uring::nop(), std::chrono::seconds(10)).nothrow();
        if (!r) ++errors;
        ++slot;
        ++count;
      }(seen[static_cast<std::size_t>(i)], done, failed));
    }
    while (done < total) co_await uring::nop();
  }());
  EXPECT_EQ(done, total);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), total);  // each exactly once
}

TEST_P(Time, WithTimeoutNothrowYieldsMinusEtimedout) {
  pipe_pair p;
  auto r = run([&]() -> task<uring::io_result> {
    char buf[4];
    co_return co_await uring::with_timeout(uring::read(p.read_end.get(), buf), 5ms).nothrow();
  }());
  EXPECT_EQ(r.res, -ETIMEDOUT);
}

TEST_P(Time, StopTokenFromTheOwnerThreadCancelsAWaitingRead) {
  pipe_pair p;
  std::stop_source source;
  auto err = error_of([&] {
    run([&]() -> task<void> {
      uring::spawn([](std::stop_source& s) -> task<void> {
        co_await uring::sleep_for(5ms);
        s.request_stop();
      }(source));
      char buf[4];
      co_await uring::with_stop_token(uring::read(p.read_end.get(), buf), source.get_token());
    }());
  });
  EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST_P(Time, StopTokenFromAnotherThreadCancelsASleep) {
  std::stop_source source;
  std::thread stopper;
  auto err = error_of([&] {
    run([&]() -> task<void> {
      stopper = std::thread([&] { source.request_stop(); });
      co_await uring::with_stop_token(uring::sleep_for(10s), source.get_token());
    }());
  });
  stopper.join();
  EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST_P(Time, AStoppedTokenCancelsBeforeAnythingStarts) {
  std::stop_source source;
  source.request_stop();
  pipe_pair p;
  auto r = run([&]() -> task<uring::io_result> {
    co_return co_await uring::with_stop_token(uring::write(p.write_end.get(), std::string_view("x")),
                                              source.get_token())
        .nothrow();
  }());
  EXPECT_EQ(r.res, -ECANCELED);
  EXPECT_FALSE(readable(p.read_end.get())) << "the cancelled write must not have happened";
}

TEST_P(Time, CancelStillQueuedInTheSameTurnNeverReachesTheKernel) {
  pipe_pair p;
  std::stop_source source;
  uring::io_result result{1};
  bool done = false;
  run([&]() -> task<void> {
    // Both start in the same later turn, in this order: the write is queued, then the stop request comes
    // before the turn's submit.
    // (Arguments, not captures: a capturing lambda temporary dies before the coroutine runs.)
    uring::spawn([](int fd, std::stop_token tok, uring::io_result& out, bool& flag) -> task<void> {
      out = co_await uring::with_stop_token(uring::write(fd, std::string_view("x")), tok).nothrow();
      flag = true;
    }(p.write_end.get(), source.get_token(), result, done));
    uring::spawn([](std::stop_source& s) -> task<void> {
      s.request_stop();
      co_return;
    }(source));
    while (!done) co_await uring::nop();
  }());
  EXPECT_EQ(result.res, -ECANCELED);
  EXPECT_FALSE(readable(p.read_end.get())) << "the cancelled write must not have happened";
}

// A read with a stop token goes straight into the SQ like a plain one; stopped before the turn's enter, it
// is withdrawn there: it fails ECANCELED and the bytes waiting in the pipe stay for the next read.
TEST_P(Time, AReadStoppedBeforeItsEnterTakesNothing) {
  pipe_pair p;
  ASSERT_EQ(::write(p.write_end.get(), "yz", 2), 2);
  std::stop_source source;
  std::optional<uring::io_result> stopped;
  uring::io_result after{0};
  char first = 0;
  char second = 0;
  run([&]() -> task<void> {
    uring::spawn(
        [](int fd, std::stop_token tok, char& c, std::optional<uring::io_result>& out) -> task<void> {
          out = co_await uring::with_stop_token(uring::read(fd, std::span(&c, 1)), tok).nothrow();
        }(p.read_end.get(), source.get_token(), first, stopped));
    uring::spawn([](std::stop_source& s) -> task<void> {  // the same turn, after the read started
      s.request_stop();
      co_return;
    }(source));
    while (!stopped) co_await uring::nop();
    after = co_await uring::read(p.read_end.get(), std::span(&second, 1)).nothrow();
  }());
  EXPECT_EQ(stopped->res, -ECANCELED);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(after.res, 1);
  EXPECT_EQ(second, 'y');
}

// Many reads with stop tokens started in one turn on a small SQ: the first ones go straight into the SQ,
// the rest (once it is full) wait in the list. Every other one is stopped in the same turn (withdrawn from
// the SQ, or cancelled in the list), the rest after the enter: each read either took its pipe's byte or
// failed ECANCELED and left the byte there, and the ones stopped in their own turn took nothing.
TEST_P(Time, ReadsStoppedInTheirTurnOrLaterLoseNoByte) {
  constexpr int kReads = 48;
  std::vector<pipe_pair> pipes(kReads);
  for (int i = 0; i < kReads; ++i) ASSERT_EQ(::write(pipes[i].write_end.get(), "b", 1), 1);
  std::vector<std::stop_source> sources(kReads);
  std::vector<std::optional<uring::io_result>> results(kReads);
  std::vector<char> bytes(kReads, 0);
  uring::executor_options opts = options();
  opts.sq_entries = 8;
  uring::executor ex(opts);
  ex.run([&]() -> task<void> {
    for (int i = 0; i < kReads; ++i) {
      uring::spawn(
          [](int fd, std::stop_token tok, char& c, std::optional<uring::io_result>& out) -> task<void> {
            out = co_await uring::with_stop_token(uring::read(fd, std::span(&c, 1)), tok).nothrow();
          }(pipes[i].read_end.get(), sources[i].get_token(), bytes[i], results[i]));
    }
    uring::spawn([](std::vector<std::stop_source>& s) -> task<void> {  // the same turn, after the reads
      for (std::size_t i = 0; i < s.size(); i += 2) s[i].request_stop();
      co_return;
    }(sources));
    co_await uring::nop();
    for (int i = 1; i < kReads; i += 2) sources[i].request_stop();
    for (;;) {
      bool all = true;
      for (const auto& r : results) all = all && r.has_value();
      if (all) break;
      co_await uring::nop();
    }
  }());
  for (int i = 0; i < kReads; ++i) {
    ASSERT_TRUE(results[i].has_value()) << i;
    const bool took = results[i]->res == 1;
    if (i % 2 == 0) {
      EXPECT_EQ(results[i]->res, -ECANCELED) << "read " << i << " was stopped in its turn";
    }
    EXPECT_TRUE(took || results[i]->res == -ECANCELED) << i << ": " << results[i]->res;
    EXPECT_EQ(bytes[i], took ? 'b' : 0) << i;
    EXPECT_EQ(readable(pipes[i].read_end.get()), !took) << i << ": the byte is where the result says";
  }
}

// The only pending work is an operation cancelled before it reached the kernel: its completion is ready,
// so the loop must not go to sleep in the kernel (nothing there would ever wake it).
TEST_P(Time, ACancelledButUnsubmittedOperationDoesNotLetTheLoopSleep) {
  uring::executor ex(options());
  std::stop_source source;
  uring::io_result result{1};
  ex.run([&]() -> task<void> {
    uring::spawn([](std::stop_token tok, uring::io_result& out) -> task<void> {
      out = co_await uring::with_stop_token(uring::sleep_for(std::chrono::hours(1)), tok).nothrow();
      uring::executor::current()->stop();
    }(source.get_token(), result));
    uring::spawn([](std::stop_source& s) -> task<void> {  // same turn, after the sleep was queued
      s.request_stop();
      co_return;
    }(source));
    co_return;
  }());
  ex.run();  // both run in its first turn; returns when the sleeper stops the executor
  EXPECT_EQ(result.res, -ECANCELED);
}

TEST_P(Time, TasksPassTheirStopTokenToTheOperationsInside) {
  pipe_pair p;
  std::stop_source source;
  auto inner = [&]() -> task<void> {
    char buf[4];
    co_await uring::read(p.read_end.get(), buf);  // no explicit token: inherits the task's
  };
  auto err = error_of([&] {
    run([&]() -> task<void> {
      auto t = inner();
      // Give the whole chain a token the way when_any does.
      auto h = t.release();
      h.promise().set_stop_token(source.get_token());
      uring::task<void> owned(h);
      uring::spawn([](std::stop_source& s) -> task<void> {
        co_await uring::nop();
        s.request_stop();
      }(source));
      co_await owned;
    }());
  });
  EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST_P(Time, ManyCancellationsFromAnotherThreadLoseNothing) {
  const int n = static_cast<int>(uring::test::scaled(2000));
  pipe_pair p;
  int cancelled = 0, finished = 0;
  std::vector<std::stop_source> sources(static_cast<std::size_t>(n));
  std::thread stopper;
  run([&]() -> task<void> {
    auto reader = [&](std::stop_token tok) -> task<void> {
      char buf[1];
      auto r = co_await uring::with_stop_token(uring::read(p.read_end.get(), buf), tok).nothrow();
      if (r.res == -ECANCELED) ++cancelled;
      ++finished;
    };
    for (auto& s : sources) uring::spawn(reader(s.get_token()));
    co_await uring::nop();
    stopper = std::thread([&] {
      for (auto& s : sources) s.request_stop();
    });
    while (finished < n) co_await uring::sleep_for(1ms);
  }());
  stopper.join();
  EXPECT_EQ(finished, n);
  EXPECT_EQ(cancelled, n);
}

TEST_P(Time, PollReportsReadiness) {
  pipe_pair p;
  auto events = run([&]() -> task<unsigned> {
    uring::spawn([](int fd) -> task<void> {
      co_await uring::sleep_for(2ms);
      co_await uring::write(fd, std::string_view("x"));
    }(p.write_end.get()));
    co_return co_await uring::poll(p.read_end.get(), POLLIN);
  }());
  EXPECT_TRUE(events & POLLIN);
  // Writable at once: a fresh pipe has room.
  auto out = run([&]() -> task<unsigned> { co_return co_await uring::poll(p.write_end.get(), POLLOUT); }());
  EXPECT_TRUE(out & POLLOUT);
}

TEST_P(Time, PollSeesHangUp) {
  pipe_pair p;
  p.write_end.reset();
  auto events = run([&]() -> task<unsigned> { co_return co_await uring::poll(p.read_end.get(), POLLIN); }());
  EXPECT_TRUE(events & POLLHUP);
}

TEST_P(Time, StopWithPendingTimersShutsDownCleanly) {
  uring::executor ex(options());
  int woke = 0;
  ex.run([&]() -> task<void> {
    for (int i = 0; i < 100; ++i) {
      uring::spawn([](int& w) -> task<void> {
        co_await uring::sleep_for(10s);
        ++w;
      }(woke));
    }
    co_await uring::nop();
    uring::executor::current()->stop();
  }());
  EXPECT_EQ(woke, 0);
}

INSTANTIATE_BACKENDS(Time);

}  // namespace
