// task_scope on every messaging backend: members end before join returns, a stop cancels their I/O, the
// first failure stops the rest and is rethrown, and nothing (fd, frame) is left behind.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <uring/task_scope.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor_group;
using uring::task;
using uring::task_scope;
using uring::test::pipe_pair;
using uring::test::sentinel;

class Scope : public uring::test::backend_test {};

// Reads `fd`, which nobody writes: only a cancel ends it. Counts the ECANCELED it gets.
task<void> wait_on(int fd, std::atomic<int>& cancelled, std::atomic<int>& freed) {
  sentinel s{freed};
  char c;
  auto r = co_await uring::read(fd, uring::mutable_buffer(&c, 1)).nothrow();
  if (r.res == -ECANCELED) ++cancelled;
  if (!r) uring::throw_errno(-r.res, "read");
}

TEST_P(Scope, JoinWaitsForEveryMember) {
  std::atomic<int> ended{0};
  run([&]() -> task<void> {
    task_scope scope;
    for (int i = 0; i < 100; ++i) {
      scope.spawn([](int ms, std::atomic<int>& n) -> task<void> {
        co_await uring::sleep_for(std::chrono::milliseconds(ms));
        ++n;
      }(i % 7, ended));
    }
    co_await scope.join();
    EXPECT_EQ(ended.load(), 100);
    EXPECT_EQ(scope.size(), 0u);
  }());
  EXPECT_EQ(ended.load(), 100);
}

TEST_P(Scope, TheFirstFailureStopsTheRestAndIsRethrown) {
  pipe_pair p;
  std::atomic<int> cancelled{0}, freed{0};
  try {
    run([&]() -> task<void> {
      task_scope scope;
      for (int i = 0; i < 10; ++i) scope.spawn(wait_on(p.read_end.get(), cancelled, freed));
      scope.spawn([]() -> task<void> {
        co_await uring::sleep_for(2ms);
        throw std::runtime_error("member failed");
      }());
      co_await scope.join();
    }());
    FAIL() << "expected the member's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "member failed");
  }
  EXPECT_EQ(cancelled.load(), 10);
  EXPECT_EQ(freed.load(), 10);
}

TEST_P(Scope, RequestStopCancelsMembersMidIoWithoutAFailure) {
  pipe_pair p;
  std::atomic<int> cancelled{0}, freed{0};
  run([&]() -> task<void> {
    task_scope scope;
    for (int i = 0; i < 20; ++i) scope.spawn(wait_on(p.read_end.get(), cancelled, freed));
    co_await uring::sleep_for(1ms);
    scope.request_stop();
    co_await scope.join();  // the cancels the stop caused are not failures
  }());
  EXPECT_EQ(cancelled.load(), 20);
  EXPECT_EQ(freed.load(), 20);
}

task<void> nothing() { co_return; }

TEST_P(Scope, AJoinTakesATimeoutAndMayBeAwaitedAgain) {
  pipe_pair p;
  std::atomic<int> cancelled{0}, freed{0};
  int err = 0;
  run([&]() -> task<void> {
    task_scope scope;
    for (int i = 0; i < 5; ++i) scope.spawn(wait_on(p.read_end.get(), cancelled, freed));
    try {
      co_await uring::with_timeout(scope.join(), 10ms);
    } catch (const std::system_error& e) {
      err = e.code().value();
    }
    EXPECT_EQ(scope.size(), 5u);  // the members run on
    scope.request_stop();
    co_await scope.join();
  }());
  EXPECT_EQ(err, ETIMEDOUT);
  EXPECT_EQ(freed.load(), 5);
}

TEST_P(Scope, SpawningIntoAJoinedScopeIsAnError) {
  run([]() -> task<void> {
    task_scope scope;
    scope.spawn(nothing());
    co_await scope.join();
    EXPECT_THROW(scope.spawn(nothing()), std::logic_error);
  }());
}

TEST_P(Scope, MembersMaySpawnMoreMembers) {
  std::atomic<int> ended{0};
  run([&]() -> task<void> {
    task_scope scope;
    scope.spawn([](task_scope& s, std::atomic<int>& n) -> task<void> {
      for (int i = 0; i < 5; ++i) {
        s.spawn([](std::atomic<int>& m) -> task<void> {
          co_await uring::sleep_for(1ms);
          ++m;
        }(n));
      }
      co_await uring::nop();
      ++n;
    }(scope, ended));
    co_await scope.join();
  }());
  EXPECT_EQ(ended.load(), 6);
}

TEST_P(Scope, ManyMembersOnTwoExecutorsCancelledMidIoLeaveNothingBehind) {
  executor_group group(2, options());
  pipe_pair p;
  const int n = static_cast<int>(uring::test::scaled(10000));
  std::atomic<int> cancelled{0}, freed{0};
  {
    task_scope scope;
    for (int i = 0; i < n; ++i)
      scope.spawn(group.at(static_cast<std::size_t>(i) % 2), wait_on(p.read_end.get(), cancelled, freed));
    scope.request_stop();
    scope.join_blocking();
  }
  EXPECT_EQ(freed.load(), n);      // every member's frame is gone
  EXPECT_LE(cancelled.load(), n);  // a member stopped before its read started never saw ECANCELED
  group.stop();
  EXPECT_NO_THROW(group.join());
}

TEST_P(Scope, DestroyedOnAPlainThreadItStopsAndWaitsForItsMembers) {
  executor_group group(2, options());
  pipe_pair p;
  std::atomic<int> cancelled{0}, freed{0};
  {
    task_scope scope;
    for (int i = 0; i < 50; ++i)
      scope.spawn(group.at(static_cast<std::size_t>(i) % 2), wait_on(p.read_end.get(), cancelled, freed));
  }
  EXPECT_EQ(freed.load(), 50);
}

TEST_P(Scope, AMemberItsExecutorShutsDownUnderCountsAsFailed) {
  executor_group group(1, options());
  pipe_pair p;
  std::atomic<int> started{0}, cancelled{0}, freed{0};
  task_scope scope;
  for (int i = 0; i < 5; ++i) {
    scope.spawn(group.at(0),
                [](int fd, std::atomic<int>& s, std::atomic<int>& c, std::atomic<int>& f) -> task<void> {
                  ++s;
                  co_await wait_on(fd, c, f);
                }(p.read_end.get(), started, cancelled, freed));
  }
  // Every member is waiting on its read before the stop (one the stop finds unstarted is destroyed without
  // running, and counts as failed as well, but has no sentinel to count yet).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (started.load() < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(started.load(), 5);
  group.stop();
  EXPECT_NO_THROW(group.join());  // members never let an exception reach their executor
  EXPECT_EQ(freed.load(), 5);
  int err = 0;
  try {
    scope.join_blocking();
  } catch (const std::system_error& e) {
    err = e.code().value();
  }
  EXPECT_EQ(err, ESHUTDOWN);
}

INSTANTIATE_MESSAGING_BACKENDS(Scope);

}  // namespace
