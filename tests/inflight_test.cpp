// The in-flight registry on every backend: what executor::inflight lists (kind, fd, tag, age, cancel),
// that an operation leaves it at its final completion in whatever order they finish, snapshots taken
// from other threads and from an executor_group, and that the executor's own requests are not listed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "tagged_read.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::executor_options;
using uring::inflight_op;
using uring::op_kind;
using uring::task;
using uring::test::pipe_pair;
using uring::test::read_one;

class Inflight : public uring::test::backend_test {};

std::vector<inflight_op> reads_of(const std::vector<inflight_op>& ops) {
  std::vector<inflight_op> out;
  std::copy_if(ops.begin(), ops.end(), std::back_inserter(out),
               [](const inflight_op& op) { return op.kind == op_kind::read; });
  return out;
}

// Runs turns (a nop each) until `done`, at most 100000 of them.
task<bool> turns_until(const std::atomic<bool>& done) {
  for (int i = 0; i < 100000 && !done.load(); ++i) co_await uring::nop();
  co_return done.load();
}

TEST_P(Inflight, AStuckReadIsListedWithItsFdTagAndAgeAndLeavesWhenCancelled) {
  pipe_pair p;
  run([](int fd) -> task<void> {
    executor& ex = *executor::current();
    std::stop_source stop;
    auto reader = uring::spawn(read_one(fd, "client 42 read", stop.get_token()));
    co_await uring::sleep_for(60ms);

    auto listed = ex.inflight();
    EXPECT_EQ(listed.size(), 1u);
    listed.resize(1);
    EXPECT_EQ(listed[0].kind, op_kind::read);
    EXPECT_EQ(listed[0].fd, fd);
    EXPECT_FALSE(listed[0].direct);
    EXPECT_EQ(listed[0].tag, "client 42 read");
    EXPECT_GE(listed[0].age, 50ms);  // the coarse clock's tick is at most 10 ms
    EXPECT_LT(listed[0].age, 60s);
    EXPECT_FALSE(listed[0].cancel_requested);
    EXPECT_EQ(uring::to_string(listed[0]).rfind("read fd=" + std::to_string(fd) + " age=", 0), 0u)
        << uring::to_string(listed[0]);

    stop.request_stop();  // on this thread: the cancel is sent at once
    for (const inflight_op& op : ex.inflight()) EXPECT_TRUE(op.cancel_requested) << uring::to_string(op);
    EXPECT_EQ(co_await std::move(reader), -ECANCELED);
    EXPECT_TRUE(ex.inflight().empty());
  }(p.read_end.get()));
}

// Half of the reads start, a random half of those finishes, then the rest start in the freed slots: the
// listing stays exact throughout.
TEST_P(Inflight, OperationsLeaveInAnyOrderAndTheRestStayListed) {
  constexpr int kReads = 200;  // past the registry's first capacity, so it grows while in use
  std::vector<pipe_pair> pipes(kReads);
  run([](std::vector<pipe_pair>& ps) -> task<void> {
    executor& ex = *executor::current();
    std::vector<std::atomic<bool>> done(ps.size());
    std::vector<uring::join_handle<void>> readers;
    std::set<int> waiting;
    auto start = [&](std::size_t from, std::size_t to) {
      for (std::size_t i = from; i < to; ++i) {
        readers.push_back(uring::spawn([](int fd, std::atomic<bool>& d) -> task<void> {
          EXPECT_EQ(co_await read_one(fd, "reader"), 1);
          d.store(true);
        }(ps[i].read_end.get(), done[i])));
        waiting.insert(ps[i].read_end.get());
      }
    };
    auto listing_is_exact = [&] {
      std::set<int> listed;
      for (const inflight_op& op : reads_of(ex.inflight())) {
        EXPECT_EQ(op.tag, "reader");
        EXPECT_TRUE(listed.insert(op.fd).second) << "listed twice: " << uring::to_string(op);
      }
      EXPECT_EQ(listed, waiting);
    };
    const std::size_t half = ps.size() / 2;
    start(0, half);
    for (int i = 0; i < 1000 && reads_of(ex.inflight()).size() < half; ++i) co_await uring::nop();
    std::vector<std::size_t> order(ps.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937 rng(7);
    std::shuffle(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(half), rng);
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(half / 2), order.end(), rng);
    for (std::size_t n = 0; n < order.size(); ++n) {
      if (n == half / 2) {
        start(half, ps.size());
        for (int i = 0; i < 1000 && reads_of(ex.inflight()).size() < waiting.size(); ++i)
          co_await uring::nop();
      }
      const std::size_t i = order[n];
      listing_is_exact();
      EXPECT_EQ(::write(ps[i].write_end.get(), "x", 1), 1);
      EXPECT_TRUE(co_await turns_until(done[i]));
      waiting.erase(ps[i].read_end.get());
      if (::testing::Test::HasFailure()) break;  // the executor's end cancels the rest
    }
    if (::testing::Test::HasFailure()) co_return;
    EXPECT_TRUE(ex.inflight().empty());
    for (auto& r : readers) co_await std::move(r);
  }(pipes));
}

