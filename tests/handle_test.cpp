// executor_handle: posts, messages, spawn, resume_on and submit_to through a handle reach a live executor
// or fail with ESHUTDOWN, also when the executor is destroyed while other threads use the handle; none is
// lost or run twice, and a refused task, function or hop leaks nothing.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "hop_util.hpp"
#include "message_util.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::executor_group;
using uring::executor_handle;
using uring::inbox;
using uring::message;
using uring::task;

class Handles : public uring::test::backend_test {};

using uring::test::this_id;

int shutdown_errno(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::system_error& e) {
    return e.code().value();
  }
  return 0;
}

// Counts the coroutine frames it was moved into that were destroyed (passed by value as a coroutine
// parameter: the caller's moved-from copy counts nothing).
struct frame_count {
  std::atomic<int>* n;
  explicit frame_count(std::atomic<int>& c) : n(&c) {}
  frame_count(frame_count&& o) noexcept : n(std::exchange(o.n, nullptr)) {}
  frame_count& operator=(frame_count&&) = delete;
  ~frame_count() {
    if (n != nullptr) n->fetch_add(1);
  }
};

// What a coroutine saw after a hop: the executor and thread it ran on.
struct where {
  executor* ex = nullptr;
  std::thread::id thread;
};
[[gnu::noinline]] where here() { return {executor::current(), this_id()}; }

where where_is(executor& ex) {
  std::promise<where> p;
  ex.post([&] { p.set_value(here()); });
  return p.get_future().get();
}

// The ESHUTDOWN of a refused call through a handle names the call.
void expect_handle_refusal(const std::system_error& e, const char* call) {
  EXPECT_EQ(e.code().value(), ESHUTDOWN);
  EXPECT_NE(std::string(e.what()).find(call), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("gone or no longer accepts work"), std::string::npos) << e.what();
}

