// The periodic timer (uring/ticker.hpp): ticks never early, missed periods counted, a stop ending one wait,
// cancel() ending the ticker, nothing left in flight once it is gone; one request natively with multishot
// timeouts, one timer per awaited tick without. Every backend, and native with multishot disabled.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <stop_token>
#include <system_error>

#include <uring/uring.hpp>

#include "backends.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::ticker;
using clock_type = std::chrono::steady_clock;

// What awaiting the ticker's next() throws: its errno, or 0 with the count in `n`.
task<int> error_of_next(ticker& t, std::uint64_t& n, std::stop_token stop = {}) {
  try {
    n = co_await uring::with_stop_token(t.next(), std::move(stop));
  } catch (const std::system_error& e) {
    co_return e.code().value();
  }
  co_return 0;
}

class Ticker : public uring::test::backend_test {};

TEST_P(Ticker, TicksAreNeverEarlyAndEachKeptUpWaitYieldsOne) {
  run([]() -> task<void> {
    ticker t(10ms);
    const auto before = clock_type::now();  // the first next() arms it: the periods start after this
    std::uint64_t total = 0;
    for (int i = 0; i < 6; ++i) {
      const std::uint64_t n = co_await t.next();
      EXPECT_GE(n, 1u);
      total += n;
    }
    // Every period yielded had ended.
    EXPECT_GE(clock_type::now() - before, std::chrono::milliseconds(10 * static_cast<long>(total)));
    EXPECT_EQ(t.period(), 10ms);
  }());
}

TEST_P(Ticker, CountsThePeriodsThatEndedWhileNobodyWaited) {
  run([]() -> task<void> {
    ticker t(10ms);
    co_await t.next();
    co_await uring::sleep_for(55ms);  // a consumer that falls behind: five periods end meanwhile
    const std::uint64_t n = co_await t.next();
    EXPECT_GE(n, 3u) << "the periods missed while nobody waited were not counted";
  }());
}

TEST_P(Ticker, AStopEndsOneWaitAndTheTickerKeepsTicking) {
  run([]() -> task<void> {
    ticker t(200ms);
    std::stop_source src;
    std::uint64_t n = 0;
    auto stopper = [](std::stop_source& s) -> task<void> {
      co_await uring::nop();  // the next() below is waiting
      s.request_stop();
    };
    auto [err, ignored] = co_await uring::when_all(error_of_next(t, n, src.get_token()), stopper(src));
    EXPECT_EQ(err, ECANCELED);
    EXPECT_GE(co_await t.next(), 1u);  // the same ticker, still ticking
  }());
}

TEST_P(Ticker, CancelEndsAWaitingNextAndTheNextNextRearms) {
  run([]() -> task<void> {
    ticker t(200ms);
    std::uint64_t n = 0;
    auto canceller = [](ticker& t) -> task<void> {
      co_await uring::nop();
      t.cancel();
    };
    auto [err, ignored] = co_await uring::when_all(error_of_next(t, n), canceller(t));
    EXPECT_EQ(err, ECANCELED);
    const auto rearmed = clock_type::now();
    EXPECT_EQ(co_await t.next(), 1u);
    EXPECT_GE(clock_type::now() - rearmed, 199ms) << "counted from before the cancel";
  }());
}

TEST_P(Ticker, NothingIsLeftInFlightOnceItIsGone) {
  uring::executor ex(options());
  ex.run([](uring::executor& ex) -> task<void> {
    {
      ticker t(1ms);
      co_await t.next();
    }
    { ticker never_awaited(1ms); }
    for (int i = 0; i < 1000 && !ex.inflight().empty(); ++i) co_await uring::nop();
    EXPECT_TRUE(ex.inflight().empty()) << ex.inflight().size() << " operations still in flight";
  }(ex));
}

// A multishot timeout is off the kernel's timeout list from its expiry until its completion's task work
// re-arms it: a cancel that lands in between finds nothing, and the timer would tick on for good (a
// DEFER_TASKRUN ring shows it every time: the enter submits the cancel before it runs the task work).
// The executor cancels again on each completion that still says "more".
TEST_P(Ticker, ACancelThatMissesTheTimerBetweenTwoTicksIsSentAgain) {
  uring::executor ex(options());
  ex.run([](uring::executor& ex) -> task<void> {
    {
      ticker t(1ms);
      co_await t.next();
      // Hold the thread past an expiry without entering the kernel: its task work is pending.
      const auto until = clock_type::now() + 5ms;
      while (clock_type::now() < until) {
      }
    }  // destroyed: cancelled
    const auto limit = clock_type::now() + 2s;
    while (!ex.inflight().empty() && clock_type::now() < limit) co_await uring::sleep_for(1ms);
    EXPECT_TRUE(ex.inflight().empty())
        << "the ticker's timer is still ticking: " << ex.inflight().size() << " operations in flight";
  }(ex));
}

TEST_P(Ticker, OneRequestWithMultishotTimeoutsElseOneTimerPerWait) {
  uring::executor ex(options());
  ex.run([]() -> task<void> {
    ticker t(2ms);
    for (int i = 0; i < 5; ++i) co_await t.next();
  }());
  const std::uint64_t timers = ex.stats().started(uring::op_kind::timeout);
  if (ex.plan().multishot_timeout) {
    EXPECT_EQ(timers, 1u);
  } else {
    EXPECT_GE(timers, 1u);
    EXPECT_LE(timers, 5u);
  }
}

TEST_P(Ticker, APeriodUnderAMicrosecondIsRefused) {
  EXPECT_THROW(ticker(0ns), std::invalid_argument);
  EXPECT_THROW(ticker(999ns), std::invalid_argument);
  EXPECT_NO_THROW(ticker(1us));
}

INSTANTIATE_BACKENDS(Ticker);

// Native with multishot disabled takes the same road as the emulation.
TEST(TickerWithoutMultishot, CountsTheSameWithOneTimerPerWait) {
  uring::executor_options o;
  o.backend = uring::backend_kind::native;
  o.disable = uring::feature::multishot;
  uring::executor ex(o);
  ASSERT_FALSE(ex.plan().multishot_timeout);
  ex.run([]() -> task<void> {
    ticker t(10ms);
    co_await t.next();
    co_await uring::sleep_for(55ms);
    EXPECT_GE(co_await t.next(), 3u);
  }());
  EXPECT_GE(ex.stats().started(uring::op_kind::timeout), 2u);
}

}  // namespace
