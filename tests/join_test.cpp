// spawn's join_handle on every messaging backend: the value or exception comes back to a coroutine on
// any executor or to a plain thread; a dropped handle leaves errors to the executor, as a detached spawn.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::executor_group;
using uring::join_handle;
using uring::task;
using uring::test::this_id;

class Join : public uring::test::backend_test {};

task<int> twice(int v) {
  co_await uring::nop();
  co_return 2 * v;
}

task<int> fails() {
  co_await uring::nop();
  throw std::runtime_error("spawned failed");
}

TEST_P(Join, AwaitOnTheSameExecutorGivesTheValue) {
  EXPECT_EQ(run([]() -> task<int> {
              auto h = uring::spawn(twice(21));
              co_return co_await h;
            }()),
            42);
}

TEST_P(Join, AwaitFromAnotherExecutorResumesOnTheAwaitersThread) {
  executor_group group(2, options());
  auto [value, start, end, worker_id] =
      run([&]() -> task<std::tuple<int, std::thread::id, std::thread::id, std::thread::id>> {
        const auto here = this_id();
        std::thread::id there;
        auto h = uring::spawn(group.at(0), [&there]() -> task<int> {
          there = this_id();
          co_await uring::sleep_for(2ms);
          co_return 7;
        });
        int v = co_await h;
        co_return std::tuple{v, here, this_id(), there};
      }());
  EXPECT_EQ(value, 7);
  EXPECT_EQ(start, end);
  EXPECT_NE(worker_id, start);
}

TEST_P(Join, AnExceptionGoesToTheAwaiterAndNotToTheExecutor) {
  executor_group group(1, options());
  std::string what = run([&]() -> task<std::string> {
    auto local = uring::spawn(fails());
    auto remote = uring::spawn(group.at(0), fails());
    std::string seen;
    for (auto* h : {&local, &remote}) {
      try {
        (void)co_await *h;
      } catch (const std::runtime_error& e) {
        seen += e.what();
        seen += ";";
      }
    }
    co_return seen;
  }());
  EXPECT_EQ(what, "spawned failed;spawned failed;");
  group.stop();
  EXPECT_NO_THROW(group.join());  // the remote executor was not failed by an exception someone took
}

TEST_P(Join, APlainThreadGetsTheValueOrTheException) {
  executor_group group(2, options());
  auto h = uring::spawn(group.at(1), twice(5));
  EXPECT_EQ(h.get(), 10);
  auto bad = uring::spawn(group.at(0), fails());
  EXPECT_THROW(bad.get(), std::runtime_error);
  EXPECT_THROW(h.get(), std::logic_error);  // taken already
}

TEST_P(Join, BlockingOnAnExecutorsThreadIsRefused) {
  EXPECT_THROW(run([]() -> task<void> {
                 auto h = uring::spawn(twice(1));
                 (void)h.get();
                 co_return;
               }()),
               std::logic_error);
}

TEST_P(Join, ADroppedHandleLeavesTheExceptionToTheExecutor) {
  EXPECT_THROW(run([]() -> task<void> {
                 (void)uring::spawn(fails());
                 co_await uring::sleep_for(10s);  // the failure ends the run first
               }()),
               std::runtime_error);
}

TEST_P(Join, AHandleDroppedUnreadAfterAFailureStillFailsTheExecutor) {
  EXPECT_THROW(run([]() -> task<void> {
                 {
                   auto h = uring::spawn(fails());
                   for (int i = 0; i < 1000 && !h.done(); ++i) co_await uring::nop();
                   EXPECT_TRUE(h.done());
                 }  // dropped here, its exception unread
                 co_await uring::sleep_for(10s);
               }()),
               std::runtime_error);
}

TEST_P(Join, TheCallableFormKeepsCapturesAlive) {
  executor_group group(1, options());
  auto text = std::make_unique<std::string>(1000, 'x');
  auto h = uring::spawn(
      group.at(0),
      [s = std::string(*text)](std::size_t extra) -> task<std::size_t> {
        co_await uring::sleep_for(1ms);  // the spawning statement has long ended
        co_return s.size() + extra;
      },
      std::size_t{5});
  text.reset();
  EXPECT_EQ(h.get(), 1005u);
}

TEST_P(Join, ManyHandlesAcrossExecutors) {
  executor_group group(2, options());
  const int n = static_cast<int>(uring::test::scaled(2000));
  long sum = run([&]() -> task<long> {
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < n; ++i)
      hs.push_back(uring::spawn(group.at(static_cast<std::size_t>(i) % 2), twice(i)));
    long s = 0;
    for (auto& h : hs) s += co_await h;
    co_return s;
  }());
  EXPECT_EQ(sum, static_cast<long>(n) * (n - 1));
}

TEST_P(Join, AnAwaitOfAHandleTakesATimeoutAndLeavesTheTaskRunning) {
  executor_group group(1, options());
  uring::test::pipe_pair p;
  std::atomic<int> read_ended{0};
  int err = 0;
  try {
    run([&]() -> task<void> {
      auto h = uring::spawn(
          group.at(0),
          [](int fd, std::atomic<int>& ended) -> task<int> {
            char c;
            auto r = co_await uring::read(fd, uring::mutable_buffer(&c, 1)).nothrow();
            ++ended;
            co_return r.res;
          },
          p.read_end.get(), std::ref(read_ended));
      (void)co_await uring::with_timeout(
          [](join_handle<int>& handle) -> task<int> { co_return co_await handle; }(h), 20ms);
    }());
  } catch (const std::system_error& e) {
    err = e.code().value();
  }
  EXPECT_EQ(err, ETIMEDOUT);
  EXPECT_EQ(read_ended.load(), 0);  // the task itself was not stopped
  group.stop();                     // cancels the read: the task ends without an exception
  EXPECT_NO_THROW(group.join());
}

INSTANTIATE_MESSAGING_BACKENDS(Join);

}  // namespace