// More plain reads in one turn than the SQ holds: those past the SQ's room take the list instead of the
// inline path, and each is listed exactly once either way, until its completion.
TEST_P(Inflight, ReadsPastAFullSqAreListedOnce) {
  constexpr int kReads = 40;
  std::vector<pipe_pair> pipes(kReads);
  executor_options small = options();
  small.sq_entries = 8;
  executor ex(small);
  ex.run([](std::vector<pipe_pair>& ps) -> task<void> {
    executor& self = *executor::current();
    std::vector<uring::join_handle<void>> readers;
    for (pipe_pair& p : ps) {
      readers.push_back(uring::spawn([](int fd) -> task<void> {
        char byte = 0;
        EXPECT_EQ(co_await uring::read(fd, std::span(&byte, 1)).tag("plain"), 1u);
      }(p.read_end.get())));
    }
    for (int i = 0; i < 1000 && reads_of(self.inflight()).size() < ps.size(); ++i) co_await uring::nop();
    std::multiset<int> listed;
    for (const inflight_op& op : reads_of(self.inflight())) {
      EXPECT_EQ(op.tag, "plain");
      listed.insert(op.fd);
    }
    EXPECT_EQ(listed.size(), ps.size());
    for (pipe_pair& p : ps) EXPECT_EQ(listed.count(p.read_end.get()), 1u) << "fd " << p.read_end.get();
    for (pipe_pair& p : ps) EXPECT_EQ(::write(p.write_end.get(), "x", 1), 1);
    for (auto& r : readers) co_await std::move(r);
    EXPECT_TRUE(reads_of(self.inflight()).empty());
  }(pipes));
}

// A coroutine resumed by the completion that ended a long wait starts a read: the read's age counts from
// then, not from before the wait (the loop reads its clock after waiting).
TEST_P(Inflight, AnOperationStartedAfterALongWaitIsAgedFromItsStart) {
  pipe_pair p;
  run([](int fd) -> task<void> {
    executor& ex = *executor::current();
    std::stop_source stop;
    std::chrono::steady_clock::time_point started{};
    auto reader =
        uring::spawn([](int f, std::stop_token t, std::chrono::steady_clock::time_point* at) -> task<int> {
          co_await uring::sleep_for(300ms);  // nothing else to run: the loop waits in the kernel
          *at = std::chrono::steady_clock::now();
          co_return co_await read_one(f, "after the wait", std::move(t));
        }(fd, stop.get_token(), &started));
    std::vector<inflight_op> reads;
    for (int i = 0; i < 100 && reads.empty(); ++i) {
      co_await uring::sleep_for(i == 0 ? 400ms : 20ms);
      reads = reads_of(ex.inflight());
    }
    const auto age =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    EXPECT_EQ(reads.size(), 1u);
    for (const inflight_op& r : reads) EXPECT_LE(r.age, age + 25ms) << uring::to_string(r);  // a tick or two
    stop.request_stop();
    EXPECT_EQ(co_await std::move(reader), -ECANCELED);
  }(p.read_end.get()));
}

