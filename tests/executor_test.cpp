// executor: run, batching into one enter per turn, work through a ring too small for it, the native ring's
// flags, one non-blocking turn by poll(), counted operations, and waits interrupted by signals.
#include <gtest/gtest.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "executor_fixture.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::task;
using uring::test::Executor;
using uring::test::nops_then;

TEST_P(Executor, RunReturnsTheTaskResult) {
  executor ex(options());
  EXPECT_EQ(ex.run(nops_then(10, 5)), 5);
  EXPECT_EQ(ex.run(nops_then(1, 6)), 6);  // an executor runs again after a task finished
  EXPECT_GE(ex.stats().cqes, 11u);
}

executor::options native_options() {
  executor::options opts;
  opts.backend = uring::backend_kind::native;
  return opts;
}

TEST(NativeExecutor, RegistersItsRingFdByDefault) {
  executor ex(native_options());
  EXPECT_TRUE(ex.registered_ring());
  executor::options opts = native_options();
  opts.register_ring_fd = false;
  executor plain(opts);
  EXPECT_FALSE(plain.registered_ring());
  EXPECT_EQ(plain.run(nops_then(3, 1)), 1);
}

TEST_P(Executor, ConcurrentOperationsShareOneEnterPerTurn) {
  executor ex(options());
  constexpr int kTasks = 32, kRounds = 100;
  int finished = 0;
  auto worker = [](int& done) -> task<void> {
    for (int i = 0; i < kRounds; ++i) co_await uring::nop();
    ++done;
  };
  auto main_task = [&]() -> task<void> {
    for (int i = 0; i < kTasks; ++i) uring::spawn(worker(finished));
    while (finished < kTasks) co_await uring::nop();
  };
  ex.run(main_task());
  EXPECT_EQ(finished, kTasks);
  // 32 x 100 operations went in; batching means about one enter per round, far fewer than operations.
  EXPECT_GE(ex.stats().sqes, std::uint64_t{kTasks * kRounds});
  EXPECT_LT(ex.stats().enters, std::uint64_t{kTasks * kRounds / 8});
}

TEST_P(Executor, WaitsCountTheEntersThatHadNothingElseToRun) {
  executor ex(tiny_ring());
  // Each sleep leaves the loop with nothing to run: it waits (in the kernel, or in epoll) for the timer.
  ex.run([]() -> task<void> {
    for (int i = 0; i < 5; ++i) co_await uring::sleep_for(std::chrono::milliseconds(1));
  }());
  const uring::executor_stats slept = ex.stats();
  EXPECT_GE(slept.waits, 5u);
  EXPECT_LE(slept.waits, slept.enters);
  if (emulated()) return;  // no SQ to fill
  // 100 nops awaited in one turn through an 8-entry SQ: the early submits that make room do not wait.
  ex.run([]() -> task<void> {
    int done = 0;
    for (int i = 0; i < 100; ++i) {
      uring::spawn([](int& d) -> task<void> {
        co_await uring::nop();
        ++d;
      }(done));
    }
    while (done < 100) co_await uring::nop();
  }());
  const uring::executor_stats after = ex.stats();
  ASSERT_GT(after.sq_full_flushes, slept.sq_full_flushes);
  EXPECT_GE((after.enters - slept.enters) - (after.waits - slept.waits),
            after.sq_full_flushes - slept.sq_full_flushes);
}

TEST_P(Executor, ManyOperationsThroughATinyRingAreNeverLost) {
  executor ex(tiny_ring());
  const long total = uring::test::scaled(100'000);
  constexpr int kWorkers = 1000;
  long completed = 0;
  int workers_done = 0;
  auto worker = [&](long n) -> task<void> {
    for (long i = 0; i < n; ++i) {
      co_await uring::nop();
      ++completed;
    }
    ++workers_done;
  };
  ex.run([&]() -> task<void> {
    long per = total / kWorkers, rest = total % kWorkers;
    for (int w = 0; w < kWorkers; ++w) uring::spawn(worker(per + (w < rest ? 1 : 0)));
    while (workers_done < kWorkers) co_await uring::nop();
  }());
  EXPECT_EQ(completed, total);
  if (!emulated()) {
    EXPECT_GT(ex.stats().sq_full_flushes, 0u);
  }
}

// 100k operations all in flight at once through an 8-entry SQ and a 16-entry CQ: the SQ flushes early
// and the CQ overflows into the kernel's list (IORING_FEAT_NODROP); every completion still arrives once.
TEST_P(Executor, HundredThousandConcurrentOperationsThroughATinyRing) {
  executor ex(tiny_ring());
  const long total = uring::test::scaled(100'000);
  std::vector<int> seen(static_cast<std::size_t>(total), 0);
  long done = 0;
  ex.run([&]() -> task<void> {
    for (long i = 0; i < total; ++i) {
      uring::spawn([](int& slot, long& count) -> task<void> {
        co_await uring::nop();
        ++slot;
        ++count;
      }(seen[static_cast<std::size_t>(i)], done));
    }
    while (done < total) co_await uring::nop();
  }());
  EXPECT_EQ(done, total);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), total);  // each exactly once
  if (!emulated()) {
    EXPECT_GT(ex.stats().cq_overflows, 0u);
  }
}

