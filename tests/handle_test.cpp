// executor_handle: posts and messages through a handle reach a live executor or fail with ESHUTDOWN, also
// when the executor is stopped or destroyed while other threads use the handle; none is lost or run twice.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "handle_fixture.hpp"
#include "message_util.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::executor_group;
using uring::executor_handle;
using uring::inbox;
using uring::message;
using uring::task;
using uring::test::Handles;

int shutdown_errno(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::system_error& e) {
    return e.code().value();
  }
  return 0;
}

TEST_P(Handles, ADefaultHandleNamesNothing) {
  executor_handle none;
  EXPECT_FALSE(none.alive());
  EXPECT_EQ(shutdown_errno([&] { none.post([] {}); }), ESHUTDOWN);
  run([](executor_handle h) -> task<void> {
    EXPECT_EQ(uring::try_send(h, 1, 2).error(), std::error_code(ESHUTDOWN, std::system_category()));
    bool threw = false;
    try {
      co_await uring::send(h, 1, 2);
    } catch (const std::system_error& e) {
      threw = e.code().value() == ESHUTDOWN;
    }
    EXPECT_TRUE(threw);
  }(none));
}

TEST_P(Handles, EachExecutorHasItsOwn) {
  executor a(options());
  executor b(options());
  EXPECT_EQ(a.handle(), a.handle());
  EXPECT_NE(a.handle(), b.handle());
  EXPECT_NE(a.handle(), executor_handle{});
}

TEST_P(Handles, PostRunsOnTheExecutorsThread) {
  executor_group group(1, options());
  executor_handle h = group.at(0).handle();
  EXPECT_TRUE(h.alive());
  std::promise<std::thread::id> ran_on;
  h.post([&] { ran_on.set_value(std::this_thread::get_id()); });
  std::promise<std::thread::id> owner;
  group.at(0).post([&] { owner.set_value(std::this_thread::get_id()); });
  EXPECT_EQ(ran_on.get_future().get(), owner.get_future().get());
}

TEST_P(Handles, MessagesArriveInOrder) {
  executor_group group(1, options());
  std::promise<std::vector<message>> received;
  uring::spawn(group.at(0), [](std::promise<std::vector<message>>& out) -> task<void> {
    inbox in(*executor::current());
    std::vector<message> v;
    for (int i = 0; i < 1000; ++i) v.push_back(co_await in.receive());
    out.set_value(v);
  }(received));
  // More than one window, so that sends through the handle also park and resume.
  auto opts = options();
  opts.message_window = 16;
  executor sender(opts);
  sender.run([](executor_handle to) -> task<void> {
    for (int i = 0; i < 1000; ++i) co_await uring::send(to, i, static_cast<std::uint64_t>(i) * 3);
  }(group.at(0).handle()));
  std::vector<message> got = received.get_future().get();
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(got[i], (message{i, static_cast<std::uint64_t>(i) * 3})) << i;
}

TEST_P(Handles, AfterTheExecutorIsDestroyedEverythingFailsWithEshutdown) {
  executor_handle h;
  {
    executor gone(options());
    h = gone.handle();
    EXPECT_TRUE(h.alive());
  }
  EXPECT_FALSE(h.alive());
  auto counted = std::make_shared<int>(0);
  EXPECT_EQ(shutdown_errno([&] { h.post([counted] { ++*counted; }); }), ESHUTDOWN);
  EXPECT_EQ(counted.use_count(), 1) << "the refused function must be destroyed, not kept";
  // New executors (which may take over the key one day) are not reached through the old handle.
  std::vector<std::unique_ptr<executor>> later;
  for (int i = 0; i < 8; ++i) later.push_back(std::make_unique<executor>(options()));
  EXPECT_FALSE(h.alive());
  later[0]->run([](executor_handle old) -> task<void> {
    EXPECT_EQ(uring::try_send(old, 1, 1).error(), std::error_code(ESHUTDOWN, std::system_category()));
    co_return;
  }(h));
  for (auto& e : later) EXPECT_NE(e->handle(), h);
}

