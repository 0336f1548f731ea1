// spawn, resume_on and submit_to through an executor_handle: they reach a live executor or fail with
// ESHUTDOWN, also when the target is destroyed while they race it; a refused task, function or hop leaks
// nothing and none lands anywhere else.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
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
#include "handle_fixture.hpp"
#include "hop_util.hpp"
#include "test_util.hpp"

namespace {

using uring::executor;
using uring::executor_group;
using uring::executor_handle;
using uring::task;
using uring::test::Handles;
using uring::test::this_id;

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