TEST(NativeExecutor, FlagsTheKernelRefusesAreDroppedAndReported) {
  executor::options opts = native_options();
  opts.flags = uring::ring_flags::submit_all | uring::ring_flags::coop_taskrun |
               uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
  executor ex(opts);
  // Kernel 6.1+ accepts all four; whatever it refused is reported, and the two sets never overlap.
  EXPECT_EQ(ex.active_flags() | ex.dropped_flags(), opts.flags);
  EXPECT_EQ(ex.active_flags() & ex.dropped_flags(), uring::ring_flags::none);
  EXPECT_EQ(ex.run(nops_then(100, 9)), 9);
  EXPECT_EQ(uring::to_string(uring::ring_flags::submit_all | uring::ring_flags::defer_taskrun),
            "SUBMIT_ALL|DEFER_TASKRUN");
}

TEST(NativeExecutor, DeferTaskrunRingMakesProgressWithReadyWork) {
  executor::options opts = native_options();
  opts.flags = uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
  executor ex(opts);
  if (!uring::any(ex.active_flags() & uring::ring_flags::defer_taskrun))
    GTEST_SKIP() << "kernel lacks DEFER_TASKRUN";
  // A coroutine that always has ready work (it respawns itself) must not starve the I/O.
  bool io_done = false;
  int spins = 0;
  struct spinner {
    static task<void> run(bool& done, int& count) {
      ++count;
      if (!done) uring::spawn(run(done, count));
      co_return;
    }
  };
  ex.run([&]() -> task<void> {
    uring::spawn(spinner::run(io_done, spins));
    co_await nops_then(50, 0);
    io_done = true;
  }());
  EXPECT_TRUE(io_done);
  EXPECT_GT(spins, 0);
}

TEST_P(Executor, PollRunsOneNonBlockingTurn) {
  executor ex(options());
  int steps = 0;
  bool done = false;
  auto t = [&]() -> task<void> {
    for (; steps < 3; ++steps) co_await uring::nop();
    done = true;
  };
  ex.run([&]() -> task<void> {
    uring::spawn(t());
    co_return;
  }());
  std::size_t work = 0;
  // Turns never wait, so an SQPOLL ring's poller may take a while to pick the nops up: a time limit,
  // not a count of turns.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < limit) work += ex.poll();
  EXPECT_TRUE(done);
  EXPECT_GE(work, 3u);
  EXPECT_EQ(ex.poll(), 0u);  // nothing left: returns at once
}

INSTANTIATE_BACKENDS(Executor);

TEST(ExecutorStats, CountsOperationsByKind) {
  executor ex;
  ex.run([]() -> task<void> {
    co_await uring::nop();
    co_await uring::nop();
    co_await uring::sleep_for(std::chrono::milliseconds(0));
  }());
  EXPECT_EQ(ex.stats().started(uring::op_kind::nop), 2u);
  EXPECT_EQ(ex.stats().started(uring::op_kind::timeout), 1u);
  EXPECT_EQ(ex.stats().started(uring::op_kind::write), 0u);
  EXPECT_STREQ(uring::to_string(uring::op_kind::statx), "statx");
}

// A signal handler installed without SA_RESTART makes a sleeping io_uring_enter / epoll_pwait2 fail with
// EINTR. The loop must treat that as "look again", never as an error, and lose nothing.
class ExecutorSignals : public uring::test::backend_test {};

std::atomic<int> g_signals{0};
void count_signal(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

TEST_P(ExecutorSignals, EintrWhileWaitingIsRetried) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = count_signal;
  sa.sa_flags = 0;  // no SA_RESTART: the wait is interrupted
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  uring::test::pipe_pair p;
  executor ex(options());
  pthread_t owner = pthread_self();
  std::atomic<bool> finished{false};
  std::thread pest([&] {
    // Interrupt the owner's waits many times, then let the read complete.
    for (int i = 0; i < 200 && !finished; ++i) {
      pthread_kill(owner, SIGUSR1);
      std::this_thread::yield();
    }
    (void)!::write(p.write_end.get(), "z", 1);
  });
  char got = 0;
  ex.run([&]() -> task<void> {
    char buf[1];
    co_await uring::read(p.read_end.get(), buf);
    got = buf[0];
  }());
  finished = true;
  pest.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(got, 'z');
  EXPECT_GT(g_signals.load(), 0);
}

INSTANTIATE_BACKENDS(ExecutorSignals);

}  // namespace
