// uring/sync/ on every backend: a mutex, a semaphore, a latch and an event shared by coroutines on two
// executors (each on its own thread) and plain threads; cancellation that keeps every permit; an executor
// that ends with a coroutine waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "race_rounds.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::test::scaled;

constexpr auto kDeadline = 30s;  // for "eventually": generous on a loaded 2-core machine

// Polls `done` from a plain thread within the deadline.
template <class Pred>
bool eventually(Pred done) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// Lets this executor turn until `done` holds (within the deadline).
template <class Pred>
task<bool> turn_until(Pred done) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) co_return false;
    co_await uring::nop();
  }
  co_return true;
}

// `n` coroutines body(0) ... body(n - 1) on this executor, all joined.
task<void> many(int n, std::function<task<void>(int)> body) {
  std::vector<uring::join_handle<void>> handles;
  for (int i = 0; i < n; ++i) handles.push_back(uring::spawn(body(i)));
  for (auto& h : handles) co_await std::move(h);
}

// An executor of the test's configuration on a thread of its own, running make()'s task to its end.
std::jthread on_executor(uring::executor_options o, std::function<task<void>()> make) {
  return std::jthread([o, make = std::move(make)] {
    uring::executor ex(o);
    ex.run(make());
  });
}

// How many are inside a section at once, and the most ever.
struct occupancy {
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  void enter() {
    const int now = ++inside;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
  }
  void leave() { --inside; }
};

class Sync : public uring::test::backend_test {};

TEST_P(Sync, AMutexExcludesCoroutinesOnTwoExecutorsAndAPlainThread) {
  uring::sync::mutex m;
  long counter = 0;  // guarded by m alone: not atomic
  occupancy occ;
  const int rounds = static_cast<int>(scaled(300));
  auto body = [&](int) -> task<void> {
    for (int i = 0; i < rounds; ++i) {
      auto lock = co_await m.async_lock();
      EXPECT_TRUE(lock.owns_lock());
      occ.enter();
      const long seen = counter;
      co_await uring::nop();  // suspended inside: another holder would interleave here
      counter = seen + 1;
      occ.leave();
    }
  };
  {
    auto a = on_executor(options(), [&] { return many(4, body); });
    auto b = on_executor(options(), [&] { return many(4, body); });
    std::jthread plain([&] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard lock(m);
        occ.enter();
        const long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        occ.leave();
      }
    });
  }
  EXPECT_EQ(counter, 9L * rounds);
  EXPECT_EQ(occ.most.load(), 1);
  EXPECT_FALSE(m.is_locked());
  EXPECT_EQ(m.waiting(), 0u);
}

TEST_P(Sync, ASemaphoreNeverLetsMoreInThanItsCount) {
  uring::sync::semaphore s(3, 3);
  occupancy occ;
  std::atomic<long> entries{0};
  const int rounds = static_cast<int>(scaled(300));
  auto body = [&](int) -> task<void> {
    for (int i = 0; i < rounds; ++i) {
      co_await s.async_acquire();
      occ.enter();
      ++entries;
      co_await uring::nop();
      occ.leave();
      s.release();
    }
  };
  {
    auto a = on_executor(options(), [&] { return many(4, body); });
    auto b = on_executor(options(), [&] { return many(4, body); });
    auto plain = [&] {
      for (int i = 0; i < rounds; ++i) {
        s.acquire();
        occ.enter();
        ++entries;
        std::this_thread::yield();
        occ.leave();
        s.release();
      }
    };
    std::jthread p1(plain);
    std::jthread p2(plain);
  }
  EXPECT_EQ(entries.load(), 10L * rounds);
  EXPECT_LE(occ.most.load(), 3);
  EXPECT_GE(occ.most.load(), 1);
  EXPECT_EQ(s.available(), 3u);
  EXPECT_THROW(s.release(), std::logic_error);  // above its max
  EXPECT_TRUE(s.try_acquire_for(0ms));
  EXPECT_TRUE(s.try_acquire());
  EXPECT_TRUE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire_for(1ms));
  s.release(3);
}

TEST_P(Sync, ALatchReleasesItsWaitersExactlyWhenTheCountReachesZero) {
  uring::sync::latch l(3);
  std::atomic<int> released{0};
  auto waiter = [&]() -> task<void> {
    co_await l.async_wait();
    ++released;
  };
  {
    auto a = on_executor(options(), waiter);
    auto b = on_executor(options(), waiter);
    std::jthread plain([&] {
      l.wait();
      ++released;
    });
    ASSERT_TRUE(eventually([&] { return l.waiting() == 3; }));
    l.count_down(2);
    // Waiters leave the queue only when granted, under the lock: all three still wait.
    EXPECT_EQ(l.waiting(), 3u);
    EXPECT_EQ(l.remaining(), 1u);
    EXPECT_FALSE(l.try_wait());
    EXPECT_FALSE(l.wait_for(1ms));
    EXPECT_EQ(released.load(), 0);
    l.count_down();
  }
  EXPECT_EQ(released.load(), 3);
  EXPECT_TRUE(l.try_wait());
  EXPECT_THROW(l.count_down(), std::logic_error);
  run([&]() -> task<void> { co_await l.async_wait(); }());  // at zero, a wait passes at once
  l.arrive_and_wait(0);
}

