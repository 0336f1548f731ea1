// Executors talking to each other: executor_group, post from any thread, spawn onto another executor,
// resume_on, submit_to, and the two-phase stop that keeps migrated coroutines safe. Every backend.
#include <gtest/gtest.h>

#include <atomic>
#include <coroutine>
#include <latch>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "hop_util.hpp"
#include "signal_storm.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::executor_group;
using uring::task;

class Messaging : public uring::test::storm_backend_test {};
// The long runs, again inside a SIGALRM storm (signal_storm.hpp): EINTR anywhere changes no result.
class MessagingSoak : public Messaging {};

using uring::test::sentinel;
using uring::test::this_id;

TEST_P(Messaging, GroupRunsEachExecutorOnItsOwnThread) {
  executor_group group(3, options());
  ASSERT_EQ(group.size(), 3u);
  std::vector<std::thread::id> seen(3);
  std::latch done(3);
  for (std::size_t i = 0; i < 3; ++i) {
    uring::spawn(group.at(i), [](std::thread::id& out, std::latch& l) -> task<void> {
      co_await uring::nop();
      out = this_id();
      l.count_down();
    }(seen[i], done));
  }
  done.wait();
  std::set<std::thread::id> distinct(seen.begin(), seen.end());
  EXPECT_EQ(distinct.size(), 3u);
  EXPECT_EQ(distinct.count(this_id()), 0u);
  EXPECT_THROW((void)group.at(3), std::out_of_range);
}

TEST_P(Messaging, NextIsRoundRobin) {
  executor_group group(2, options());
  executor* a = &group.next();
  executor* b = &group.next();
  EXPECT_NE(a, b);
  EXPECT_EQ(&group.next(), a);
}

TEST_P(Messaging, PostRunsOnTheTargetThreadAndIsRefusedAfterStop) {
  executor_group group(1, options());
  std::thread::id ran_on;
  std::latch done(1);
  group.at(0).post([&] {
    ran_on = this_id();
    done.count_down();
  });
  done.wait();
  EXPECT_NE(ran_on, this_id());
  executor& ex = group.at(0);
  group.stop();
  group.join();
  try {
    ex.post([] {});
    FAIL() << "a post to a stopped group must be refused";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ESHUTDOWN);
  }
}

TEST_P(MessagingSoak, PostsFromManyThreadsAllRunInOrderPerSender) {
  executor_group group(1, options());
  constexpr int kSenders = 4;
  const int per_sender = static_cast<int>(uring::test::scaled(20'000));
  std::vector<int> last(kSenders, -1);
  std::atomic<int> out_of_order{0};
  std::latch done(kSenders * per_sender);
  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (int i = 0; i < per_sender; ++i) {
        group.at(0).post([&, s, i] {
          if (last[static_cast<std::size_t>(s)] != i - 1) ++out_of_order;  // runs on the one owner thread
          last[static_cast<std::size_t>(s)] = i;
          done.count_down();
        });
      }
    });
  }
  for (auto& t : senders) t.join();
  done.wait();
  EXPECT_EQ(out_of_order.load(), 0);
  for (int s = 0; s < kSenders; ++s) EXPECT_EQ(last[static_cast<std::size_t>(s)], per_sender - 1);
}

TEST_P(Messaging, ResumeOnMovesTheCoroutineBetweenThreads) {
  executor_group group(2, options());
  std::array<std::thread::id, 4> ids{};
  std::latch done(1);
  executor& a = group.at(0);
  executor& b = group.at(1);
  uring::spawn(
      a,
      [](executor& home, executor& other, std::array<std::thread::id, 4>& out, std::latch& l) -> task<void> {
        out[0] = this_id();
        co_await uring::resume_on(other);
        out[1] = this_id();
        co_await uring::nop();  // an operation on the other executor's ring
        out[2] = this_id();
        co_await uring::resume_on(home);
        out[3] = this_id();
        l.count_down();
      }(a, b, ids, done));
  done.wait();
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(ids[1], ids[2]);
  EXPECT_EQ(ids[0], ids[3]);
}

