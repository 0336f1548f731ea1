// Raw messages (uring/message.hpp): all 96 bits, FIFO per pair, credit windows with back-pressure,
// blocked senders in order, a stalled receiver, a target stopped mid-stream, misuse. Every messaging
// configuration (MSG_RING with CQE flags, the mailbox, DEFER_TASKRUN, emulated).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <atomic>

#include <climits>
#include <future>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "message_util.hpp"
#include "signal_storm.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::executor_group;
using uring::inbox;
using uring::message;
using uring::task;

constexpr unsigned kWindow = 64;

class Messages : public uring::test::storm_backend_test {
 protected:
  uring::executor_options with_window(unsigned w) const {
    auto o = options();
    o.message_window = w;
    return o;
  }
};

// Receives n messages on the running executor and checks they carry 0, 1, 2, ... per sender (data's
// upper 32 bits name the sender, the lower the sequence number).
task<long> receive_sequenced(long n, int senders) {
  inbox in(*executor::current());
  std::vector<std::uint64_t> next(senders, 0);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    message m = co_await in.receive();
    auto who = static_cast<std::size_t>(m.data >> 32);
    if (who >= next.size() || (m.data & 0xffffffff) != next[who] ||
        m.value != static_cast<std::int32_t>(next[who] * 7)) {
      ++bad;
    } else {
      ++next[who];
    }
  }
  co_return bad;
}

task<void> send_sequenced(executor& to, long n, std::uint64_t who) {
  for (long i = 0; i < n; ++i) {
    co_await uring::send(to, static_cast<std::int32_t>(i * 7), (who << 32) | static_cast<std::uint64_t>(i));
  }
}

TEST_P(Messages, AllNinetySixBitsArrive) {
  executor_group group(1, options());
  executor& b = group.at(0);
  std::promise<std::vector<message>> received;
  uring::spawn(b, [](std::promise<std::vector<message>>& out) -> task<void> {
    inbox in(*executor::current());
    std::vector<message> v;
    for (int i = 0; i < 4; ++i) v.push_back(co_await in.receive());
    out.set_value(v);
  }(received));
  const std::vector<message> sent = {
      {INT_MIN, ~std::uint64_t{0}}, {INT_MAX, 0}, {-1, 1}, {0, 0x8000000000000001}};
  run([](executor& b, const std::vector<message>& s) -> task<void> {
    for (const message& m : s) co_await uring::send(b, m.value, m.data);
  }(b, sent));
  EXPECT_EQ(received.get_future().get(), sent);
}

TEST_P(Messages, ToItself) {
  run([]() -> task<void> {
    executor& self = *executor::current();
    co_await uring::send(self, 42, 4242);
    EXPECT_TRUE(uring::try_send(self, 43, 4343));
    inbox in(self);
    EXPECT_EQ(co_await in.receive(), (message{42, 4242}));
    EXPECT_EQ(co_await in.receive(), (message{43, 4343}));
    EXPECT_FALSE(in.try_receive().has_value());
    EXPECT_EQ(self.stats().raw_messages_sent, 2u);
    EXPECT_EQ(self.stats().raw_messages_received, 2u);
  }());
}

// The long runs, again inside a SIGALRM storm (signal_storm.hpp): EINTR anywhere changes no result.
// On SQPOLL rings a tenth as long: each wake-up there also waits for a poller thread to be scheduled, so
// on two busy cores a full run takes minutes and proves nothing more.
class MessageSoak : public Messages {
 protected:
  [[nodiscard]] long soak(long n) const { return uring::test::scaled(options().sqpoll.enabled ? n / 10 : n); }
};

TEST_P(MessageSoak, SequencedStreamArrivesInOrder) {
  const long n = soak(10'000'000);  // none lost, duplicated or reordered
  executor_group group(2, options());
  std::promise<long> bad;
  uring::spawn(group.at(1), [](long n, std::promise<long>& out) -> task<void> {
    out.set_value(co_await receive_sequenced(n, 1));
  }(n, bad));
  uring::spawn(group.at(0), send_sequenced(group.at(1), n, 0));
  EXPECT_EQ(bad.get_future().get(), 0);
}

