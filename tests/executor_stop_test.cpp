// executor: spawned work, stop and shutdown with operations in flight (from the owner, another thread, before
// run), posts from many threads, and misuse refused with a clear error or, in debug builds, an abort.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/detail/remote.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "executor_fixture.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::task;
using uring::test::Executor;
using uring::test::nops_then;

TEST_P(Executor, SpawnedWorkThatOutlivesRunContinuesOnTheNextRun) {
  executor ex(options());
  uring::test::pipe_pair p;
  char byte = 0;
  bool got = false;
  auto reader = [&]() -> task<void> {
    co_await uring::read(p.read_end.get(), std::span(&byte, 1));
    got = true;
  };
  ex.run([&]() -> task<void> {
    uring::spawn(reader());
    co_await uring::nop();
  }());
  EXPECT_FALSE(got);  // still waiting on the pipe
  ex.run([&]() -> task<void> {
    co_await uring::write(p.write_end.get(), std::string_view("x"));
    while (!got) co_await uring::nop();
  }());
  EXPECT_TRUE(got);
  EXPECT_EQ(byte, 'x');
}

TEST_P(Executor, StopCancelsInFlightOperationsAndFreesFrames) {
  executor ex(options());
  uring::test::pipe_pair p;
  int destroyed = 0;
  struct sentinel {
    int& count;
    ~sentinel() { ++count; }
  };
  auto blocked_reader = [&]() -> task<void> {
    sentinel s{destroyed};
    char buf[8];
    co_await uring::read(p.read_end.get(), buf);  // never satisfied: nobody writes
    ADD_FAILURE() << "the read must not complete";
  };
  auto root = [&]() -> task<void> {
    for (int i = 0; i < 10; ++i) uring::spawn(blocked_reader());
    co_await uring::nop();
    co_await uring::nop();
    executor::current()->stop();
    char buf[8];
    co_await uring::read(p.read_end.get(), buf);  // the root blocks too
  };
  ex.run(root());  // task<void>: returns normally when stopped
  EXPECT_EQ(destroyed, 10);
}

// While a stopped run frees its frames (spawned ones, then its task's), a post could point into them and
// would outlive them: it is refused. Once run() has returned the executor takes posts again.
TEST_P(Executor, AStoppedRunRefusesPostsWhileItFreesItsFramesThenTakesThemAgain) {
  executor ex(options());
  int refused = 0;
  int accepted = 0;
  struct poster {
    executor& ex;
    int& refused;
    int& accepted;
    ~poster() {
      try {
        ex.post([] {});
        ++accepted;
      } catch (const std::system_error& e) {
        if (e.code().value() == ESHUTDOWN) ++refused;
      }
    }
  };
  auto spawned = [&]() -> task<void> {
    poster p{ex, refused, accepted};
    co_await uring::sleep_for(std::chrono::hours(1));
  };
  ex.run([&]() -> task<void> {
    poster p{ex, refused, accepted};
    uring::spawn(spawned());
    co_await uring::nop();
    executor::current()->stop();
    co_await uring::sleep_for(std::chrono::hours(1));
  }());
  EXPECT_EQ(refused, 2);  // the spawned frame's, then the task's
  EXPECT_EQ(accepted, 0);
  bool ran = false;
  ex.post([&] {
    ran = true;
    executor::current()->stop();
  });
  ex.run();
  EXPECT_TRUE(ran);
}

TEST_P(Executor, StoppedRunOfAValueTaskThrowsEcanceled) {
  executor ex(options());
  uring::test::pipe_pair p;
  auto root = [&]() -> task<int> {
    co_await uring::nop();
    executor::current()->stop();
    char buf[1];
    co_return static_cast<int>(co_await uring::read(p.read_end.get(), buf));
  };
  try {
    ex.run(root());
    FAIL() << "expected ECANCELED";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled);
  }
}

TEST_P(Executor, SpawnedExceptionShutsDownAndIsRethrownFromRun) {
  executor ex(options());
  uring::test::pipe_pair p;
  auto failing = []() -> task<void> {
    co_await uring::nop();
    throw std::runtime_error("spawned failure");
  };
  auto root = [&]() -> task<void> {
    uring::spawn(failing());
    char buf[1];
    co_await uring::read(p.read_end.get(), buf);  // would block forever
  };
  try {
    ex.run(root());
    FAIL() << "expected the spawned task's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "spawned failure");
  }
  EXPECT_EQ(ex.run(nops_then(2, 3)), 3);  // the executor is usable afterwards
}

TEST_P(Executor, DestructorDrainsPendingOperations) {
  uring::test::pipe_pair p;
  int destroyed = 0;
  {
    executor ex(options());
    struct sentinel {
      int& count;
      ~sentinel() { ++count; }
    };
    auto blocked = [&]() -> task<void> {
      sentinel s{destroyed};
      char buf[4];
      co_await uring::read(p.read_end.get(), buf);
    };
    ex.run([&]() -> task<void> {
      for (int i = 0; i < 5; ++i) uring::spawn(blocked());
      co_await uring::nop();
    }());
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 5);
}