TEST_P(Messaging, AHopTheTargetDroppedWhileShuttingDownComesBackWithEshutdown) {
  uring::test::expect_dropped_hop_comes_home(options(), [](executor& t) -> executor& { return t; });
}

// A group stopped while coroutines hop between its members: a member's last drain drops hops that were
// on their way to it, and bouncing them home with ESHUTDOWN would throw into a sibling that is stopping
// too (the coroutines here do not catch it, so join would rethrow). The group's stopping flag makes the
// sibling refuse them; every coroutine is freed with the group, none is left behind.
TEST_P(Messaging, AGroupStoppedWhileCoroutinesHopBetweenItsMembersJoinsCleanly) {
  const int rounds = uring::test::scaled(40);
  for (int r = 0; r < rounds; ++r) {
    std::atomic<int> started{0};
    std::atomic<int> destroyed{0};
    std::atomic<long> hops{0};
    {
      executor_group group(2, options());
      for (int i = 0; i < 8; ++i) {
        uring::spawn(group.at(0),
                     [](executor& a, executor& b, std::atomic<int>& up, std::atomic<int>& n,
                        std::atomic<long>& h) -> task<void> {
                       sentinel s{n};
                       up.fetch_add(1);
                       for (;;) {
                         co_await uring::resume_on(b);
                         co_await uring::resume_on(a);
                         h.fetch_add(1, std::memory_order_relaxed);
                       }
                     }(group.at(0), group.at(1), started, destroyed, hops));
      }
      while (started.load() < 8 || hops.load(std::memory_order_relaxed) < 100) std::this_thread::yield();
      group.stop();
      EXPECT_NO_THROW(group.join()) << "round " << r;
    }
    EXPECT_EQ(destroyed.load(), 8) << "round " << r << ", hops " << hops.load();
  }
}

TEST_P(Messaging, ResumeOnTheCurrentExecutorDoesNotSuspend) {
  executor ex(options());
  auto enters_before = ex.stats().enters;
  ex.run([](executor& self) -> task<void> { co_await uring::resume_on(self); }(ex));
  EXPECT_EQ(ex.stats().enters, enters_before);
}

TEST_P(Messaging, SubmitToReturnsValuesAndExceptions) {
  executor_group group(2, options());
  std::latch done(1);
  int sum = 0;
  std::string error;
  bool came_back_home = false;
  uring::spawn(
      group.at(0),
      [](executor& other, int& out, std::string& err, bool& home_again, std::latch& l) -> task<void> {
        auto home = this_id();
        std::thread::id there;
        out = co_await uring::submit_to(other, [&] {
          there = this_id();
          return 40;
        });
        out += co_await uring::submit_to(other, []() -> task<int> {
          co_await uring::nop();
          co_return 2;
        });
        try {
          co_await uring::submit_to(other, []() -> int { throw std::runtime_error("failed there"); });
        } catch (const std::runtime_error& e) {
          err = e.what();
        }
        co_await uring::submit_to(other, [] {});  // void
        home_again = this_id() == home && there != home;
        l.count_down();
      }(group.at(1), sum, error, came_back_home, done));
  done.wait();
  EXPECT_EQ(sum, 42);
  EXPECT_EQ(error, "failed there");
  EXPECT_TRUE(came_back_home);
}

