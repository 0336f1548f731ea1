// channel<T> under races, on every backend: values with a destructor neither leaked nor destroyed twice,
// close() racing senders on several threads, and wake-ups of parked receivers and senders never lost.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <latch>
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

// A value that counts its live instances and notices being used after its destruction (or before its
// construction).
struct tracked {
  static constexpr std::uint32_t kAlive = 0xA11CE;
  static constexpr std::uint32_t kDead = 0xDEAD;
  static inline std::atomic<int> live{0};
  static inline std::atomic<int> misused{0};
  int value;
  int sender = 0;
  std::uint32_t state = kAlive;

  explicit tracked(int v, int s = 0) noexcept : value(v), sender(s) { ++live; }
  tracked(tracked&& o) noexcept : value(std::exchange(o.value, -1)), sender(o.sender) {
    check(o);
    ++live;
  }
  tracked& operator=(tracked&& o) noexcept {
    check(*this);
    check(o);
    value = std::exchange(o.value, -1);
    sender = o.sender;
    return *this;
  }
  ~tracked() {
    check(*this);
    state = kDead;
    --live;
  }
  static void check(const tracked& t) noexcept {
    if (t.state != kAlive) ++misused;
  }
  static void reset() noexcept {
    live = 0;
    misused = 0;
  }
};