TEST_P(Executor, StopFromAnotherThreadWakesASleepingLoop) {
  executor ex(options());
  uring::test::pipe_pair p;
  bool started = false;
  std::atomic<bool> entered{false};
  std::thread stopper;
  ex.run([&]() -> task<void> {
    started = true;
    // The stopper waits until the loop is about to sleep on the pipe; no sleep-based timing.
    stopper = std::thread([&] {
      while (!entered.load()) std::this_thread::yield();
      ex.stop();
    });
    entered = true;
    char buf[1];
    co_await uring::read(p.read_end.get(), buf);  // nobody writes: only stop() ends this
  }());
  stopper.join();
  EXPECT_TRUE(started);
}

TEST_P(Executor, RunWithoutATaskServesSpawnedWorkUntilStopped) {
  executor ex(options());
  int rounds = 0;
  ex.run([&]() -> task<void> {
    uring::spawn([](int& r) -> task<void> {
      for (; r < 100; ++r) co_await uring::nop();
      executor::current()->stop();
    }(rounds));
    co_return;
  }());
  EXPECT_EQ(rounds, 0);  // the root finished first; the spawned work waits for the next run
  ex.run();
  EXPECT_EQ(rounds, 100);
}

TEST_P(Executor, StopBeforeRunShutsDownAtOnce) {
  executor ex(options());
  ex.stop();
  bool ran = false;
  ex.run([&]() -> task<void> {
    ran = true;
    co_return;
  }());
  EXPECT_TRUE(ran);  // the root's first step runs before the loop looks at the stop request...
  ex.stop();
  ex.run();  // ...and run() without a task returns at once
}

TEST_P(Executor, PostFromManyThreadsRunsEverythingOnTheOwner) {
  executor ex(options());
  constexpr int kThreads = 4;
  const int per_thread = static_cast<int>(uring::test::scaled(10'000));
  struct counted : uring::detail::remote_node {
    int* count = nullptr;
  };
  std::vector<std::vector<counted>> nodes(kThreads, std::vector<counted>(per_thread));
  int count = 0;
  std::thread::id owner = std::this_thread::get_id();
  bool wrong_thread = false;
  std::vector<std::thread> posters;
  ex.run([&]() -> task<void> {
    for (int t = 0; t < kThreads; ++t) {
      posters.emplace_back([&, t] {
        for (auto& n : nodes[t]) {
          n.count = &count;
          n.run = [](uring::detail::remote_node* self) noexcept { ++*static_cast<counted*>(self)->count; };
          uring::detail::executor_access::post_remote(ex, n);
        }
      });
    }
    // The loop keeps turning (and may sleep) while posts arrive: none may be lost.
    while (count < kThreads * per_thread) {
      if (std::this_thread::get_id() != owner) wrong_thread = true;
      co_await uring::nop();
    }
  }());
  for (auto& t : posters) t.join();
  EXPECT_EQ(count, kThreads * per_thread);
  EXPECT_FALSE(wrong_thread);
}

TEST_P(Executor, RunFromAnotherThreadIsRefused) {
  executor ex(options());
  std::string message;
  std::thread([&] {
    try {
      ex.run(nops_then(1, 1));
    } catch (const std::logic_error& e) {
      message = e.what();
    }
  }).join();
  EXPECT_NE(message.find("owner thread"), std::string::npos) << message;
}

TEST_P(Executor, RunIsNotReentrant) {
  executor ex(options());
  auto root = [&]() -> task<void> {
    ex.run(nops_then(1, 1));
    co_return;
  };
  EXPECT_THROW(ex.run(root()), std::logic_error);
}

TEST_P(Executor, SyncWaitInsideARunningExecutorIsRefused) {
  executor ex(options());
  auto root = []() -> task<void> {
    uring::sync_wait(nops_then(1, 1));
    co_return;
  };
  EXPECT_THROW(ex.run(root()), std::logic_error);
}

TEST_P(Executor, AwaitingWithoutARunningExecutorIsAClearError) {
  auto t = []() -> task<void> { co_await uring::nop(); }();
  // Driving the coroutine by hand, outside any executor: the await must refuse, not crash.
  auto h = t.release();
  h.resume();
  ASSERT_TRUE(h.done());
  try {
    h.promise().result();
    FAIL() << "expected logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no executor is running"), std::string::npos) << e.what();
  }
  h.destroy();
  EXPECT_THROW(uring::spawn(nops_then(1, 1)), std::logic_error);
}

INSTANTIATE_BACKENDS(Executor);

#ifndef NDEBUG
// Debug builds catch what ASan cannot: a frame freed while the kernel still holds one of its operations.
TEST(ExecutorDeathTest, FreeingAFrameWithAnOperationInFlightAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        uring::test::pipe_pair p;
        executor ex;
        ex.run([&]() -> task<void> {
          auto reader = [](int fd) -> task<void> {
            char buf[1];
            co_await uring::read(fd, buf);
          }(p.read_end.get());
          auto h = reader.release();
          h.resume();   // now suspended on the read, which is queued
          h.destroy();  // misuse: the operation is still in flight
          co_return;
        }());
      },
      "destroyed while still in flight");
}
#endif

TEST(ExecutorDeathTest, DestroyingAnExecutorOffItsThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto ex = std::make_unique<executor>();
        std::thread([&] { ex.reset(); }).join();
      },
      "must be destroyed on the thread that created it");
}

}  // namespace
