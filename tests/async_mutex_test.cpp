// async_mutex on a real executor: exclusion across suspension points, FIFO hand-off, try_lock, hand-off on a
// later turn (never inline, so a long queue runs in constant stack), guard moves, executor shutdown with
// waiters, and the destruction rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "sync_util.hpp"
#include "test_util.hpp"

namespace {

using uring::async_mutex;
using uring::async_semaphore;
using uring::executor;
using uring::task;
using uring::test::iota;
using uring::test::SyncDeathTest;
using uring::test::turns;
using uring::test::turns_until;

// Where the stack is now, as seen from a plain function called from a coroutine body.
[[gnu::noinline]] std::uintptr_t stack_position() {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}

TEST(AsyncMutex, LockingAFreeMutexDoesNotSuspend) {
  executor ex;
  async_mutex m;
  ex.run([&]() -> task<void> {
    auto enters = executor::current()->stats().enters;
    auto guard = co_await m.lock();
    EXPECT_TRUE(guard.owns_lock());
    EXPECT_TRUE(m.is_locked());
    EXPECT_EQ(executor::current()->stats().enters, enters);  // no turn of the loop went by
  }());
  EXPECT_FALSE(m.is_locked());
}

TEST(AsyncMutex, ExcludesAcrossSuspensionPoints) {
  executor ex;
  async_mutex m;
  constexpr int kWorkers = 16;
  const long rounds = uring::test::scaled(200);
  long counter = 0;
  int holders = 0, max_holders = 0, done = 0;
  auto worker = [&]() -> task<void> {
    for (long i = 0; i < rounds; ++i) {
      auto guard = co_await m.lock();
      max_holders = std::max(max_holders, ++holders);
      long seen = counter;
      co_await uring::nop();  // every other worker runs here; none may enter
      counter = seen + 1;     // a lost update if anyone did
      --holders;
    }
    ++done;
  };
  ex.run([&]() -> task<void> {
    for (int w = 0; w < kWorkers; ++w) uring::spawn(worker());
    EXPECT_TRUE(co_await turns_until([&] { return done == kWorkers; }, 1'000'000));
  }());
  EXPECT_EQ(counter, kWorkers * rounds);
  EXPECT_EQ(max_holders, 1);
  EXPECT_FALSE(m.is_locked());
}

TEST(AsyncMutex, WaitersAcquireInFifoOrder) {
  executor ex;
  async_mutex m;
  constexpr int kWaiters = 50;
  std::vector<int> order;
  auto waiter = [&](int id) -> task<void> {
    auto guard = co_await m.lock();
    order.push_back(id);
    co_await uring::nop();  // hold it across a turn, so the queue behind stays put
  };
  ex.run([&]() -> task<void> {
    auto guard = co_await m.lock();
    for (int i = 0; i < kWaiters; ++i) uring::spawn(waiter(i));
    co_await turns(3);  // every waiter has started and queued
    guard.unlock();
    auto last = co_await m.lock();  // queued behind all of them
    EXPECT_EQ(order.size(), std::size_t{kWaiters});
  }());
  EXPECT_EQ(order, iota(kWaiters));
}

TEST(AsyncMutex, TryLockSucceedsOnlyWhenFreeAndNeverOvertakesAHandOff) {
  executor ex;
  async_mutex m;
  bool waiter_got_it = false;
  auto waiter = [&]() -> task<void> {
    auto guard = co_await m.lock();
    waiter_got_it = true;
  };
  ex.run([&]() -> task<void> {
    EXPECT_TRUE(m.try_lock());
    EXPECT_FALSE(m.try_lock());
    uring::spawn(waiter());
    co_await turns(3);  // the waiter queued
    m.unlock();
    // Ownership went straight to the waiter, which has not run yet: nobody may take the mutex meanwhile.
    EXPECT_TRUE(m.is_locked());
    EXPECT_FALSE(waiter_got_it);
    EXPECT_FALSE(m.try_lock());
    EXPECT_TRUE(co_await turns_until([&] { return !m.is_locked(); }));
    EXPECT_TRUE(waiter_got_it);
    EXPECT_TRUE(m.try_lock());
    async_mutex::scoped_lock adopted(m, std::adopt_lock);
    EXPECT_TRUE(adopted.owns_lock());
  }());
  EXPECT_FALSE(m.is_locked());
}

TEST(AsyncMutex, UnlockNeverResumesTheWaiterInline) {
  executor ex;
  async_mutex m;
  std::vector<std::string> log;
  auto waiter = [&]() -> task<void> {
    log.push_back("waiter locks");
    auto guard = co_await m.lock();
    log.push_back("waiter acquired");
  };
  ex.run([&]() -> task<void> {
    auto guard = co_await m.lock();
    uring::spawn(waiter());
    co_await turns(3);
    guard.unlock();
    log.push_back("holder unlocked");  // runs before the waiter: unlock only scheduled it
    EXPECT_FALSE(m.try_lock());        // the waiter owns it already, it just has not run
    log.push_back("holder continues");
    EXPECT_TRUE(co_await turns_until([&] { return !m.is_locked(); }));
  }());
  EXPECT_EQ(log, (std::vector<std::string>{"waiter locks", "holder unlocked", "holder continues",
                                           "waiter acquired"}));
}

TEST(AsyncMutex, TenThousandWaitersRunInOrderInConstantStack) {
  executor ex;
  async_mutex m;
  const int waiters = static_cast<int>(uring::test::scaled(10'000));
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(waiters));
  std::uintptr_t lowest = UINTPTR_MAX, highest = 0;
  auto waiter = [&](int id) -> task<void> {
    auto guard = co_await m.lock();
    order.push_back(id);
    std::uintptr_t here = stack_position();
    lowest = std::min(lowest, here);
    highest = std::max(highest, here);
  };  // the guard hands off to the next waiter here
  ex.run([&]() -> task<void> {
    auto guard = co_await m.lock();
    for (int i = 0; i < waiters; ++i) uring::spawn(waiter(i));
    co_await turns(3);
    guard.unlock();
    auto last = co_await m.lock();
  }());
  EXPECT_EQ(order, iota(waiters));
  // Each hand-off is resumed by the loop, at the same depth. Had unlock() resumed the next waiter inline,
  // the stack would have grown by at least a frame per waiter: hundreds of KiB here.
  EXPECT_LT(highest - lowest, 16u * 1024) << "stack spread over " << waiters << " hand-offs";
}

task<async_mutex::scoped_lock> lock_and_return(async_mutex& m) { co_return co_await m.lock(); }

TEST(AsyncMutex, GuardMovesLikeUniqueLock) {
  async_mutex a, b;
  ASSERT_TRUE(a.try_lock());
  async_mutex::scoped_lock g1(a, std::adopt_lock);
  async_mutex::scoped_lock g2(std::move(g1));
  EXPECT_FALSE(g1.owns_lock());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_FALSE(static_cast<bool>(g1));
  EXPECT_EQ(g2.mutex(), &a);
  EXPECT_TRUE(a.is_locked());

  ASSERT_TRUE(b.try_lock());
  async_mutex::scoped_lock g3(b, std::adopt_lock);
  g2 = std::move(g3);  // g2 lets go of a and takes over b
  EXPECT_FALSE(a.is_locked());
  EXPECT_TRUE(b.is_locked());
  EXPECT_EQ(g2.mutex(), &b);
  EXPECT_FALSE(g3.owns_lock());  // NOLINT(bugprone-use-after-move)

  g2.unlock();
  EXPECT_FALSE(b.is_locked());
  g2.unlock();  // owns nothing: does nothing
  EXPECT_FALSE(g2.owns_lock());

  ASSERT_TRUE(a.try_lock());
  async_mutex::scoped_lock g4(a, std::adopt_lock);
  EXPECT_EQ(g4.release(), &a);  // disowned, still locked
  EXPECT_TRUE(a.is_locked());
  a.unlock();

  // A guard leaves the coroutine that locked and keeps the mutex locked on the way.
  executor ex;
  ex.run([&]() -> task<void> {
    async_mutex::scoped_lock outer;
    EXPECT_FALSE(outer.owns_lock());
    outer = co_await lock_and_return(a);
    EXPECT_TRUE(a.is_locked());
    EXPECT_EQ(outer.mutex(), &a);
  }());
  EXPECT_FALSE(a.is_locked());
}

TEST(AsyncMutex, WaitingWithoutAnExecutorThrowsAndLeavesNoWaiter) {
  async_mutex m;
  ASSERT_TRUE(m.try_lock());
  auto t = [](async_mutex& mutex) -> task<void> { auto g = co_await mutex.lock(); }(m);
  auto h = t.release();
  h.resume();  // by hand, outside any executor: the lock must be refused, not queued
  ASSERT_TRUE(h.done());
  EXPECT_THROW(h.promise().result(), std::logic_error);
  h.destroy();
  m.unlock();
  EXPECT_FALSE(m.is_locked());
}

// Stop destroys every frame. Whichever order that happens in, the mutex must come out free and usable.
TEST(AsyncMutex, ExecutorStopLeavesTheMutexFree) {
  for (bool root_holds : {true, false}) {
    SCOPED_TRACE(root_holds ? "holder destroyed after its waiters" : "holder destroyed before its waiters");
    executor ex;
    async_mutex m;
    uring::test::pipe_pair p;
    int acquired = 0;
    auto block = [&]() -> task<void> {
      char byte;
      co_await uring::read(p.read_end.get(), std::span(&byte, 1));  // nobody writes
    };
    auto holder = [&]() -> task<void> {
      auto guard = co_await m.lock();
      co_await block();
    };
    auto waiter = [&]() -> task<void> {
      auto guard = co_await m.lock();
      ++acquired;
    };
    ex.run([&]() -> task<void> {
      async_mutex::scoped_lock guard;
      if (root_holds) {
        guard = co_await m.lock();
      } else {
        uring::spawn(holder());  // spawned first, so destroyed first: its unlock hands off to a doomed waiter
      }
      for (int i = 0; i < 3; ++i) uring::spawn(waiter());
      co_await turns(3);
      executor::current()->stop();
      co_await block();
    }());
    EXPECT_EQ(acquired, 0);
    EXPECT_FALSE(m.is_locked());
    ex.run([&]() -> task<void> { auto guard = co_await m.lock(); }());
  }
}

// The lock was handed to a waiter that never got to run before shutdown destroyed it: it passes on.
TEST(AsyncMutex, HandOffToADestroyedWaiterPassesOn) {
  executor ex;
  async_mutex m;
  async_semaphore go(0);
  uring::test::pipe_pair p;
  bool handed_off = false;
  auto waiter = [&]() -> task<void> {
    auto guard = co_await m.lock();
    ADD_FAILURE() << "ran after stop(): this test relies on the loop checking stop before the next turn";
  };
  auto opener = [&]() -> task<void> {
    co_await turns(3);  // the waiters have queued
    go.release();
  };
  ex.run([&]() -> task<void> {
    auto guard = co_await m.lock();
    for (int i = 0; i < 3; ++i) uring::spawn(waiter());
    uring::spawn(opener());
    // Resumed by a hand-off, i.e. among the turn's ready coroutines, right before the loop checks for
    // stop: the waiter scheduled below cannot run before the shutdown.
    co_await go.acquire();
    guard.unlock();  // the first waiter owns it now, and is scheduled
    handed_off = m.is_locked();
    executor::current()->stop();
    char byte;
    co_await uring::read(p.read_end.get(), std::span(&byte, 1));
  }());
  EXPECT_TRUE(handed_off);
  EXPECT_FALSE(m.is_locked());
}

TEST(AsyncMutex, ExecutorDestructorLeavesAMutexThatOutlivesItFree) {
  async_mutex m;
  uring::test::pipe_pair p;
  {
    executor ex;
    auto holder = [&]() -> task<void> {
      auto guard = co_await m.lock();
      char byte;
      co_await uring::read(p.read_end.get(), std::span(&byte, 1));
    };
    auto waiter = [&]() -> task<void> { auto guard = co_await m.lock(); };
    ex.run([&]() -> task<void> {
      uring::spawn(holder());
      for (int i = 0; i < 3; ++i) uring::spawn(waiter());
      co_await turns(3);
    }());
    EXPECT_TRUE(m.is_locked());  // the spawned work waits for the next run
  }
  EXPECT_FALSE(m.is_locked());
}

// ---- destruction rule
// ---------------------------------------------------------------------------------------

task<void> wait_for(async_mutex& m) { auto guard = co_await m.lock(); }

TEST_F(SyncDeathTest, DestroyingAMutexWithWaitersTerminates) {
  EXPECT_DEATH(
      {
        executor ex;
        auto m = std::make_unique<async_mutex>();
        ex.run([&]() -> task<void> {
          auto guard = co_await m->lock();
          uring::spawn(wait_for(*m));
          co_await turns(3);
          (void)guard.release();  // keep it locked past run()
        }());
        m.reset();
      },
      "async_mutex destroyed while locked \\(1 coroutine");
}

TEST_F(SyncDeathTest, DestroyingALockedMutexTerminates) {
  EXPECT_DEATH(
      {
        auto m = std::make_unique<async_mutex>();
        (void)m->try_lock();
        m.reset();
      },
      "async_mutex destroyed while locked \\(0 coroutine");
}

TEST_F(SyncDeathTest, UnlockingAnUnlockedMutexTerminates) {
  EXPECT_DEATH(
      {
        async_mutex m;
        m.unlock();
      },
      "not locked");
}

}  // namespace
