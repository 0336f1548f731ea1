// futex_wait and futex_wake on every backend: a wait ends when woken and not before, fails EAGAIN at once
// on a wrong value, a wake counts what it woke and honours its count and mask, a pending wait is cancelled
// by its stop token and its timeout, plain threads and executors wake each other, and the allowlist names
// both ops.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "expect_failure.hpp"
#include "race_rounds.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::op_kind;
using uring::task;
using uring::test::expect_failure;

constexpr auto kDeadline = 30s;  // for "eventually": generous on a loaded 2-core machine

// Wakes `word` until a wake finds `want` waits (they are all pending then), within the deadline.
task<std::uint32_t> wake_once_pending(std::atomic<std::uint32_t>& word, std::uint32_t want,
                                      std::uint32_t mask = uring::futex_match_any) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  std::uint32_t woken = 0;
  while (woken < want && std::chrono::steady_clock::now() < end) {
    woken += co_await uring::futex_wake(word, want - woken, mask);
    if (woken < want) co_await uring::nop();
  }
  co_return woken;
}

// Lets the executor turn until `done` reaches `want` (within the deadline).
task<void> turn_until(const int& done, int want) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (done < want && std::chrono::steady_clock::now() < end) co_await uring::nop();
}

task<void> wait_and_count(std::atomic<std::uint32_t>& word, std::uint32_t mask, int& done) {
  co_await uring::futex_wait(word, 0, mask);
  ++done;
}

class FutexOps : public uring::test::backend_test {};

TEST_P(FutexOps, AWaitEndsWhenWoken) {
  std::atomic<std::uint32_t> word{0};
  int done = 0;
  run([&]() -> task<void> {
    auto waiter = uring::spawn(wait_and_count(word, uring::futex_match_any, done));
    EXPECT_EQ(co_await wake_once_pending(word, 1), 1u);
    co_await std::move(waiter);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(co_await uring::futex_wake(word, 1), 0u);  // nobody waits any more
  }());
}

TEST_P(FutexOps, AWaitOnAWrongValueFailsEagainAtOnce) {
  std::atomic<std::uint32_t> word{7};
  run([&]() -> task<void> {
    co_await expect_failure([&] { return uring::futex_wait(word, 6); }, EAGAIN, "futex_wait");
  }());
}

TEST_P(FutexOps, AWakeEndsAtMostItsCountOldestFirst) {
  std::atomic<std::uint32_t> word{0};
  int done = 0;
  run([&]() -> task<void> {
    auto a = uring::spawn(wait_and_count(word, uring::futex_match_any, done));
    auto b = uring::spawn(wait_and_count(word, uring::futex_match_any, done));
    auto c = uring::spawn(wait_and_count(word, uring::futex_match_any, done));
    EXPECT_EQ(co_await wake_once_pending(word, 2), 2u);
    co_await turn_until(done, 2);
    EXPECT_EQ(done, 2);
    // The third still waits: a wake of any count finds exactly it.
    EXPECT_EQ(co_await uring::futex_wake(word, 100), 1u);
    co_await std::move(a);
    co_await std::move(b);
    co_await std::move(c);
    EXPECT_EQ(done, 3);
    EXPECT_EQ(co_await uring::futex_wake(word, 0), 0u);
  }());
}

TEST_P(FutexOps, TheMaskChoosesWhichWaitsAWakeEnds) {
  std::atomic<std::uint32_t> word{0};
  int low = 0;
  int high = 0;
  run([&]() -> task<void> {
    auto a = uring::spawn(wait_and_count(word, 0x1, low));
    auto b = uring::spawn(wait_and_count(word, 0x2, high));
    EXPECT_EQ(co_await wake_once_pending(word, 1, 0x2), 1u);
    co_await turn_until(high, 1);
    EXPECT_EQ(high, 1);
    EXPECT_EQ(low, 0);
    EXPECT_EQ(co_await uring::futex_wake(word, 10, 0x4), 0u);  // no wait shares a bit with 0x4
    EXPECT_EQ(co_await uring::futex_wake(word, 10, 0x3), 1u);
    co_await std::move(a);
    co_await std::move(b);
    EXPECT_EQ(low, 1);
  }());
}