TEST_P(Handles, AStoppedGroupMemberRefuses) {
  executor_handle h;
  {
    executor_group group(1, options());
    h = group.at(0).handle();
    group.stop();
    group.join();
    // Stopped but not destroyed: it no longer accepts work.
    EXPECT_FALSE(h.alive());
    EXPECT_EQ(shutdown_errno([&] { h.post([] {}); }), ESHUTDOWN);
  }
  EXPECT_FALSE(h.alive());
}

// Four threads post through one handle while the executor is destroyed under them: every post either
// ran exactly once or threw ESHUTDOWN, and nothing ran after the destructor returned.
TEST_P(Handles, PostsRacingTheDestructorRunOnceOrFail) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::atomic<int> ran{0};
  std::atomic<int> refused{0};
  std::atomic<bool> destroyed{false};
  std::atomic<int> ran_after{0};
  auto ex = std::make_unique<executor_group>(1, options());
  executor_handle h = ex->at(0).handle();
  std::latch start(kThreads + 1);
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kPerThread; ++i) {
        try {
          h.post([&] {
            if (destroyed.load()) ran_after.fetch_add(1);
            ran.fetch_add(1);
          });
        } catch (const std::system_error& e) {
          EXPECT_EQ(e.code().value(), ESHUTDOWN);
          refused.fetch_add(1);
        }
      }
    });
  }
  start.arrive_and_wait();
  ex.reset();  // stops and destroys the executor while the posters run
  destroyed.store(true);
  for (auto& p : posters) p.join();
  EXPECT_EQ(ran.load() + refused.load(), kThreads * kPerThread);
  EXPECT_EQ(ran_after.load(), 0);
  EXPECT_FALSE(h.alive());
}

// The message_test's TargetStoppedMidStream through a handle, then past the target's destruction: every
// send that succeeded was received or counted failed by the sender, and once the target is destroyed the
// handle refuses.
TEST_P(Handles, SendsToATargetStoppedMidStreamAreAccountedFor) {
  auto opts = options();
  opts.message_window = 16;
  auto group = std::make_unique<executor_group>(1, opts);
  executor& b = group->at(0);
  std::atomic<long> received{0};
  uring::spawn(b, uring::test::receive_then_stop(received, 1000));  // stops mid-stream
  executor a(options());
  executor_handle h = b.handle();
  long sent = a.run(uring::test::send_until_refused(&h));
  group->join();
  a.run([]() -> task<void> { co_await uring::nop(); }());  // reaps the target's settlement
  EXPECT_GE(sent, 1000);
  EXPECT_EQ(static_cast<long>(b.stats().raw_messages_received + a.stats().messages_failed), sent);
  group.reset();
  EXPECT_FALSE(h.alive());
  a.run([](executor_handle to) -> task<void> {
    EXPECT_EQ(uring::try_send(to, 1, 1).error(), std::error_code(ESHUTDOWN, std::system_category()));
    co_return;
  }(h));
}

// Sends through a handle while another thread destroys the target: the handle's lookup keeps the target
// alive for each send (TSan and ASan would see a use after free otherwise), and the stream ends with
// exactly one ESHUTDOWN.
TEST_P(Handles, SendsRacingTheTargetsDestructorEndWithEshutdown) {
  auto target = std::make_unique<executor_group>(1, options());
  const executor_handle h = target->at(0).handle();
  std::latch sending(1);
  std::promise<long> refused;
  executor_group senders(1, options());
  uring::spawn(senders.at(0),
               [](executor_handle to, std::latch& started, std::promise<long>& out) -> task<void> {
                 long failures = 0;
                 for (long i = 0; failures == 0; ++i) {
                   try {
                     co_await uring::send(to, 1, static_cast<std::uint64_t>(i));
                   } catch (const std::system_error& e) {
                     EXPECT_EQ(e.code().value(), ESHUTDOWN) << e.what();
                     ++failures;
                   }
                   if (i == 100) started.count_down();
                 }
                 out.set_value(failures);
               }(h, sending, refused));
  sending.wait();
  target.reset();
  EXPECT_EQ(refused.get_future().get(), 1);
}

INSTANTIATE_MESSAGING_BACKENDS(Handles);

}  // namespace