// Values with a destructor: every one constructed is destroyed once, whether it was received, refused,
// or left in the channel when it was destroyed; the stream of a capacity-8 channel goes many times
// through the fast path, the blocked senders' path and the hand-over to a parked receiver.
TEST_P(Channel, ValuesWithADestructorAreNeitherLeakedNorDestroyedTwice) {
  tracked::reset();
  {
    executor_group g(2, options());
    {
      channel<tracked> ch(g.at(1), 5);
      for (int i = 0; i < 5; ++i) ASSERT_TRUE(ch.try_send(tracked(i)));
      tracked refused(5);
      EXPECT_FALSE(ch.try_send(std::move(refused)));
      EXPECT_EQ(refused.value, 5);  // not moved from
      std::vector<int> got;
      std::latch took(1);
      uring::spawn(g.at(1), [](channel<tracked>& c, std::vector<int>& out, std::latch& l) -> task<void> {
        for (int i = 0; i < 2; ++i) out.push_back((co_await c.receive())->value);
        l.count_down();
      }(ch, got, took));
      took.wait();
      EXPECT_EQ(got, (std::vector<int>{0, 1}));
    }  // 2, 3 and 4 are still in the channel
    EXPECT_EQ(tracked::live.load(), 0);

    const int n = static_cast<int>(uring::test::scaled(20'000));
    channel<tracked> ch(g.at(1), 7);
    per_sender seen(2);
    std::latch sent(1);
    std::latch received(1);
    uring::spawn(g.at(1), [](channel<tracked>& c, per_sender& sn, std::latch& l) -> task<void> {
      while (auto v = co_await c.receive()) sn.saw(v->sender, v->value);
      l.count_down();
    }(ch, seen, received));
    uring::spawn(g.at(0), [](channel<tracked>& c, int count, std::latch& l) -> task<void> {
      for (int i = 0; i < count; ++i) co_await c.send(tracked(i, 0));
      l.count_down();
    }(ch, n, sent));
    std::thread plain([&] {
      for (int i = 0; i < n; ++i) {
        while (!ch.try_send(tracked(i, 1))) std::this_thread::yield();
      }
    });
    plain.join();
    sent.wait();
    ch.close();
    received.wait();
    EXPECT_EQ(seen.bad, 0);
    EXPECT_EQ(seen.next, (std::vector<int>{n, n}));
  }
  EXPECT_EQ(tracked::live.load(), 0);
  EXPECT_EQ(tracked::misused.load(), 0);
}

// Spins (yielding) until `count` reaches `target`; false once it has not moved for 10 s: a watchdog for a
// lost wake-up, which would otherwise hang the test.
bool reaches(const std::atomic<int>& count, int target) {
  auto since = std::chrono::steady_clock::now();
  for (int last = count.load(std::memory_order_acquire); last < target;) {
    std::this_thread::yield();
    if (const int now = count.load(std::memory_order_acquire); now != last) {
      last = now;
      since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - since > 10s) {
      return false;
    }
  }
  return true;
}

// close() races a stream from three threads and a coroutine: every value whose try_send returned true
// (or whose send completed) arrives exactly once and in order, then nullopt; nothing after.
TEST_P(Channel, CloseRacingSendsDeliversEveryAcceptedValueOnce) {
  executor_group g(2, options());
  constexpr int kThreads = 3;  // senders 0..2; 3 is a coroutine
  const int rounds = static_cast<int>(uring::test::scaled(40));
  for (int round = 0; round < rounds; ++round) {
    channel<item> ch(g.at(1), 16);
    std::vector<int> accepted(kThreads + 1, 0);
    per_sender seen(kThreads + 1);
    std::atomic<int> total{0};
    std::atomic<bool> closed{false};
    std::latch done(2);  // the receiver, the coroutine sender
    uring::spawn(g.at(1), check_senders(ch, seen, done));
    uring::spawn(g.at(0), [](channel<item>& c, int& acc, std::atomic<int>& tot, std::latch& l) -> task<void> {
      try {
        for (;; ++acc, ++tot) co_await c.send(item{kThreads, acc});
      } catch (const std::system_error& e) {
        if (e.code().value() != EPIPE) ADD_FAILURE() << e.what();
      }
      l.count_down();
    }(ch, accepted[kThreads], total, done));
    std::vector<std::thread> threads;
    for (int id = 0; id < kThreads; ++id) {
      threads.emplace_back([&, id] {
        for (int i = 0;; ++i, ++total) {
          while (!ch.try_send(item{id, i})) {
            if (closed.load()) {
              accepted[static_cast<std::size_t>(id)] = i;
              return;
            }
            std::this_thread::yield();
          }
        }
      });
    }
    // Close mid-stream, at a different point each round.
    EXPECT_TRUE(reaches(total, 20 + (round * 37) % 500));
    ch.close();
    closed = true;
    for (auto& t : threads) t.join();
    done.wait();
    EXPECT_EQ(seen.bad, 0) << "round " << round;
    EXPECT_EQ(seen.next, accepted) << "round " << round;
    EXPECT_FALSE(ch.try_send(item{0, 0}));
  }
}

// Round after round the receiver parks on an empty channel and one sender (or two at once, racing for
// the doorbell) sends: each round's values arrive. The coroutine sender waits for the round's end on a
// channel of acknowledgements, suspending, so that its executor enters and the doorbell leaves. A lost
// wake-up trips the watchdog.
TEST_P(Channel, AParkedReceiverIsWokenEveryRound) {
  executor_group g(2, options());
  const int rounds = static_cast<int>(uring::test::scaled(5'000));
  for (const int senders : {1, 2}) {
    channel<item> ch(g.at(1), 4);
    channel<int> round_ends(g.at(0), 1);
    std::atomic<int> received{0};
    per_sender seen(2);
    std::latch done(2);  // the receiver and the coroutine sender
    uring::spawn(g.at(1),
                 [](channel<item>& c, channel<int>& ends, int per_round, std::atomic<int>& got,
                    per_sender& sn, std::latch& l) -> task<void> {
                   while (auto v = co_await c.receive()) {
                     sn.saw(v->sender, v->seq);
                     const int n = got.fetch_add(1, std::memory_order_release) + 1;
                     if (n % per_round != 0) continue;
                     // The test closes `ends` once it has counted the last value, which may be before
                     // this acknowledgement: EPIPE then ends nothing the test checks.
                     try {
                       co_await ends.send(n / per_round);
                     } catch (const std::system_error& e) {
                       if (e.code().value() != EPIPE) throw;
                     }
                   }
                   l.count_down();
                 }(ch, round_ends, senders, received, seen, done));
    // Sender 0 is a coroutine on the other executor (the doorbell rides its ring), sender 1 a thread.
    uring::spawn(g.at(0), [](channel<item>& c, channel<int>& ends, int n, std::latch& l) -> task<void> {
      for (int r = 0; r < n; ++r) {
        co_await c.send(item{0, r});
        if (co_await ends.receive() != r + 1) break;  // closed: a wake-up was lost
      }
      l.count_down();
    }(ch, round_ends, rounds, done));
    std::atomic<bool> refused{false};
    std::thread plain;
    if (senders == 2) {
      plain = std::thread([&] {
        for (int r = 0; r < rounds; ++r) {
          if (!ch.try_send(item{1, r})) refused = true;  // four places, at most two taken
          if (!reaches(received, 2 * (r + 1))) return;
        }
      });
    }
    EXPECT_TRUE(reaches(received, senders * rounds)) << senders << " senders: a wake-up was lost";
    if (plain.joinable()) plain.join();
    ch.close();
    round_ends.close();
    done.wait();
    EXPECT_FALSE(refused.load());
    EXPECT_EQ(seen.bad, 0);
    EXPECT_EQ(seen.total, senders * rounds);
  }
}

// A sender blocked on a full channel, its executor asleep, is woken as soon as the receiver lets it in,
// not at the receiving executor's next enter: here the receiver, with a full channel still to hand out,
// works on without suspending (so its executor never enters) until the sender has resumed. Natively the
// doorbell is a MSG_RING that leaves by an enter of its own; through a mailbox it is written at once.
TEST_P(Channel, AWokenSenderDoesNotWaitForTheReceiversNextEnter) {
  executor_group g(2, options());
  channel<int> ch(g.at(1), 4);
  std::atomic<int> sent{0};
  std::latch done(2);
  uring::spawn(g.at(0), [](channel<int>& c, std::atomic<int>& n, std::latch& l) -> task<void> {
    for (int i = 0; i < 5; ++i) {  // the fifth finds the channel full
      co_await c.send(i);
      n.fetch_add(1, std::memory_order_release);
    }
    l.count_down();
  }(ch, sent, done));
  ASSERT_TRUE(reaches(sent, 4));
  const auto since = std::chrono::steady_clock::now();
  while (!uring::detail::executor_access::asleep(g.at(0))) {  // blocked, and its executor idle
    ASSERT_LT(std::chrono::steady_clock::now() - since, 10s) << "the sender's executor never slept";
    std::this_thread::yield();
  }
  std::vector<int> got;
  bool woken = false;
  uring::spawn(
      g.at(1),
      [](channel<int>& c, std::atomic<int>& n, std::vector<int>& out, bool& ok, std::latch& l) -> task<void> {
        out.push_back(*co_await c.receive());  // lets the sender in: full again
        ok = reaches(n, 5);                    // spins on this thread: no enter until the sender resumed
        for (int i = 0; i < 4; ++i) out.push_back(*co_await c.receive());
        l.count_down();
      }(ch, sent, got, woken, done));
  done.wait();
  EXPECT_TRUE(woken) << "the blocked sender waited for the receiving executor's next enter";
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
}

INSTANTIATE_BACKENDS(Channel);

}  // namespace