TEST_P(FutexOps, APendingWaitIsCancelledByItsStopTokenAndItsTimeout) {
  std::atomic<std::uint32_t> word{0};
  run([&]() -> task<void> {
    std::stop_source source;
    int done = 0;
    auto body = [&]() -> task<void> {  // named: its captures outlive the spawned task
      const auto r =
          co_await uring::with_stop_token(uring::futex_wait(word, 0).nothrow(), source.get_token());
      EXPECT_EQ(r.res, -ECANCELED);
      ++done;
    };
    auto waiter = uring::spawn(body());
    co_await uring::nop();
    co_await uring::nop();
    source.request_stop();
    co_await std::move(waiter);
    EXPECT_EQ(done, 1);
    const auto timed = co_await uring::with_timeout(uring::futex_wait(word, 0).nothrow(), 20ms);
    EXPECT_EQ(timed.res, -ETIMEDOUT);
    // Neither left a wait behind.
    EXPECT_EQ(co_await uring::futex_wake(word, 10), 0u);
  }());
}

TEST_P(FutexOps, APlainThreadWakesAnExecutorsWait) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<int> woken{0};
  std::jthread waker([&] {
    const auto end = std::chrono::steady_clock::now() + kDeadline;
    while (woken.load() == 0 && std::chrono::steady_clock::now() < end) {
      const int n = uring::futex_wake_now(word, 1);
      if (n > 0) woken += n;
      std::this_thread::yield();
    }
  });
  run([&]() -> task<void> { co_await uring::futex_wait(word, 0); }());
  waker.join();
  EXPECT_EQ(woken.load(), 1);
}

TEST_P(FutexOps, AnExecutorWakesAPlainThread) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<bool> done{false};
  std::jthread sleeper([&] {
    while (uring::futex_wait_now(word, 0) != 0 && word.load() == 0) {
    }
    done = true;
  });
  run([&]() -> task<void> {
    EXPECT_EQ(co_await wake_once_pending(word, 1), 1u);
    co_return;
  }());
  if (!done.load()) {  // the wake never reached it: release it, so that the failure does not hang
    word = 1;
    uring::futex_wake_now(word, 1);
  }
  sleeper.join();
  EXPECT_TRUE(done.load());
}

TEST_P(FutexOps, AnExecutorOnAnotherThreadWakesAWait) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<bool> waited{false};
  std::jthread other([&] {
    uring::executor ex(options());
    ex.run([&]() -> task<void> {
      co_await uring::futex_wait(word, 0);
      waited = true;
    }());
  });
  std::uint32_t woken = run(wake_once_pending(word, 1));
  other.join();
  EXPECT_EQ(woken, 1u);
  EXPECT_TRUE(waited.load());
}

TEST_P(FutexOps, TheAllowlistRefusesBothUnlessListed) {
  std::atomic<std::uint32_t> word{0};
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::nop};
  {
    uring::executor ex(o);
    ex.run([&]() -> task<void> {
      EXPECT_EQ((co_await uring::futex_wait(word, 0).nothrow()).res, -EACCES);
      EXPECT_EQ((co_await uring::futex_wake(word, 1).nothrow()).res, -EACCES);
      co_await expect_failure([&] { return uring::futex_wake(word, 1); }, EACCES, "futex_wake");
    }());
  }
  // Listed, they run (natively the ring's kernel restrictions name their opcodes).
  o.allowed_ops = {op_kind::futex_wait, op_kind::futex_wake};
  uring::executor allowed(o);
  allowed.run([&]() -> task<void> {
    EXPECT_EQ((co_await uring::futex_wait(word, 1).nothrow()).res, -EAGAIN);
    EXPECT_EQ((co_await uring::futex_wake(word, 1).nothrow()).res, 0);
  }());
}

