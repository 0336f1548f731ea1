// The stuck-operation watchdog on every backend (executor_options::stuck_after): an operation older than
// the limit is reported once, with its tag, through the callback or on stderr, also by an idle loop;
// quick operations and timers never are, and the watchdog's own timer is not counted as the user's. The
// stall watchdog (stall_after): a coroutine holding the thread is reported once, from another thread.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "tagged_read.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::inflight_op;
using uring::op_kind;
using uring::task;
using uring::test::pipe_pair;
using uring::test::read_one;

class Watchdog : public uring::test::backend_test {
 protected:
  // Options of this backend with the watchdog at 100 ms, reporting into `reports`.
  uring::executor_options watched(std::vector<inflight_op>& reports) const {
    auto opts = options();
    opts.stuck_after = 100ms;
    opts.on_stuck = [&reports](const inflight_op& op) { reports.push_back(op); };
    return opts;
  }
};

TEST_P(Watchdog, AStuckReadIsReportedOnceWithItsTagAndQuickOperationsNever) {
  pipe_pair p;
  std::vector<inflight_op> reports;
  executor ex(watched(reports));
  ex.run([](int fd, std::vector<inflight_op>& seen) -> task<void> {
    std::stop_source stop;
    auto reader = uring::spawn(read_one(fd, "stuck read", stop.get_token()));
    const auto until = std::chrono::steady_clock::now() + 400ms;
    while (std::chrono::steady_clock::now() < until) {
      co_await uring::nop();  // quick ones, many turns: none is old enough
      co_await uring::sleep_for(5ms);
    }
    EXPECT_EQ(seen.size(), 1u);
    for (const inflight_op& op : seen) {
      EXPECT_EQ(op.kind, op_kind::read);
      EXPECT_EQ(op.fd, fd);
      EXPECT_EQ(op.tag, "stuck read");
      EXPECT_GE(op.age, 100ms);
    }
    stop.request_stop();
    EXPECT_EQ(co_await std::move(reader), -ECANCELED);
    co_await uring::sleep_for(200ms);  // more ticks, and a timer past the limit: nothing new to report
    EXPECT_EQ(seen.size(), 1u);
  }(p.read_end.get(), reports));
}

TEST_P(Watchdog, AnIdleLoopReportsToo) {
  pipe_pair p;
  std::vector<inflight_op> reports;
  auto opts = watched(reports);
  // The report itself feeds the pipe: the run ends only if an idle loop (asleep in the kernel, waiting
  // for the read) reports.
  opts.on_stuck = [&](const inflight_op& op) {
    reports.push_back(op);
    EXPECT_EQ(::write(p.write_end.get(), "x", 1), 1);
  };
  executor ex(opts);
  EXPECT_EQ(ex.run(read_one(p.read_end.get(), "idle", {})), 1);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].tag, "idle");
  EXPECT_EQ(ex.operations_in_flight(), 0u);  // the watchdog's own timer is not the user's
  EXPECT_TRUE(ex.inflight().empty());
}

TEST_P(Watchdog, WithoutACallbackTheReportIsALineOnStderr) {
  pipe_pair p;
  auto opts = options();
  opts.stuck_after = 100ms;
  executor ex(opts);
  ::testing::internal::CaptureStderr();
  ex.run([](int fd) -> task<void> {
    std::stop_source stop;
    auto reader = uring::spawn(read_one(fd, "printed", stop.get_token()));
    co_await uring::sleep_for(300ms);
    stop.request_stop();
    co_await std::move(reader);
  }(p.read_end.get()));
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string line =
      "uring: operation in flight past 100ms: read fd=" + std::to_string(p.read_end.get());
  EXPECT_NE(err.find(line), std::string::npos) << err;
  EXPECT_NE(err.find("tag=\"printed\""), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "reported twice: " << err;
}

TEST_P(Watchdog, ACoroutineThatHoldsTheThreadIsReportedOnceFromAnotherThread) {
  std::mutex m;
  std::vector<uring::stall_report> stalls;
  std::thread::id reported_on;
  auto opts = options();
  opts.stall_after = 50ms;
  opts.on_stall = [&](const uring::stall_report& r) {
    std::lock_guard lock(m);
    stalls.push_back(r);
    reported_on = std::this_thread::get_id();
  };
  executor ex(opts);
  ex.run([]() -> task<void> {
    co_await uring::nop();
    // 150 ms without awaiting: the loop cannot come back.
    const auto until = std::chrono::steady_clock::now() + 150ms;
    while (std::chrono::steady_clock::now() < until) {
    }
    // Sleeping in the kernel, and short turns, are not stalls.
    co_await uring::sleep_for(150ms);
    for (int i = 0; i < 100; ++i) co_await uring::nop();
  }());
  std::lock_guard lock(m);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_GE(stalls[0].stalled_for, 50ms);
  EXPECT_LT(stalls[0].stalled_for, 10s);
  EXPECT_FALSE(stalls[0].last_resumed.empty());
  EXPECT_NE(reported_on, std::this_thread::get_id());
}

TEST_P(Watchdog, WithoutACallbackTheStallIsALineOnStderr) {
  auto opts = options();
  opts.stall_after = 50ms;
  ::testing::internal::CaptureStderr();
  {
    executor ex(opts);
    ex.run([]() -> task<void> {
      co_await uring::nop();
      const auto until = std::chrono::steady_clock::now() + 150ms;
      while (std::chrono::steady_clock::now() < until) {
      }
    }());
  }  // the executor's end waits for a report in progress
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("uring: an executor's loop has not come back for "), std::string::npos) << err;
  EXPECT_NE(err.find("last resumed: "), std::string::npos) << err;
}

INSTANTIATE_BACKENDS(Watchdog);

}  // namespace