TEST_P(Sync, AnEventWakesEveryWaiterAndStaysSetUntilReset) {
  uring::sync::event e;
  std::atomic<int> released{0};
  auto waiter = [&](int) -> task<void> {
    co_await e.async_wait();
    ++released;
  };
  {
    auto a = on_executor(options(), [&] { return many(3, waiter); });
    auto b = on_executor(options(), [&] { return many(3, waiter); });
    auto plain = [&] {
      e.wait();
      ++released;
    };
    std::jthread p1(plain);
    std::jthread p2(plain);
    ASSERT_TRUE(eventually([&] { return e.waiting() == 8; }));
    EXPECT_EQ(released.load(), 0);
    e.set();
    e.reset();  // every waiter was released by the set, under the lock: a reset takes nothing back
  }
  EXPECT_EQ(released.load(), 8);
  EXPECT_FALSE(e.is_set());
  EXPECT_FALSE(e.wait_for(1ms));
  e.set();
  EXPECT_TRUE(e.is_set());
  run([&]() -> task<void> { co_await e.async_wait(); }());  // set: passes at once
  e.wait();
}

// A waiter stopped by its token leaves without a permit, and the permit goes to the next waiter.
TEST_P(Sync, AStoppedWaiterLeavesThePermitToTheNext) {
  uring::sync::semaphore s(0);
  run([&]() -> task<void> {
    std::stop_source source;
    int stopped_res = 1;
    bool second_got = false;
    auto stopped = [&]() -> task<void> {
      stopped_res = (co_await uring::with_stop_token(s.async_acquire(), source.get_token()).nothrow()).res;
    };
    auto second = [&]() -> task<void> {
      co_await s.async_acquire();
      second_got = true;
    };
    auto a = uring::spawn(stopped());
    auto b = uring::spawn(second());
    EXPECT_TRUE(co_await turn_until([&] { return s.waiting() == 2; }));
    source.request_stop();
    co_await std::move(a);
    EXPECT_EQ(stopped_res, -ECANCELED);
    EXPECT_EQ(s.waiting(), 1u);
    s.release();
    co_await std::move(b);
    EXPECT_TRUE(second_got);
    EXPECT_EQ(s.available(), 0u);
    // The throwing form names the wait.
    std::stop_source already;
    already.request_stop();
    try {
      co_await uring::with_stop_token(s.async_acquire(), already.get_token());
      ADD_FAILURE() << "acquire did not throw";
    } catch (const std::system_error& err) {
      EXPECT_EQ(err.code().value(), ECANCELED);
      EXPECT_EQ(std::string(err.what()).rfind("semaphore acquire", 0), 0u) << err.what();
    }
  }());
}

task<void> hold_lock(uring::sync::mutex& m, int& got) {
  auto lock = co_await m.async_lock();
  ++got;
}

// with_timeout on a task stops its lock through the task's stop token: the waiter leaves the queue.
TEST_P(Sync, ATaskTimingOutWhileItWaitsForAMutexLeavesTheQueue) {
  uring::sync::mutex m;
  int got = 0;
  m.lock();
  run([&]() -> task<void> {
    try {
      co_await uring::with_timeout(hold_lock(m, got), 20ms);
      ADD_FAILURE() << "the lock did not time out";
    } catch (const std::system_error& err) {
      EXPECT_EQ(err.code().value(), ETIMEDOUT);
    }
    EXPECT_EQ(m.waiting(), 0u);
    m.unlock();
    co_await hold_lock(m, got);  // the mutex is whole
  }());
  EXPECT_EQ(got, 1);
  EXPECT_FALSE(m.is_locked());
}

// A stop and a release racing for one waiter, on two threads: the permit is either taken (and given back
// by the waiter) or left; never both, never lost.
TEST_P(Sync, AStopRacingAReleaseNeverLosesAPermit) {
  uring::sync::semaphore s(0);
  uring::test::race_rounds releaser([&](int) { s.release(); });
  int granted = 0;
  const int rounds = static_cast<int>(scaled(300));
  run([&]() -> task<void> {
    for (int r = 1; r <= rounds; ++r) {
      std::stop_source source;
      uring::io_result result{1};
      auto body = [&]() -> task<void> {
        result = co_await uring::with_stop_token(s.async_acquire(), source.get_token()).nothrow();
      };
      auto waiter = uring::spawn(body());
      EXPECT_TRUE(co_await turn_until([&] { return s.waiting() == 1; }));
      releaser.open(r);
      source.request_stop();
      co_await std::move(waiter);
      EXPECT_TRUE(co_await turn_until([&] { return releaser.done(r); }));
      EXPECT_TRUE(result.res == 0 || result.res == -ECANCELED) << result.res;
      if (result.res == 0) {
        ++granted;
        s.release();  // the waiter's permit, given back
      }
      EXPECT_EQ(s.available(), 1u) << "round " << r;
      EXPECT_TRUE(s.try_acquire());
    }
  }());
  RecordProperty("granted", granted);
}