TEST_P(MessagingSoak, ManyHopsLoseNothing) {
  executor_group group(2, options());
  const int hops = static_cast<int>(uring::test::scaled(20'000));
  std::latch done(1);
  int count = 0;
  uring::spawn(group.at(0), [](executor& a, executor& b, int n, int& c, std::latch& l) -> task<void> {
    for (int i = 0; i < n; ++i) {
      co_await uring::resume_on(i % 2 == 0 ? b : a);
      ++c;
    }
    l.count_down();
  }(group.at(0), group.at(1), hops, count, done));
  done.wait();
  EXPECT_EQ(count, hops);
}

// A coroutine spawned on A moves to B and waits there on B's ring when the group stops: B drains its
// ring, then A frees the frame (its destructors run). ASan checks that no completion touches it after.
TEST_P(Messaging, StoppingWithCoroutinesParkedOnAnotherRingIsSafe) {
  uring::test::pipe_pair p;  // nobody writes
  std::atomic<int> destroyed{0};
  std::latch parked(4);
  {
    executor_group group(2, options());
    for (int i = 0; i < 4; ++i) {
      uring::spawn(group.at(0),
                   [](executor& other, int fd, std::atomic<int>& n, std::latch& l) -> task<void> {
                     sentinel s{n};
                     co_await uring::resume_on(other);
                     l.count_down();
                     char buf[1];
                     co_await uring::read(fd, buf);  // parked on the other executor's ring
                   }(group.at(1), p.read_end.get(), destroyed, parked));
    }
    parked.wait();
  }  // stop + join
  EXPECT_EQ(destroyed.load(), 4);
}

// A spawned task that finishes on another executor is still freed by its owner.
TEST_P(Messaging, ATaskFinishingAwayFromItsOwnerIsFreedByTheOwner) {
  std::atomic<int> destroyed{0};
  std::latch finished(10);
  {
    executor_group group(2, options());
    for (int i = 0; i < 10; ++i) {
      uring::spawn(group.at(0), [](executor& other, std::atomic<int>& n, std::latch& l) -> task<void> {
        sentinel s{n};
        co_await uring::resume_on(other);
        l.count_down();
      }(group.at(1), destroyed, finished));
    }
    finished.wait();
  }
  EXPECT_EQ(destroyed.load(), 10);
}

TEST_P(Messaging, AnExceptionEscapingAWorkersTaskStopsTheGroupAndJoinRethrowsIt) {
  executor_group group(2, options());
  uring::spawn(group.at(1), []() -> task<void> {
    co_await uring::nop();
    throw std::runtime_error("worker failed");
  }());
  try {
    group.join();  // returns only because the failure stopped the group
    FAIL() << "join must rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "worker failed");
  }
}

TEST_P(Messaging, SpawnOntoAStoppedGroupIsRefusedAndTheTaskIsFreed) {
  executor_group group(1, options());
  executor& ex = group.at(0);
  group.stop();
  group.join();
  bool destroyed = false;
  struct sentinel {
    bool& flag;
    ~sentinel() { flag = true; }
  };
  auto t = [](bool& flag) -> task<void> {
    sentinel s{flag};
    co_return;
  }(destroyed);
  EXPECT_THROW(uring::spawn(ex, std::move(t)), std::system_error);
  EXPECT_FALSE(destroyed);  // never started: the sentinel was never constructed
}

// Between two native executors planned for it, resume_on goes through the kernel (MSG_RING: no
// syscall of its own); otherwise (emulated, or msg_ring disabled) through the mailbox. Both deliver.
TEST_P(Messaging, HandOffsUseMsgRingWhereBothSidesCan) {
  const int hops = 1000;
  executor_group group(2, options());
  std::latch done(1);
  uring::spawn(group.at(0), [](executor& a, executor& b, int n, std::latch& l) -> task<void> {
    for (int i = 0; i < n; ++i) co_await uring::resume_on(i % 2 == 0 ? b : a);
    l.count_down();
  }(group.at(0), group.at(1), hops, done));
  done.wait();
  group.stop();
  group.join();  // the executors stay readable until the group goes
  auto sent = group.at(0).stats().messages_sent_by_ring + group.at(1).stats().messages_sent_by_ring;
  auto received = group.at(0).stats().messages_received + group.at(1).stats().messages_received;
  bool ring_road = options().backend == uring::backend_kind::native &&
                   !options().disable.contains(uring::feature::msg_ring) &&
                   !options().sqpoll.enabled;  // the mailbox road (docs/sqpoll.md)
  if (ring_road) {
    EXPECT_EQ(sent, static_cast<std::uint64_t>(hops));
    EXPECT_EQ(received, static_cast<std::uint64_t>(hops));
  } else {
    EXPECT_EQ(sent, 0u);
    EXPECT_EQ(received, 0u);
  }
}

// Waits until `ex`'s loop sleeps in the kernel (or is about to), at most about ten seconds.
bool until_asleep(const executor& ex) {
  for (int i = 0; i < 1'000'000; ++i) {
    if (uring::detail::executor_access::asleep(ex)) return true;
    std::this_thread::yield();
  }
  return false;
}

// A post that finds the mailbox empty and the owner asleep rings the owner's doorbell: a CQE sent by
// IORING_REGISTER_SEND_MSG_RING where the plan says the kernel has it (from any thread, this one has no
// executor), else the eventfd. One post at a time, each waited for and made once the owner sleeps, finds
// both every time.
TEST_P(Messaging, APostToAnEmptyMailboxRingsTheDoorbell) {
  const int posts = static_cast<int>(uring::test::scaled(1000));
  executor_group group(1, options());
  for (int i = 0; i < posts; ++i) {
    std::latch ran(1);
    ASSERT_TRUE(until_asleep(group.at(0)));
    group.at(0).post([&ran] { ran.count_down(); });
    ran.wait();
  }
  group.stop();
  group.join();
  bool kernel_road = group.at(0).plan().send_msg_ring;
  EXPECT_EQ(kernel_road, options().backend == uring::backend_kind::native &&
                             !options().disable.contains(uring::feature::msg_ring) &&
                             !options().sqpoll.enabled &&  // the mailbox road (docs/sqpoll.md)
                             uring::probed_kernel().send_msg_ring);
  if (kernel_road) {
    EXPECT_GE(group.at(0).stats().doorbells, static_cast<std::uint64_t>(posts));
  } else {
    EXPECT_EQ(group.at(0).stats().doorbells, 0u);
  }
}

// A loop that never sleeps (its coroutine reschedules itself each turn) runs every post at its next turn,
// and no post rings its doorbell: an awake owner looks at its mailbox before it would sleep, so a wake-up
// would cost the poster a syscall and the owner a completion for nothing.
TEST_P(Messaging, APostToAnAwakeOwnerRingsNothing) {
  struct next_turn {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const {
      uring::detail::executor_access::schedule(*executor::current(), h);
    }
    void await_resume() const noexcept {}
  };
  const int posts = static_cast<int>(uring::test::scaled(1000));
  executor_group group(1, options());
  std::atomic<bool> spinning{false}, done{false};
  uring::spawn(group.at(0),
               [](std::atomic<bool>& up, std::atomic<bool>& stop) -> task<void> {
                 up.store(true);
                 while (!stop.load()) co_await next_turn{};
               }(spinning, done))
      .detach();
  while (!spinning.load()) std::this_thread::yield();
  int ran = 0;
  // Read on the owner's thread by each post: the spawn above woke the sleeping loop, the posts must not.
  std::uint64_t first = 0, last = 0;
  for (int i = 0; i < posts; ++i) {
    std::latch one(1);
    group.at(0).post([&ran, &one, &first, &last, &ex = group.at(0)] {
      last = ex.stats().doorbells;
      if (ran++ == 0) first = last;
      one.count_down();
    });
    one.wait();
  }
  done.store(true);
  group.stop();
  group.join();
  EXPECT_EQ(ran, posts);
  EXPECT_EQ(last, first);
}

// Posts racing the target's stop: each one either runs or is refused with ESHUTDOWN, none is lost in
// the ring (ASan's leak check would see its function's node).
TEST_P(Messaging, PostsRacingAStopEitherRunOrAreRefused) {
  const int posts = static_cast<int>(uring::test::scaled(20'000));
  std::atomic<int> ran{0};
  int refused = 0;
  {
    executor_group group(1, options());
    std::latch started(1);
    std::thread poster([&] {
      started.count_down();
      for (int i = 0; i < posts; ++i) {
        try {
          group.at(0).post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
        } catch (const std::system_error& e) {
          EXPECT_EQ(e.code().value(), ESHUTDOWN);
          ++refused;
        }
      }
    });
    started.wait();
    group.stop();
    group.join();
    poster.join();
  }
  EXPECT_EQ(ran.load() + refused, posts) << ran.load() << " ran, " << refused << " refused";
}

INSTANTIATE_MESSAGING_BACKENDS(Messaging);
INSTANTIATE_STORM_BACKENDS(MessagingSoak, uring::test::messaging_backends());

}  // namespace
