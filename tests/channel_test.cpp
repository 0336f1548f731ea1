// channel<T>: values from coroutines on any executor (and from plain threads through try_send) to the
// coroutines of one receiving executor; order per sender, back-pressure, close. Every backend.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "channel_util.hpp"
#include "test_util.hpp"

namespace {

using uring::channel;
using uring::executor_group;
using uring::task;
using uring::test::Channel;
using uring::test::check_senders;
using uring::test::item;
using uring::test::per_sender;
using namespace std::chrono_literals;

// Receives until the channel is closed and drained; the values in the order they came.
task<void> collect(channel<int>& ch, std::vector<int>& out, std::latch& done) {
  while (auto v = co_await ch.receive()) out.push_back(*v);
  done.count_down();
}

TEST_P(Channel, OneSenderDeliversEveryValueInOrder) {
  executor_group g(2, options());
  const int n = static_cast<int>(uring::test::scaled(100'000));
  channel<int> ch(g.at(1), 64);
  std::latch done(2);
  int received = 0;
  int out_of_order = 0;
  uring::spawn(g.at(1), [](channel<int>& c, int& got, int& bad, std::latch& l) -> task<void> {
    while (auto v = co_await c.receive()) {
      if (*v != got) ++bad;
      ++got;
    }
    l.count_down();
  }(ch, received, out_of_order, done));
  uring::spawn(g.at(0), [](channel<int>& c, int count, std::latch& l) -> task<void> {
    for (int i = 0; i < count; ++i) co_await c.send(i);
    c.close();
    l.count_down();
  }(ch, n, done));
  done.wait();
  EXPECT_EQ(received, n);
  EXPECT_EQ(out_of_order, 0);
}

// Sends item{id, 0}, item{id, 1}, ... item{id, n - 1}.
task<void> send_numbered(channel<item>& ch, int id, int n, std::latch& done) {
  for (int i = 0; i < n; ++i) co_await ch.send(item{id, i});
  done.count_down();
}

// `coroutines` senders, the i-th on g.at(i % g.size()), and a plain thread send `per_sender` values each
// to a receiver on the group's last executor (so one coroutine shares its executor): every value arrives
// once, and in order per sender.
void expect_every_value_once_in_order(executor_group& g, std::size_t capacity, int coroutines,
                                      int per_sender_count) {
  channel<item> ch(g.at(g.size() - 1), capacity);
  const int thread_id = coroutines;
  per_sender seen(coroutines + 1);
  std::latch sent(coroutines + 1);
  std::latch received(1);
  uring::spawn(g.at(g.size() - 1), check_senders(ch, seen, received));
  for (int s = 0; s < coroutines; ++s) {
    uring::spawn(g.at(static_cast<std::size_t>(s) % g.size()), send_numbered(ch, s, per_sender_count, sent));
  }
  std::thread plain([&] {
    for (int i = 0; i < per_sender_count; ++i) {
      while (!ch.try_send(item{thread_id, i})) std::this_thread::yield();  // full: retry, nothing to wait on
    }
    sent.count_down();
  });
  sent.wait();
  ch.close();
  received.wait();
  plain.join();
  EXPECT_EQ(seen.total, (coroutines + 1) * per_sender_count);
  EXPECT_EQ(seen.bad, 0);
  EXPECT_EQ(seen.next, std::vector<int>(static_cast<std::size_t>(coroutines + 1), per_sender_count));
}

// Three coroutine senders (two on the other executor, one on the receiver's own) and a plain thread.
TEST_P(Channel, ManySendersEveryValueOnceAndInOrderPerSender) {
  executor_group g(2, options());
  expect_every_value_once_in_order(g, 8, 3, static_cast<int>(uring::test::scaled(20'000)));
}

// Capacity 1, four coroutine senders on three executors (one on the receiver's own) and a thread: nearly
// every send blocks or finds the place taken.
TEST_P(Channel, BlockedSendersOnACapacityOfOneLoseNothing) {
  executor_group g(3, options());
  expect_every_value_once_in_order(g, 1, 4, static_cast<int>(uring::test::scaled(5'000)));
}

// Capacity 1, two senders, a receiver that sleeps after each value: the senders must be held back.
TEST_P(Channel, AFullChannelSuspendsItsSenders) {
  executor_group g(2, options());
  constexpr int kSenders = 2;
  constexpr int kPerSender = 50;
  channel<int> ch(g.at(1), 1);
  std::atomic<int> outstanding{0};  // sends started and not yet received
  std::atomic<int> most{0};
  int received = 0;
  std::latch done(kSenders + 1);
  uring::spawn(g.at(1), [](channel<int>& c, std::atomic<int>& out, int& got, std::latch& l) -> task<void> {
    while (co_await c.receive()) {
      --out;
      ++got;
      std::this_thread::sleep_for(200us);  // a slow consumer
    }
    l.count_down();
  }(ch, outstanding, received, done));
  std::latch sent(kSenders);
  for (int s = 0; s < kSenders; ++s) {
    uring::spawn(g.at(0),
                 [](channel<int>& c, std::atomic<int>& out, std::atomic<int>& m, std::latch& all_sent,
                    std::latch& l) -> task<void> {
                   for (int i = 0; i < kPerSender; ++i) {
                     int now = ++out;
                     int seen = m.load();
                     while (now > seen && !m.compare_exchange_weak(seen, now)) {
                     }
                     co_await c.send(i);
                   }
                   all_sent.count_down();
                   l.count_down();
                 }(ch, outstanding, most, sent, done));
  }
  sent.wait();
  ch.close();
  done.wait();
  EXPECT_EQ(received, kSenders * kPerSender);
  // At most: capacity() queued, one value held by each sender (blocked, or counted just before its send)
  // and the one the receiver has taken but not yet counted off. Without back-pressure: about 100.
  EXPECT_LE(most.load(), 1 + kSenders + 1);
  EXPECT_GE(most.load(), 2);  // the senders did get ahead of the receiver: the bound was exercised
}

TEST_P(Channel, CloseFailsABlockedSenderWithEpipeAndKeepsWhatWasAccepted) {
  executor_group g(2, options());
  channel<int> ch(g.at(1), 1);
  std::latch about_to_block(1);
  std::latch sender_done(1);
  int blocked_error = 0;
  int later_error = 0;
  uring::spawn(g.at(0),
               [](channel<int>& c, int& e1, int& e2, std::latch& blocking, std::latch& l) -> task<void> {
                 co_await c.send(1);  // fills the channel
                 blocking.count_down();
                 try {
                   co_await c.send(2);  // blocks: nobody receives yet
                 } catch (const std::system_error& e) {
                   e1 = e.code().value();
                 }
                 try {
                   co_await c.send(3);  // already closed
                 } catch (const std::system_error& e) {
                   e2 = e.code().value();
                 }
                 l.count_down();
               }(ch, blocked_error, later_error, about_to_block, sender_done));
  about_to_block.wait();
  // Runs on the sender's thread on a later turn: after the sender has suspended in send(2).
  g.at(0).post([&ch] { ch.close(); });
  sender_done.wait();
  EXPECT_EQ(blocked_error, EPIPE);
  EXPECT_EQ(later_error, EPIPE);
  EXPECT_EQ(ch.try_send(4).res, -EPIPE);  // closed

  std::vector<int> got;
  std::latch drained(1);
  uring::spawn(g.at(1), collect(ch, got, drained));
  drained.wait();
  EXPECT_EQ(got, std::vector<int>{1});  // accepted before the close: still delivered
}

TEST_P(Channel, CloseWithValuesQueuedDeliversThemThenNullopt) {
  executor_group g(2, options());
  channel<int> ch(g.at(1), 8);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ch.try_send(i));
  ch.close();
  ch.close();  // idempotent
  EXPECT_EQ(ch.try_send(5).res, -EPIPE);
  std::vector<int> got;
  std::latch drained(1);
  uring::spawn(g.at(1), collect(ch, got, drained));
  drained.wait();
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST_P(Channel, TrySendOnAFullChannelSaysEagainAndKeepsTheValue) {
  executor_group g(2, options());
  channel<std::unique_ptr<int>> ch(g.at(1), 2);
  EXPECT_TRUE(ch.try_send(std::make_unique<int>(1)));
  EXPECT_TRUE(ch.try_send(std::make_unique<int>(2)));
  auto third = std::make_unique<int>(3);
  EXPECT_EQ(ch.try_send(std::move(third)).res, -EAGAIN);
  ASSERT_NE(third, nullptr);  // refused: not moved from
  std::vector<int> got;
  std::latch took_one(1);
  std::latch drained(1);
  uring::spawn(g.at(1),
               [](channel<std::unique_ptr<int>>& c, std::vector<int>& out, std::latch& one,
                  std::latch& l) -> task<void> {
                 auto first = co_await c.receive();
                 out.push_back(**first);
                 one.count_down();
                 while (auto v = co_await c.receive()) out.push_back(**v);
                 l.count_down();
               }(ch, got, took_one, drained));
  took_one.wait();
  EXPECT_TRUE(ch.try_send(std::move(third)));  // room again
  EXPECT_EQ(third, nullptr);
  ch.close();
  drained.wait();
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
}

TEST_P(Channel, ReceiveOffTheReceivingExecutorIsRefused) {
  executor_group g(2, options());
  channel<int> ch(g.at(1), 1);
  bool refused = false;
  std::latch done(1);
  uring::spawn(g.at(0), [](channel<int>& c, bool& r, std::latch& l) -> task<void> {
    try {
      (void)co_await c.receive();
    } catch (const std::logic_error&) {
      r = true;
    }
    l.count_down();
  }(ch, refused, done));
  done.wait();
  EXPECT_TRUE(refused);
}

// A receiver parked on one channel and a sender blocked on another when the group stops: their frames
// are destroyed and take their awaitables out of the channels (a channel destroyed with a waiter still
// linked terminates the test). ASan checks that nothing touches the frames afterwards.
TEST_P(Channel, StoppingWithWaitersParkedIsSafe) {
  std::optional<channel<int>> empty;
  std::optional<channel<int>> full;
  std::atomic<int> destroyed{0};
  {
    executor_group g(2, options());
    empty.emplace(g.at(1), 1);
    full.emplace(g.at(1), 1);
    ASSERT_TRUE(full->try_send(0));
    struct sentinel {
      std::atomic<int>& n;
      ~sentinel() { ++n; }
    };
    std::latch about_to_wait(2);
    uring::spawn(g.at(1), [](channel<int>& c, std::atomic<int>& n, std::latch& l) -> task<void> {
      sentinel s{n};
      l.count_down();
      (void)co_await c.receive();  // parks: nobody sends
    }(*empty, destroyed, about_to_wait));
    uring::spawn(g.at(0), [](channel<int>& c, std::atomic<int>& n, std::latch& l) -> task<void> {
      sentinel s{n};
      l.count_down();
      co_await c.send(1);  // blocks: nobody receives
    }(*full, destroyed, about_to_wait));
    about_to_wait.wait();
    // A post to each executor runs on a later turn, after its coroutine has suspended.
    std::latch suspended(2);
    g.at(0).post([&] { suspended.count_down(); });
    g.at(1).post([&] { suspended.count_down(); });
    suspended.wait();
    EXPECT_FALSE(full->try_send(2));  // the blocked sender is ahead
  }                                   // stop + join: both frames destroyed
  EXPECT_EQ(destroyed.load(), 2);
}

// The natural order: channels declared after the group they serve, left by an exception while a receiver
// is parked on one and a sender blocked on the other. Their destructors close them and the waiters
// resume afterwards (EPIPE for the sender, nullopt for the receiver) without touching the channels' memory.
TEST_P(Channel, DestroyedBeforeItsGroupWhileCoroutinesWaitItClosesAndWakesThem) {
  executor_group g(2, options());
  std::atomic<int> nullopts{0}, epipes{0};
  std::latch ended(2);  // each waiter, once it has seen how its wait ended
  try {
    channel<int> empty(g.at(1), 1);
    channel<int> full(g.at(1), 1);
    ASSERT_TRUE(full.try_send(0));
    std::latch about_to_wait(2);
    uring::spawn(g.at(1),
                 [](channel<int>& c, std::atomic<int>& n, std::latch& l, std::latch& e) -> task<void> {
                   l.count_down();
                   if (!co_await c.receive()) ++n;  // parks: nobody sends
                   e.count_down();
                 }(empty, nullopts, about_to_wait, ended));
    uring::spawn(g.at(0),
                 [](channel<int>& c, std::atomic<int>& n, std::latch& l, std::latch& e) -> task<void> {
                   l.count_down();
                   try {
                     co_await c.send(1);  // blocks: nobody receives
                   } catch (const std::system_error& err) {
                     if (err.code().value() == EPIPE) ++n;
                   }
                   e.count_down();
                 }(full, epipes, about_to_wait, ended));
    about_to_wait.wait();
    // A post to each executor runs on a later turn, after its coroutine has suspended.
    std::latch suspended(2);
    g.at(0).post([&] { suspended.count_down(); });
    g.at(1).post([&] { suspended.count_down(); });
    suspended.wait();
    throw std::runtime_error("leaves the scope");
  } catch (const std::runtime_error&) {
  }
  ended.wait();  // the waiters resumed after the destructors returned
  EXPECT_EQ(nullopts.load(), 1);
  EXPECT_EQ(epipes.load(), 1);
}

// Destroyed on its receiver's own thread while the receiver waits: the destructor cannot wait for that
// thread, so it wakes the receiver and goes; the receiver resumes later with nullopt.
TEST_P(Channel, DestroyedOnItsReceiversThreadWhileItWaitsWakesItLater) {
  int ended = 0;
  run([](int& ended) -> task<void> {
    auto ch = std::make_unique<channel<int>>(*uring::executor::current(), 1);
    bool receiving = false;
    auto receiver = uring::spawn([](channel<int>& c, bool& receiving, int& ended) -> task<void> {
      receiving = true;
      if (!co_await c.receive()) ended = 1;
    }(*ch, receiving, ended));
    while (!receiving) co_await uring::nop();  // then it has parked: it runs on this thread
    ch.reset();
    co_await receiver;
  }(ended));
  EXPECT_EQ(ended, 1);
}

// Destroyed from a plain thread while its receiver waits on a lone executor that runs no loop then: the
// receiver resumes with nullopt at that executor's next run.
TEST_P(Channel, DestroyedWhileItsReceiverWaitsOnAnExecutorThatIsNotRunning) {
  uring::executor ex(options());
  auto ch = std::make_unique<channel<int>>(ex, 1);
  int ended = 0;
  bool receiving = false;
  uring::join_handle<void> receiver =
      ex.run([](channel<int>& c, bool& receiving, int& ended) -> task<uring::join_handle<void>> {
        auto h = uring::spawn([](channel<int>& c, bool& receiving, int& ended) -> task<void> {
          receiving = true;
          if (!co_await c.receive()) ended = 1;
        }(c, receiving, ended));
        while (!receiving) co_await uring::nop();  // then it has parked: it runs on this thread
        co_return h;
      }(*ch, receiving, ended));
  EXPECT_EQ(ended, 0);
  ch.reset();
  ex.run([](uring::join_handle<void>& h) -> task<void> { co_await h; }(receiver));
  EXPECT_EQ(ended, 1);
}

// A blocked sender on a lone executor that runs no loop when the channel goes: the wake-up waits in that
// executor's mailbox, and its shutdown frees the sender's frame unresumed; the frame's awaitable must not
// touch the channel then (ASan sees it if it does).
TEST_P(Channel, ASenderFreedByItsExecutorAfterTheChannelWentLeavesTheChannelAlone) {
  uring::executor receiving(options());
  auto sender = std::make_unique<uring::executor>(options());
  auto ch = std::make_unique<channel<int>>(receiving, 1);
  ASSERT_TRUE(ch->try_send(0));  // full: the next send blocks
  bool sending = false;
  sender->run([](channel<int>& c, bool& sending) -> task<void> {
    uring::spawn([](channel<int>& c, bool& sending) -> task<void> {
      sending = true;
      co_await c.send(1);
    }(c, sending));
    while (!sending) co_await uring::nop();  // then it has blocked: it runs on this thread
  }(*ch, sending));
  ch.reset();
  sender.reset();
}

// The bound is capacity itself, whatever its size. A thread fills the channel while the receiver does not
// receive: exactly capacity() values fit, and after the receiver takes k values, exactly k more (below
// 16, a channel shows every freed place at once). Many rounds reuse the queue and the receiver's batch.
TEST_P(Channel, ACapacityThatIsNotAPowerOfTwoIsTheBound) {
  executor_group g(2, options());
  const int rounds = static_cast<int>(uring::test::scaled(400));
  for (const int cap : {3, 5}) {
    channel<int> ch(g.at(1), static_cast<std::size_t>(cap));
    int next_sent = 0;
    auto fill = [&] {  // values accepted until the channel refuses one
      int n = 0;
      for (; ch.try_send(next_sent); ++n) ++next_sent;
      return n;
    };
    ASSERT_EQ(fill(), cap);
    int next_received = 0;
    int bad = 0;
    for (int r = 0; r < rounds; ++r) {
      const int k = 1 + r % cap;
      std::latch took(1);
      uring::spawn(g.at(1), [](channel<int>& c, int count, int& expect, int& b, std::latch& l) -> task<void> {
        for (int i = 0; i < count; ++i) {
          auto v = co_await c.receive();
          if (!v || *v != expect) ++b;
          ++expect;
        }
        l.count_down();
      }(ch, k, next_received, bad, took));
      took.wait();
      ASSERT_EQ(fill(), k) << "capacity " << cap << ", round " << r;
    }
    ch.close();
    std::vector<int> rest;
    std::latch drained(1);
    uring::spawn(g.at(1), collect(ch, rest, drained));
    drained.wait();
    EXPECT_EQ(bad, 0) << "capacity " << cap;
    ASSERT_EQ(rest.size(), static_cast<std::size_t>(cap)) << "capacity " << cap;
    for (int i = 0; i < cap; ++i) EXPECT_EQ(rest[static_cast<std::size_t>(i)], next_received + i);
  }
}

INSTANTIATE_BACKENDS(Channel);

}  // namespace