// Waits on `word` until it holds `want`, rechecking after every wake (and after EAGAIN: it changed).
// False if it takes longer than the deadline (a lost wake-up).
task<bool> wait_for_value(std::atomic<std::uint32_t>& word, std::uint32_t want) {
  for (std::uint32_t seen = word.load(); seen != want; seen = word.load()) {
    const auto r = co_await uring::with_timeout(uring::futex_wait(word, seen).nothrow(), kDeadline);
    if (r.res == -ETIMEDOUT) co_return false;
  }
  co_return true;
}

// Two executors on two threads hand a turn back and forth through one word: every store is followed by a
// wake, and no wake may be lost between a waiter's check of the word and its wait.
TEST_P(FutexOps, TwoExecutorsTakeTurnsThroughOneWordWithoutLosingAWake) {
  std::atomic<std::uint32_t> word{0};
  const auto turns = static_cast<std::uint32_t>(uring::test::scaled(1000));
  auto player = [&](std::uint32_t parity) -> task<void> {
    for (std::uint32_t t = parity; t < 2 * turns; t += 2) {
      const bool mine = co_await wait_for_value(word, t);
      EXPECT_TRUE(mine) << "turn " << t;
      if (!mine) co_return;
      word.store(t + 1);
      co_await uring::futex_wake(word, 1);
    }
  };
  std::jthread other([&] {
    uring::executor ex(options());
    ex.run(player(1));
  });
  run(player(0));
  other.join();
  EXPECT_EQ(word.load(), 2 * turns);
}

// A wake and a cancel racing for one wait: the wait ends once, woken exactly when the wake counted it.
TEST_P(FutexOps, AWakeRacingACancelIsCountedExactlyWhenTheWaitSucceeds) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<int> woken_in{-1};
  uring::test::race_rounds waker([&](int r) { woken_in = uring::futex_wake_now(word, 1) == 1 ? r : -1; });
  int succeeded = 0;
  run([&]() -> task<void> {
    for (int r = 1; r <= 200; ++r) {
      std::stop_source source;
      uring::io_result result{1};
      auto body = [&]() -> task<void> {
        result = co_await uring::with_stop_token(uring::futex_wait(word, 0).nothrow(), source.get_token());
      };
      auto waiter = uring::spawn(body());
      co_await uring::nop();  // the wait is armed
      waker.open(r);
      source.request_stop();
      co_await std::move(waiter);
      const auto end = std::chrono::steady_clock::now() + kDeadline;
      while (!waker.done(r) && std::chrono::steady_clock::now() < end) co_await uring::nop();
      EXPECT_TRUE(waker.done(r));
      if (!waker.done(r)) co_return;
      EXPECT_TRUE(result.res == 0 || result.res == -ECANCELED) << result.res;
      EXPECT_EQ(result.res == 0, woken_in.load() == r) << "round " << r << " res " << result.res;
      succeeded += result.res == 0;
    }
  }());
  RecordProperty("woken", succeeded);
}

// An executor that ends with a wait pending takes it back: no later wake finds it.
TEST_P(FutexOps, AnExecutorEndingWithAWaitPendingLeavesNoneBehind) {
  std::atomic<std::uint32_t> word{0};
  int never = 0;
  {
    uring::executor ex(options());
    ex.run([&]() -> task<void> {
      uring::spawn(wait_and_count(word, uring::futex_match_any, never));
      co_await uring::nop();
      co_await uring::nop();
    }());
  }
  EXPECT_EQ(uring::futex_wake_now(word, 10), 0);
  EXPECT_EQ(never, 0);
}

INSTANTIATE_BACKENDS(FutexOps);

TEST(FutexOpTable, EachKindIsNamedAfterItsKernelOperation) {
  EXPECT_STREQ(uring::to_string(op_kind::futex_wait), "futex_wait");
  EXPECT_STREQ(uring::to_string(op_kind::futex_wake), "futex_wake");
  EXPECT_EQ(uring::opcode_name(51), "FUTEX_WAIT");
  EXPECT_EQ(uring::opcode_name(52), "FUTEX_WAKE");
  const uring::op_allowlist list{op_kind::futex_wait, op_kind::futex_wake};
  EXPECT_EQ(uring::to_string(list), "futex_wait,futex_wake");
}

}  // namespace