TEST_P(MessageSoak, FourExecutorsAllToAll) {
  const long per_pair = soak(250'000);  // 1M sent by each executor
  executor_group group(4, options());
  std::vector<std::promise<long>> bad(4);
  for (std::size_t i = 0; i < 4; ++i) {
    uring::spawn(group.at(i),
                 [](executor_group& g, std::size_t me, long n, std::promise<long>& out) -> task<void> {
                   // Senders first (spawned, so they run beside this receiver), each to every executor,
                   // itself too.
                   for (std::size_t to = 0; to < 4; ++to) uring::spawn(send_sequenced(g.at(to), n, me));
                   out.set_value(co_await receive_sequenced(4 * n, 4));
                 }(group, i, per_pair, bad[i]));
  }
  for (auto& b : bad) EXPECT_EQ(b.get_future().get(), 0);
}

// A receiver whose thread stops turning: the sender gets exactly `window` messages out, then EAGAIN from
// try_send and a suspended send; nothing is lost when the receiver comes back.
TEST_P(Messages, StalledReceiverBoundsWhatPilesUp) {
  const long n = uring::test::scaled(200'000);
  executor_group group(1, with_window(kWindow));
  executor& b = group.at(0);
  std::latch stalled(1), resume(1);
  b.post([&] {
    stalled.count_down();
    resume.wait();  // the receiver's thread is busy: its loop does not turn
  });
  stalled.wait();
  std::promise<long> bad;
  run([](executor& b, long n, std::latch& resume, std::promise<long>& bad) -> task<void> {
    long accepted = 0;
    while (uring::try_send(b, static_cast<std::int32_t>(accepted * 7), static_cast<std::uint64_t>(accepted)))
      ++accepted;
    EXPECT_EQ(accepted, kWindow) << "the credit window did not bound the stalled pair";
    EXPECT_EQ(uring::try_send(b, 0, 0).error(), std::errc::resource_unavailable_try_again);
    uring::spawn(b, [](long n, std::promise<long>& out) -> task<void> {
      out.set_value(co_await receive_sequenced(n, 1));
    }(n, bad));
    resume.count_down();
    for (long i = accepted; i < n; ++i)
      co_await uring::send(b, static_cast<std::int32_t>(i * 7), static_cast<std::uint64_t>(i));
  }(b, n, resume, bad));
  EXPECT_EQ(bad.get_future().get(), 0);
}

// Several coroutines blocked on one full pair resume, and their messages arrive, in the order they blocked.
TEST_P(Messages, BlockedSendersGoInOrder) {
  executor_group group(1, with_window(4));
  executor& b = group.at(0);
  std::latch stalled(1), resume(1);
  b.post([&] {
    stalled.count_down();
    resume.wait();
  });
  stalled.wait();
  std::promise<long> bad;
  run([](executor& b, std::latch& resume, std::promise<long>& bad) -> task<void> {
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(uring::try_send(b, i * 7, static_cast<std::uint64_t>(i)));
    std::vector<task<void>> blocked;
    for (int i = 4; i < 20; ++i) {
      blocked.push_back([](executor& b, int i) -> task<void> {
        co_await uring::send(b, i * 7, static_cast<std::uint64_t>(i));
      }(b, i));
    }
    uring::spawn(b, [](std::promise<long>& out) -> task<void> {
      out.set_value(co_await receive_sequenced(20, 1));
    }(bad));
    resume.count_down();
    co_await uring::when_all(std::move(blocked));  // started in order: they block in order
  }(b, resume, bad));
  EXPECT_EQ(bad.get_future().get(), 0);
}

// A target stopped mid-stream: every send that completed reached the target's inbox or was reported
// failed to the sender (the kernel refused a MSG_RING racing with the ring's close), and from then on
// sends fail with ESHUTDOWN or EPIPE (a blocked one included) instead of hanging.
TEST_P(Messages, TargetStoppedMidStream) {
  executor_group group(1, with_window(16));
  executor& b = group.at(0);
  std::atomic<long> received{0};
  uring::spawn(b, uring::test::receive_then_stop(received, 1000));  // stops mid-stream
  executor a(options());
  long sent = a.run(uring::test::send_until_refused(&b));
  group.join();
  // Reaps what came meanwhile: a refusal of the kernel, and the target's settlement (how many arrived).
  a.run([]() -> task<void> { co_await uring::nop(); }());
  EXPECT_GE(sent, 1000);
  EXPECT_EQ(static_cast<long>(b.stats().raw_messages_received + a.stats().messages_failed), sent)
      << "a message whose send completed vanished";
}

// A burst of raw messages larger than the sender's submission queue, sent in one turn: natively each
// message is written into the SQ in place, and a full SQ is submitted to make room (sq_full_flushes)
// rather than losing or reordering anything.
TEST_P(Messages, ABurstLargerThanTheSubmissionQueueArrivesInOrder) {
  executor_group group(1, with_window(kWindow));
  std::promise<long> bad;
  uring::spawn(group.at(0), [](std::promise<long>& out) -> task<void> {
    out.set_value(co_await receive_sequenced(kWindow, 1));
  }(bad));
  auto opts = options();
  opts.sq_entries = 4;
  executor a(opts);
  a.run(send_sequenced(group.at(0), kWindow, 0));  // the window lets all of them go without suspending
  EXPECT_EQ(bad.get_future().get(), 0);
  EXPECT_EQ(a.stats().raw_messages_sent, kWindow);
  if (a.plan().msg_ring && a.plan().backend == uring::backend_kind::native && group.at(0).plan().msg_ring) {
    EXPECT_GT(a.stats().sq_full_flushes, 0u) << "the burst never filled the SQ: the test does not test it";
  }
}

// A long burst leaves in batches of 64 (kMessagesPerEnter), not in one enter at the turn's end: the kernel
// posts a stream of MSG_RINGs cheaper per message in batches of 64 than of 256 (bench/README.md, "Raw
// messages").
TEST_P(Messages, ALongBurstLeavesInBatchesOf64) {
  constexpr long kBurst = 200;
  executor_group group(1, with_window(256));
  std::promise<long> bad;
  uring::spawn(group.at(0), [](std::promise<long>& out) -> task<void> {
    out.set_value(co_await receive_sequenced(kBurst, 1));
  }(bad));
  executor a(options());                          // the default SQ (256 entries) would hold the whole burst
  a.run(send_sequenced(group.at(0), kBurst, 0));  // the window lets all of them go without suspending
  EXPECT_EQ(bad.get_future().get(), 0);
  EXPECT_EQ(a.stats().raw_messages_sent, static_cast<std::uint64_t>(kBurst));
  if (a.plan().msg_ring && a.plan().backend == uring::backend_kind::native && group.at(0).plan().msg_ring) {
    EXPECT_GE(a.stats().sq_full_flushes, static_cast<std::uint64_t>(kBurst / 64))
        << "the burst left in fewer, larger batches";
  }
}

// A sender none of whose messages arrived before the target's last drain is told at the target's
// settlement too: here the one message leaves the sender's ring (at the end of its run) only after the
// target has stopped, drained and settled, so natively it lands in a ring nobody reads. It must be
// reported failed (natively) or have arrived (the mailbox took it before the stop), never neither.
TEST_P(Messages, ASenderWithNothingDeliveredIsToldAtSettlement) {
  executor_group group(1, with_window(16));
  executor& b = group.at(0);
  executor a(options());
  a.run([](executor_group& g, executor& target) -> task<void> {
    auto e = uring::try_send(target, 5, 55);
    EXPECT_TRUE(e) << e.error().message();
    g.stop();  // the target refuses further messages, drains its ring and settles before a's message leaves
    g.join();
    co_return;
  }(group, b));
  std::error_code after;
  a.run([](executor& target, std::error_code& out) -> task<void> {
    co_await uring::nop();  // reaps the target's settlement
    out = uring::try_send(target, 6, 66).error();
  }(b, after));
  EXPECT_EQ(b.stats().raw_messages_received + a.stats().messages_failed, 1u)
      << "the message vanished unreported";
  EXPECT_EQ(after.value(), ESHUTDOWN) << after.message();
}

// The same with the target destroyed (its ring closed) before the message leaves: natively the kernel
// then refuses the MSG_RING as well, and the message is still counted once, not twice.
TEST_P(Messages, AMessageBothSettledAndRefusedIsCountedOnce) {
  auto group = std::make_unique<executor_group>(1, with_window(16));
  std::uint64_t received = 0;
  executor a(options());
  a.run([](std::unique_ptr<executor_group>& g, std::uint64_t& arrived) -> task<void> {
    auto e = uring::try_send(g->at(0), 5, 55);
    EXPECT_TRUE(e) << e.error().message();
    g->stop();
    g->join();
    arrived = g->at(0).stats().raw_messages_received;
    g.reset();  // the ring closes before a's message leaves
    co_return;
  }(group, received));
  a.run([]() -> task<void> { co_await uring::nop(); }());  // reaps the settlement and any refusal
  EXPECT_EQ(received + a.stats().messages_failed, 1u);
}

// A frame destroyed by its executor's shutdown may still send (here from a destructor): the message
// must not be left in the submission queue of a ring that never submits again.
struct sends_when_destroyed {
  executor* to;
  ~sends_when_destroyed() {
    auto e = uring::try_send(*to, 9, 99);
    EXPECT_TRUE(e) << e.error().message();
  }
};

TEST_P(Messages, SentDuringShutdownStillArrives) {
  executor_group group(1, options());
  std::promise<message> got;
  uring::spawn(group.at(0), [](std::promise<message>& out) -> task<void> {
    out.set_value(co_await inbox(*executor::current()).receive());
  }(got));
  {
    executor a(options());
    uring::spawn(a, [](executor& to) -> task<void> {
      sends_when_destroyed guard{&to};
      co_await uring::sleep_for(std::chrono::hours(1));  // until a's shutdown destroys this frame
    }(group.at(0)));
    a.run([]() -> task<void> {
      co_await uring::nop();
      executor::current()->stop();
    }());
  }
  EXPECT_EQ(got.get_future().get(), (message{9, 99}));
}

// fd passing: the owner moves into a task spawned on the target. Delivered, the fd works there;
// refused (the target stopped), it is closed with the destroyed task; dropped at the target's shutdown
// (spawned, never run), likewise. No fd leaks either way.
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

task<void> write_there(uring::owned_fd fd, std::promise<std::thread::id>& where) {
  co_await uring::write(fd.get(), uring::const_buffer("x", 1));
  where.set_value(std::this_thread::get_id());
}

TEST_P(Messages, FdPassingDeliversOrCloses) {
  executor_group group(1, options());
  uring::test::pipe_pair pipe;
  std::promise<std::thread::id> where;
  const int w = pipe.write_end.get();
  uring::spawn(group.at(0), write_there(uring::owned_fd(pipe.write_end.release()), where));
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  char c = 0;
  EXPECT_EQ(::read(pipe.read_end.get(), &c, 1), 1);
  group.stop();
  group.join();
  EXPECT_FALSE(is_open(w)) << "the delivered owner closes the fd when its task ends";

  uring::test::pipe_pair refused;
  const int r = refused.write_end.get();
  std::promise<std::thread::id> never;
  EXPECT_THROW(uring::spawn(group.at(0), write_there(uring::owned_fd(refused.write_end.release()), never)),
               std::system_error);
  EXPECT_FALSE(is_open(r)) << "a refused hand-off leaked its fd";

  uring::test::pipe_pair dropped;
  const int d = dropped.write_end.get();
  {
    executor target(options());
    std::thread poster(
        [&] { uring::spawn(target, write_there(uring::owned_fd(dropped.write_end.release()), never)); });
    poster.join();
  }  // destroyed before it ever ran the task
  EXPECT_FALSE(is_open(d)) << "a dropped hand-off leaked its fd";
}

TEST_P(Messages, MisuseFailsClearly) {
  executor ex(options());
  EXPECT_EQ(uring::try_send(ex, 1, 1).res, -EPERM);  // no executor runs on this thread
  inbox in(ex);
  EXPECT_THROW((void)in.try_receive(), std::logic_error);
  // Awaited from a coroutine on another executor: the same error, from the co_await, and nothing parked
  // on the inbox's executor (a later message there finds no stale waiter).
  run([](inbox& other) -> task<void> { EXPECT_THROW((void)co_await other.receive(), std::logic_error); }(in));
  ex.run([]() -> task<void> {
    executor& self = *executor::current();
    co_await uring::send(self, 7, 77);
    EXPECT_EQ(co_await inbox(self).receive(), (message{7, 77}));
  }());
}

INSTANTIATE_MESSAGING_BACKENDS(Messages);
INSTANTIATE_STORM_BACKENDS(MessageSoak, uring::test::messaging_backends());

}  // namespace