TEST_P(Handles, ADefaultHandleNamesNothing) {
  executor_handle none;
  EXPECT_FALSE(none.alive());
  EXPECT_EQ(shutdown_errno([&] { none.post([] {}); }), ESHUTDOWN);
  run([](executor_handle h) -> task<void> {
    EXPECT_EQ(uring::try_send(h, 1, 2), std::error_code(ESHUTDOWN, std::system_category()));
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
    EXPECT_EQ(uring::try_send(old, 1, 1), std::error_code(ESHUTDOWN, std::system_category()));
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
    EXPECT_EQ(uring::try_send(to, 1, 1), std::error_code(ESHUTDOWN, std::system_category()));
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

// --- spawn, resume_on and submit_to through a handle ----------------------------------------------------

TEST_P(Handles, ResumeOnMovesTheCoroutineToTheTargetsThread) {
  executor_group group(1, options());
  const where target = where_is(group.at(0));
  executor home(options());
  const std::thread::id home_thread = this_id();
  std::array<where, 3> seen{};
  home.run([](executor_handle to, std::array<where, 3>& out) -> task<void> {
    executor& self = *executor::current();
    co_await uring::resume_on(to);
    out[0] = here();
    co_await uring::nop();  // an operation on the target's ring
    out[1] = here();
    co_await uring::resume_on(self);
    out[2] = here();
  }(group.at(0).handle(), seen));
  EXPECT_EQ(seen[0].ex, target.ex);
  EXPECT_EQ(seen[0].thread, target.thread);
  EXPECT_EQ(seen[1].thread, target.thread);
  EXPECT_EQ(seen[2].ex, &home);
  EXPECT_EQ(seen[2].thread, home_thread);
  // Through a handle to the executor it already runs on, it does not suspend.
  home.run([](executor_handle self) -> task<void> {
    co_await uring::resume_on(self);
    EXPECT_EQ(executor::current()->handle(), self);
  }(home.handle()));
}

TEST_P(Handles, SubmitToRunsTheFunctionOnTheTargetAndComesBack) {
  executor_group group(1, options());
  const where target = where_is(group.at(0));
  executor home(options());
  home.run([](executor_handle to, where there, executor& self) -> task<void> {
    where ran{};
    int v = co_await uring::submit_to(to, [&ran] {
      ran = here();
      return 42;
    });
    EXPECT_EQ(v, 42);
    EXPECT_EQ(ran.ex, there.ex);
    EXPECT_EQ(ran.thread, there.thread);
    EXPECT_EQ(executor::current(), &self);
    // A function returning a task is awaited there; its exception comes back.
    int w = co_await uring::submit_to(to, [&ran]() -> task<int> {
      co_await uring::nop();
      ran = here();
      co_return 7;
    });
    EXPECT_EQ(w, 7);
    EXPECT_EQ(ran.thread, there.thread);
    bool threw = false;
    try {
      co_await uring::submit_to(to, [] { throw std::runtime_error("on the target"); });
    } catch (const std::runtime_error&) {
      threw = true;
    }
    EXPECT_TRUE(threw);
    EXPECT_EQ(executor::current(), &self);
  }(group.at(0).handle(), target, home));
}

task<void> record_where(frame_count, std::promise<where>& out) {
  out.set_value(here());
  co_return;
}

TEST_P(Handles, SpawnStartsTheTaskOnTheTarget) {
  executor_group group(1, options());
  const where target = where_is(group.at(0));
  std::atomic<int> frames{0};
  std::promise<where> from_thread;
  uring::spawn(group.at(0).handle(), record_where(frame_count(frames), from_thread));  // no executor here
  const where w = from_thread.get_future().get();
  EXPECT_EQ(w.ex, target.ex);
  EXPECT_EQ(w.thread, target.thread);
  // From a coroutine on another executor too, and onto the executor it runs on.
  std::promise<where> from_executor;
  std::promise<where> onto_self;
  executor home(options());
  home.run([](executor_handle to, std::atomic<int>& n, std::promise<where>& a,
              std::promise<where>& b) -> task<void> {
    uring::spawn(to, record_where(frame_count(n), a));
    uring::spawn(executor::current()->handle(), record_where(frame_count(n), b));
    co_await uring::nop();
  }(group.at(0).handle(), frames, from_executor, onto_self));
  EXPECT_EQ(from_executor.get_future().get().thread, target.thread);
  EXPECT_EQ(onto_self.get_future().get().ex, &home);
  group.stop();
  group.join();
  EXPECT_EQ(frames.load(), 3);
}

// A handle to an executor that was destroyed, and a default one: each call throws ESHUTDOWN naming
// itself, the awaiting coroutine continues on its own executor, and nothing the call was given is kept
// (the task's frame, the function) or run.
TEST_P(Handles, SpawnResumeOnAndSubmitToFailThroughADeadHandle) {
  executor_handle dead;
  {
    executor gone(options());
    dead = gone.handle();
  }
  for (const executor_handle& h : {dead, executor_handle{}}) {
    std::atomic<int> frames{0};
    std::promise<where> never;
    try {
      uring::spawn(h, record_where(frame_count(frames), never));
      ADD_FAILURE() << "spawn through a dead handle did not throw";
    } catch (const std::system_error& e) {
      expect_handle_refusal(e, "uring::spawn");
    }
    EXPECT_EQ(frames.load(), 1) << "the refused task's frame must be destroyed";

    auto token = std::make_shared<int>(0);
    executor home(options());
    home.run([](executor_handle to, std::shared_ptr<int> kept, executor& self) -> task<void> {
      try {
        co_await uring::resume_on(to);
        ADD_FAILURE() << "resume_on through a dead handle did not throw";
      } catch (const std::system_error& e) {
        expect_handle_refusal(e, "uring::resume_on");
      }
      EXPECT_EQ(executor::current(), &self);
      bool ran = false;
      try {
        // A named function, not a temporary in the co_await: g++ 12 destroys such a temporary twice when
        // the co_await throws (the shared_ptr's count went wrong; clang is fine).
        auto fn = [&ran, kept] { ran = true; };
        co_await uring::submit_to(to, std::move(fn));
        ADD_FAILURE() << "submit_to through a dead handle did not throw";
      } catch (const std::system_error& e) {
        expect_handle_refusal(e, "uring::submit_to");
      }
      EXPECT_FALSE(ran);
      EXPECT_EQ(executor::current(), &self);
      EXPECT_EQ(kept.use_count(), 2) << "the refused function must be destroyed with its submit_to";
    }(h, token, home));
    EXPECT_EQ(token.use_count(), 1);
  }
}

TEST_P(Handles, AHopTheTargetDroppedWhileShuttingDownComesBackWithEshutdown) {
  uring::test::expect_dropped_hop_comes_home(options(), [](executor& t) { return t.handle(); });
}

// Coroutines on two executors hop to a target through its handle and back while another thread destroys
// the target: each hop either continued on the target or threw ESHUTDOWN on the coroutine's own
// executor (also a hop the target accepted but dropped in its last drain: it travels back with the
// error), and none hangs or lands anywhere else.
struct hop_counts {
  std::atomic<long> attempts{0}, ran{0}, refused{0}, wrong{0};
};

task<void> hop_until_refused(executor& self, executor_handle to, const executor* target, bool by_submit,
                             hop_counts& c, std::latch& going, std::latch& done) {
  long ok = 0;
  long refused = 0;
  while (refused < 20) {
    c.attempts.fetch_add(1);
    try {
      if (by_submit) {
        co_await uring::submit_to(
            to, [&c, target] { (executor::current() == target ? c.ran : c.wrong).fetch_add(1); });
      } else {
        co_await uring::resume_on(to);
        (executor::current() == target ? c.ran : c.wrong).fetch_add(1);
        co_await uring::resume_on(self);
      }
      if (executor::current() != &self) c.wrong.fetch_add(1);
      if (++ok == 50) going.count_down();
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ESHUTDOWN) << e.what();
      if (executor::current() != &self) c.wrong.fetch_add(1);
      c.refused.fetch_add(1);
      ++refused;
      if (ok < 50) {
        ok = 50;  // refused before getting going: don't hold the destroyer up
        going.count_down();
      }
    }
  }
  done.count_down();
}

void hop_race(const uring::executor_options& opts, bool by_submit) {
  auto target = std::make_unique<executor_group>(1, opts);
  const executor* target_ex = &target->at(0);
  const executor_handle h = target->at(0).handle();
  executor_group homes(2, opts);
  hop_counts c;
  std::latch going(2);
  std::latch done(2);
  for (std::size_t i = 0; i < 2; ++i) {
    uring::spawn(homes.at(i), hop_until_refused(homes.at(i), h, target_ex, by_submit, c, going, done));
  }
  going.wait();
  target.reset();
  done.wait();
  EXPECT_EQ(c.ran.load() + c.refused.load(), c.attempts.load());
  EXPECT_EQ(c.wrong.load(), 0);
  EXPECT_GE(c.ran.load(), 100);
  EXPECT_EQ(c.refused.load(), 40);
}

TEST_P(Handles, ResumeOnRacingTheTargetsDestructorContinuesThereOrThrows) { hop_race(options(), false); }
TEST_P(Handles, SubmitToRacingTheTargetsDestructorRunsThereOrThrows) { hop_race(options(), true); }

// Four threads spawn through one handle while the target is destroyed: each task started on the target,
// or spawn threw ESHUTDOWN, or (accepted just before the target's last drain) the target destroyed it
// unstarted; every frame is destroyed exactly once, and none started anywhere else.
struct spawn_counts {
  std::atomic<int> attempts{0}, started{0}, refused{0}, wrong{0}, frames{0};
};

task<void> count_start(frame_count, const executor* target, spawn_counts& c, std::latch& going) {
  if (executor::current() != target) {
    c.wrong.fetch_add(1);
  } else if (c.started.fetch_add(1) == 99) {
    going.count_down();
  }
  co_return;
}

TEST_P(Handles, SpawnsRacingTheTargetsDestructorStartThereOrThrow) {
  constexpr int kThreads = 4;
  spawn_counts c;
  auto target = std::make_unique<executor_group>(1, options());
  const executor* target_ex = &target->at(0);
  const executor_handle h = target->at(0).handle();
  std::latch going(1);
  std::vector<std::thread> spawners;
  for (int t = 0; t < kThreads; ++t) {
    spawners.emplace_back([&] {
      for (int refused = 0; refused < 20;) {
        c.attempts.fetch_add(1);
        try {
          uring::spawn(h, count_start(frame_count(c.frames), target_ex, c, going));
        } catch (const std::system_error& e) {
          EXPECT_EQ(e.code().value(), ESHUTDOWN);
          c.refused.fetch_add(1);
          ++refused;
        }
      }
    });
  }
  going.wait();  // 100 tasks started on the target
  target.reset();
  for (auto& s : spawners) s.join();
  EXPECT_EQ(c.frames.load(), c.attempts.load()) << "every frame destroyed once: none leaked";
  EXPECT_EQ(c.wrong.load(), 0);
  EXPECT_LE(c.started.load() + c.refused.load(), c.attempts.load());
  EXPECT_EQ(c.refused.load(), kThreads * 20);
}

INSTANTIATE_MESSAGING_BACKENDS(Handles);

}  // namespace
