// async_semaphore on a real executor: try_acquire, bounded concurrency, release(n) waking waiters in order
// on a later turn, and the destruction rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include <uring/uring.hpp>

#include "sync_util.hpp"
#include "test_util.hpp"

namespace {

using uring::async_semaphore;
using uring::executor;
using uring::task;
using uring::test::iota;
using uring::test::SyncDeathTest;
using uring::test::turns;
using uring::test::turns_until;

TEST(AsyncSemaphore, RejectsBadArguments) {
  EXPECT_THROW(async_semaphore(-1), std::invalid_argument);
  EXPECT_THROW(async_semaphore(3, 2), std::invalid_argument);
  EXPECT_THROW(async_semaphore(0, 0), std::invalid_argument);
  async_semaphore s(1, 2);
  EXPECT_THROW(s.release(-1), std::invalid_argument);
  EXPECT_THROW(s.release(2), std::logic_error);  // 3 > max
  EXPECT_EQ(s.available(), 1);
  s.release();
  EXPECT_EQ(s.available(), 2);
  EXPECT_THROW(s.release(), std::logic_error);
  EXPECT_EQ(s.max(), 2);
}

TEST(AsyncSemaphore, TryAcquireTakesOnlyFreePermits) {
  async_semaphore s(2);
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
  s.release(2);
  EXPECT_EQ(s.available(), 2);
  EXPECT_EQ(s.max(), async_semaphore::kUnbounded);
}

TEST(AsyncSemaphore, AcquireWithAFreePermitDoesNotSuspend) {
  executor ex;
  async_semaphore s(1);
  ex.run([&]() -> task<void> {
    auto enters = executor::current()->stats().enters;
    co_await s.acquire();
    EXPECT_EQ(s.available(), 0);
    EXPECT_EQ(executor::current()->stats().enters, enters);
    s.release();
  }());
}

TEST(AsyncSemaphore, BoundsConcurrencyToItsCount) {
  executor ex;
  constexpr int kPermits = 3, kWorkers = 20;
  async_semaphore s(kPermits);
  const long rounds = uring::test::scaled(100);
  int inside = 0, most_inside = 0, done = 0;
  auto worker = [&]() -> task<void> {
    for (long i = 0; i < rounds; ++i) {
      co_await s.acquire();
      most_inside = std::max(most_inside, ++inside);
      co_await uring::nop();
      co_await uring::nop();
      --inside;
      s.release();
    }
    ++done;
  };
  ex.run([&]() -> task<void> {
    for (int w = 0; w < kWorkers; ++w) uring::spawn(worker());
    EXPECT_TRUE(co_await turns_until([&] { return done == kWorkers; }, 1'000'000));
  }());
  EXPECT_EQ(most_inside, kPermits);  // reached, never exceeded
  EXPECT_EQ(s.available(), kPermits);
}

TEST(AsyncSemaphore, ReleaseOfNWakesNWaitersInOrderOnALaterTurn) {
  executor ex;
  async_semaphore s(0);
  std::vector<int> woke;
  auto waiter = [&](int id) -> task<void> {
    co_await s.acquire();
    woke.push_back(id);
  };
  ex.run([&]() -> task<void> {
    for (int i = 0; i < 5; ++i) uring::spawn(waiter(i));
    EXPECT_TRUE(co_await turns_until([&] { return s.waiting() == 5; }));
    s.release(3);
    EXPECT_TRUE(woke.empty());  // handed over, not resumed inline
    EXPECT_EQ(s.waiting(), 2u);
    EXPECT_EQ(s.available(), 0);
    EXPECT_FALSE(s.try_acquire());  // the three permits belong to the first three waiters
    EXPECT_TRUE(co_await turns_until([&] { return woke.size() == 3; }));
    co_await turns(5);
    EXPECT_EQ(woke, iota(3));  // exactly three, the first three
    s.release(4);              // two to the waiters left, two to the count
    EXPECT_EQ(s.available(), 2);
    EXPECT_TRUE(co_await turns_until([&] { return woke.size() == 5; }));
  }());
  EXPECT_EQ(woke, iota(5));
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(AsyncSemaphore, ManyWaitersAreServedInOrder) {
  executor ex;
  async_semaphore s(0, 1);
  const int waiters = static_cast<int>(uring::test::scaled(10'000));
  std::vector<int> order;
  auto waiter = [&](int id) -> task<void> {
    co_await s.acquire();
    order.push_back(id);
    s.release();  // hands on to the next, which runs on a later turn
  };
  ex.run([&]() -> task<void> {
    for (int i = 0; i < waiters; ++i) uring::spawn(waiter(i));
    co_await turns(3);
    s.release();
    EXPECT_TRUE(
        co_await turns_until([&] { return static_cast<int>(order.size()) == waiters; }, 10 * waiters));
  }());
  EXPECT_EQ(order, iota(waiters));
  EXPECT_EQ(s.available(), 1);
}

// ---- destruction rule
// ---------------------------------------------------------------------------------------

task<void> wait_for(async_semaphore& s) { co_await s.acquire(); }

TEST_F(SyncDeathTest, DestroyingASemaphoreWithWaitersTerminates) {
  EXPECT_DEATH(
      {
        executor ex;
        auto s = std::make_unique<async_semaphore>(0);
        ex.run([&]() -> task<void> {
          uring::spawn(wait_for(*s));
          uring::spawn(wait_for(*s));
          co_await turns(3);
        }());
        s.reset();
      },
      "async_semaphore destroyed while 2 coroutine");
}

}  // namespace
