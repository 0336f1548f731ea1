// task<T>: laziness, values, references, exceptions, and constant stack over long synchronous chains.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include <uring/io.hpp>
#include <uring/sync_wait.hpp>
#include <uring/task.hpp>

#include "test_util.hpp"

namespace {

using uring::task;

task<int> answer() { co_return 42; }
task<std::string> greeting(std::string who) { co_return "hello " + who; }
task<void> set_flag(bool& flag) {
  flag = true;
  co_return;
}
task<int&> ref_to(int& x) { co_return x; }
task<int> thrower() {
  throw std::runtime_error("boom");
  co_return 0;
}
task<std::unique_ptr<int>> move_only() { co_return std::make_unique<int>(7); }

TEST(Task, IsLazyUntilAwaited) {
  bool flag = false;
  {
    auto t = set_flag(flag);
    EXPECT_FALSE(flag);
  }  // destroyed without running
  EXPECT_FALSE(flag);
  uring::sync_wait(set_flag(flag));
  EXPECT_TRUE(flag);
}

TEST(Task, ReturnsValues) {
  EXPECT_EQ(uring::sync_wait(answer()), 42);
  EXPECT_EQ(uring::sync_wait(greeting("world")), "hello world");
  EXPECT_EQ(*uring::sync_wait(move_only()), 7);
}

TEST(Task, ReturnsReferences) {
  int x = 1;
  int& r = uring::sync_wait(ref_to(x));
  EXPECT_EQ(&r, &x);
}

TEST(Task, NestedAwaitsCompose) {
  auto outer = []() -> task<int> {
    int a = co_await answer();
    auto s = co_await greeting("x");
    co_return a + static_cast<int>(s.size());
  };
  EXPECT_EQ(uring::sync_wait(outer()), 42 + 7);
}

TEST(Task, ExceptionsPropagateToTheAwaiter) {
  auto outer = []() -> task<std::string> {
    try {
      co_await thrower();
    } catch (const std::runtime_error& e) {
      co_return std::string("caught ") + e.what();
    }
    co_return "not thrown";
  };
  EXPECT_EQ(uring::sync_wait(outer()), "caught boom");
  EXPECT_THROW(uring::sync_wait(thrower()), std::runtime_error);
}

TEST(Task, AwaitingAnEmptyTaskIsAClearError) {
  auto outer = []() -> task<void> {
    task<int> empty;
    co_await empty;
  };
  EXPECT_THROW(uring::sync_wait(outer()), std::logic_error);
}

// A million awaits that all complete synchronously: symmetric transfer must keep the stack flat.
// (g++ 12 does not guarantee the tail call of symmetric transfer: at -O0 or under ASan this overflows.)
TEST(Task, DeepSynchronousChainRunsInConstantStack) {
  const long n = uring::test::scaled(1'000'000);
  auto loop = [](long count) -> task<long> {
    long sum = 0;
    for (long i = 0; i < count; ++i) sum += co_await answer();
    co_return sum;
  };
  EXPECT_EQ(uring::sync_wait(loop(n)), 42 * n);
}

// Recursion through tasks: each level awaits the next, then the whole chain unwinds by symmetric transfer.
task<long> depth(long n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await depth(n - 1);
}

TEST(Task, DeepRecursiveChain) {
  const long n = uring::test::scaled(100'000);
  EXPECT_EQ(uring::sync_wait(depth(n)), n);
}

// Interleaving real I/O with synchronous completions keeps results in order.
TEST(Task, MixesIoAndSynchronousAwaits) {
  auto body = []() -> task<int> {
    int total = 0;
    for (int i = 0; i < 100; ++i) {
      co_await uring::nop();
      total += co_await answer();
    }
    co_return total;
  };
  EXPECT_EQ(uring::sync_wait(body()), 4200);
}

}  // namespace
