// executor_options::busy_poll: an idle loop spins for work before it parks. Every messaging backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::executor_group;
using uring::task;

class BusyPoll : public uring::test::backend_test {
 protected:
  uring::executor_options polling(std::chrono::microseconds window) const {
    auto o = options();
    o.busy_poll = window;
    return o;
  }
};

// Raw messages bounce between two executors whose windows outlast any reply: the replies are found
// while spinning (native: the MSG_RING CQE; elsewhere: the mailbox), and every one arrives in order.
TEST_P(BusyPoll, MessagesBetweenSpinningExecutorsAreFoundWithoutSleeping) {
  constexpr int kRounds = 2000;
  executor_group group(2, polling(std::chrono::seconds(2)));
  std::latch done(2);
  std::atomic<int> bad{0};
  auto side = [](executor& peer, bool starts, std::latch& l, std::atomic<int>& wrong) -> task<void> {
    uring::inbox in(*executor::current());
    for (int i = 0; i < kRounds; ++i) {
      if (starts) co_await uring::send(peer, i, 0);
      uring::message m = co_await in.receive();
      if (m.value != i) wrong.fetch_add(1);
      if (!starts) co_await uring::send(peer, i, 0);
    }
    l.count_down();
  };
  uring::spawn(group.at(1), side(group.at(0), false, done, bad));
  uring::spawn(group.at(0), side(group.at(1), true, done, bad));
  done.wait();
  group.stop();
  group.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(group.at(0).stats().busy_poll_hits + group.at(1).stats().busy_poll_hits, 0u);
}

// With nothing to find, the window ends and the loop parks as usual: a timer still wakes it.
TEST_P(BusyPoll, AnIdleLoopStillParksAndWakes) {
  executor ex(polling(200us));
  const auto start = std::chrono::steady_clock::now();
  ex.run([]() -> task<void> { co_await uring::sleep_for(20ms); }());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
}

// stop() from another thread ends the spin at once, not when a long window runs out.
TEST_P(BusyPoll, StopEndsTheSpin) {
  constexpr auto kWindow = std::chrono::seconds(60);
  executor_group group(1, polling(kWindow));
  std::latch spinning(1);
  group.at(0).post([&] { spinning.count_down(); });
  spinning.wait();  // the loop is past the post, idle: spinning now or about to
  const auto start = std::chrono::steady_clock::now();
  group.stop();
  group.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kWindow) << "the spin ran its whole window";
}

INSTANTIATE_MESSAGING_BACKENDS(BusyPoll);

}  // namespace