// An executor destroyed while a coroutine waits for a mutex: the waiter leaves the queue, the holder's lock
// is untouched, and the mutex works on.
TEST_P(Sync, AnExecutorEndingWithACoroutineWaitingLeavesTheMutexWhole) {
  uring::sync::mutex m;
  int got = 0;
  m.lock();
  {
    uring::executor ex(options());
    ex.run([&]() -> task<void> {
      uring::spawn(hold_lock(m, got));
      EXPECT_TRUE(co_await turn_until([&] { return m.waiting() == 1; }));
    }());
  }
  EXPECT_EQ(m.waiting(), 0u);
  EXPECT_TRUE(m.is_locked());
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
  EXPECT_EQ(got, 0);
}

// An executor stopping while another thread releases the permit its coroutine waits for: whether the
// coroutine ran, was granted and dropped, or was freed while it waited, the permit comes back.
TEST_P(Sync, AnExecutorStoppingAsItsWaiterIsGrantedGivesThePermitBack) {
  uring::sync::semaphore s(0);
  const int rounds = static_cast<int>(scaled(50));
  for (int r = 0; r < rounds; ++r) {
    std::atomic<uring::executor*> running{nullptr};
    std::atomic<bool> stop_sent{false};
    std::jthread owner([&] {
      uring::executor ex(options());
      running = &ex;
      ex.run([&]() -> task<void> {
        co_await s.async_acquire();
        s.release();
      }());
      stop_sent.wait(false);  // the executor outlives the stop() call
    });
    ASSERT_TRUE(eventually([&] { return running.load() != nullptr && s.waiting() == 1; }));
    std::jthread releaser([&] { s.release(); });
    running.load()->stop();
    stop_sent = true;
    stop_sent.notify_one();
    releaser.join();
    owner.join();
    EXPECT_EQ(s.waiting(), 0u);
    ASSERT_EQ(s.available(), 1u) << "round " << r;
    EXPECT_TRUE(s.try_acquire());
  }
}

// The same, made certain: the grant is posted while the owner is busy in a turn that ends in its shutdown,
// which drops the resumption; the frame, freed, gives the permit back.
TEST_P(Sync, AGrantDroppedByAShutdownGoesBackToTheSemaphore) {
  uring::sync::semaphore s(0);
  std::atomic<bool> busy{false};
  std::atomic<bool> go_on{false};
  int resumed = 0;
  auto waiter = [&]() -> task<void> {
    co_await s.async_acquire();
    ++resumed;
    s.release();
  };
  // Started from the ready list, so its turn goes on to the stop (a completion's resumption would be
  // followed by the posted work first).
  auto blocker = [&]() -> task<void> {
    uring::executor::current()->stop();  // at the end of this turn
    busy = true;
    go_on.wait(false);  // the thread is held (not slept): the grant arrives meanwhile
    co_return;
  };
  std::jthread owner([&] {
    uring::executor ex(options());
    ex.run([&]() -> task<void> {
      uring::spawn(waiter());
      EXPECT_TRUE(co_await turn_until([&] { return s.waiting() == 1; }));
      uring::spawn(blocker());
      co_await uring::sleep_for(1h);  // ended by the shutdown
    }());
  });
  ASSERT_TRUE(eventually([&] { return busy.load(); }));
  s.release();  // granted: the resumption is posted to the busy owner
  EXPECT_EQ(s.available(), 0u);
  go_on = true;
  go_on.notify_one();
  owner.join();
  EXPECT_EQ(resumed, 0);
  EXPECT_EQ(s.waiting(), 0u);
  EXPECT_EQ(s.available(), 1u);
}

TEST_P(Sync, APlainThreadsTimedWaitsGiveUpAndLeaveTheQueue) {
  uring::sync::mutex m;
  m.lock();
  std::jthread other([&] { EXPECT_FALSE(m.try_lock_for(5ms)); });
  other.join();
  EXPECT_EQ(m.waiting(), 0u);
  m.unlock();
  std::jthread again([&] {
    EXPECT_TRUE(m.try_lock_for(1s));
    m.unlock();
  });
  again.join();
}

INSTANTIATE_BACKENDS(Sync);

}  // namespace