TEST_P(Inflight, TheExecutorsOwnRequestsAreNotListed) {
  run([]() -> task<void> {
    co_await uring::sleep_for(1ms);  // the executor sleeps: its wake-up read is armed meanwhile
    co_await uring::sleep_for(1ms);
    EXPECT_TRUE(executor::current()->inflight().empty());
    co_return;
  }());
}

TEST_P(Inflight, AnotherThreadGetsTheSnapshotFromTheRunningLoop) {
  pipe_pair p;
  executor ex(options());
  std::thread watcher([&] {
    bool seen = false;
    for (int i = 0; i < 20000 && !seen; ++i) {
      for (const inflight_op& op : ex.inflight())
        seen = seen || (op.fd == p.read_end.get() && op.tag == "watched");
      if (!seen) std::this_thread::yield();
    }
    EXPECT_TRUE(seen);
    EXPECT_EQ(::write(p.write_end.get(), "x", 1), 1);  // lets the reader, and so the run, finish
  });
  EXPECT_EQ(ex.run(read_one(p.read_end.get(), "watched")), 1);
  watcher.join();
  EXPECT_TRUE(ex.inflight().empty());
}

TEST_P(Inflight, ALoopThatDoesNotRunTimesTheRequestOut) {
  executor ex(options());
  std::thread asker([&] {
    try {
      (void)ex.inflight(50ms);
      ADD_FAILURE() << "a snapshot from an executor nobody runs";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ETIMEDOUT) << e.what();
    }
  });
  asker.join();
  // The request still waits in the mailbox: the next turn serves it to nobody, and frees it.
  EXPECT_EQ(ex.run([]() -> task<int> { co_return 7; }()), 7);
}

TEST_P(Inflight, AGroupListsEachMembersOperations) {
  pipe_pair a, b;
  uring::executor_group group(2, options());
  uring::spawn(group.at(0), read_one, a.read_end.get(), "on 0", std::stop_token{}).detach();
  uring::spawn(group.at(1), read_one, b.read_end.get(), "on 1", std::stop_token{}).detach();
  bool both = false;
  for (int i = 0; i < 20000 && !both; ++i) {
    auto all = group.inflight();
    ASSERT_EQ(all.size(), 2u);
    const auto r0 = reads_of(all[0]), r1 = reads_of(all[1]);
    both = r0.size() == 1 && r1.size() == 1;
    if (both) {
      EXPECT_EQ(r0[0].fd, a.read_end.get());
      EXPECT_EQ(r0[0].tag, "on 0");
      EXPECT_EQ(r1[0].fd, b.read_end.get());
      EXPECT_EQ(r1[0].tag, "on 1");
    } else {
      std::this_thread::yield();
    }
  }
  EXPECT_TRUE(both);
  ASSERT_EQ(::write(a.write_end.get(), "x", 1), 1);
  ASSERT_EQ(::write(b.write_end.get(), "x", 1), 1);
  group.stop();
  group.join();
}

TEST(InflightText, NamesKindFdOrSlotAgeTagAndCancel) {
  EXPECT_EQ(
      uring::to_string(inflight_op{
          .kind = op_kind::read, .fd = 7, .age = 1250ms, .tag = "client 42 read", .cancel_requested = true}),
      "read fd=7 age=1250ms tag=\"client 42 read\" cancelling");
  EXPECT_EQ(uring::to_string(inflight_op{.kind = op_kind::recv, .fd = 3, .direct = true, .age = 0ms}),
            "recv slot=3 age=0ms");
  EXPECT_EQ(uring::to_string(inflight_op{.kind = op_kind::timeout, .age = 5ms}), "timeout age=5ms");
}

INSTANTIATE_BACKENDS(Inflight);

}  // namespace
