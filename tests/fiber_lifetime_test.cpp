// How fibers end and what they stand on (uring::fiber): shutdown unwinds suspended fibers and frees their
// stacks, a fiber that never started is cancelled for its joiner, the stack size, misuse outside a fiber,
// and the guard page. Behaviour tests run on every backend.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <uring/fiber.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "fiber_fixture.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::fiber_handle;
using uring::spawn_fiber;
using uring::task;
using uring::test::pipe_pair;
namespace this_fiber = uring::this_fiber;
using uring::test::Fiber;
using uring::test::sentinel;

TEST_P(Fiber, StopUnwindsSuspendedFibersAndFreesTheirStacks) {
  const std::size_t stacks_before = uring::fiber_stacks_in_use();
  std::atomic<int> unwound{0};
  std::atomic<int> joiner_saw{0};
  pipe_pair p;  // never written: readers wait until the executor stops
  uring::executor_group joiners(1, options());
  {
    executor ex(options());
    ex.run([](executor& self, int rd, std::atomic<int>& count, std::atomic<int>& saw, executor& far,
              std::size_t base) -> task<void> {
      for (int i = 0; i < 8; ++i) {
        spawn_fiber(self, [rd, &count] {
          sentinel s{count};
          char b[1];
          this_fiber::await(uring::read(rd, b));
          ADD_FAILURE() << "the read completed";
        }).detach();
      }
      for (int i = 0; i < 4; ++i) {
        spawn_fiber(self, [&count] {
          sentinel s{count};
          std::vector<int> heap(1000, 7);  // freed by the unwinding (ASan's leak check sees it otherwise)
          this_fiber::sleep_for(1h);
        }).detach();
      }
      // A fiber joined from another executor's thread: its joiner learns that it was unwound.
      auto watched = spawn_fiber(self, [&count] {
        sentinel s{count};
        this_fiber::sleep_for(1h);
      });
      uring::spawn(far, [](fiber_handle<void> h, std::atomic<int>& out) -> task<void> {
        try {
          co_await h.join();
          out = 1;
        } catch (const std::system_error& e) {
          out = e.code() == std::errc::operation_canceled ? 2 : 3;
        }
        out.notify_all();
      }(std::move(watched), saw));
      co_await uring::nop();
      co_await uring::nop();
      EXPECT_EQ(uring::fiber_stacks_in_use() - base, 13u);
      self.stop();
      co_await uring::nop();
    }(ex, p.read_end.get(), unwound, joiner_saw, joiners.at(0), stacks_before));
    EXPECT_EQ(unwound, 13);
    EXPECT_EQ(uring::fiber_stacks_in_use(), stacks_before);
  }
  // The joiner on the other thread was woken with ECANCELED.
  joiner_saw.wait(0);
  EXPECT_EQ(joiner_saw, 2);
}

TEST_P(Fiber, GroupStopUnwindsAFiberParkedAfterMigrating) {
  const std::size_t stacks_before = uring::fiber_stacks_in_use();
  std::atomic<int> unwound{0};
  {
    uring::executor_group group(2, options());
    std::latch moved(1);
    // Spawned on executor 0, parked on executor 1's ring: the two-phase stop drains 1 before 0 frees
    // (and unwinds) the fiber it owns.
    spawn_fiber(group.at(0), [&unwound, &moved, &to = group.at(1)] {
      sentinel s{unwound};
      this_fiber::await(uring::resume_on(to));
      moved.count_down();
      this_fiber::sleep_for(1h);
    }).detach();
    moved.wait();
    group.stop();
    group.join();
    EXPECT_EQ(unwound, 1);
  }
  EXPECT_EQ(uring::fiber_stacks_in_use(), stacks_before);
}

TEST_P(Fiber, AFiberThatNeverStartedIsCancelledForItsJoiner) {
  const std::size_t stacks_before = uring::fiber_stacks_in_use();
  std::optional<fiber_handle<int>> h;
  {
    executor never_run(options());
    h.emplace(spawn_fiber(never_run, [] {
      ADD_FAILURE() << "started";
      return 0;
    }));
  }
  EXPECT_TRUE(h->done());
  EXPECT_EQ(uring::fiber_stacks_in_use(), stacks_before);
  int code = run([](fiber_handle<int>& f) -> task<int> {
    try {
      (void)co_await f.join();
    } catch (const std::system_error& e) {
      co_return e.code().value();
    }
    co_return 0;
  }(*h));
  EXPECT_EQ(code, ECANCELED);
}

TEST_P(Fiber, StackSizeIsConfigurable) {
  std::size_t touched = run([]() -> task<std::size_t> {
    auto h = spawn_fiber(*executor::current(),
                         [] {
                           // Half a megabyte of locals: far beyond the default stack, within this one.
                           volatile char big[512 * 1024];
                           big[0] = 1;
                           big[sizeof big - 1] = 2;
                           this_fiber::await(uring::nop());
                           return static_cast<std::size_t>(big[0] + big[sizeof big - 1]);
                         },
                         {.stack_size = 1024 * 1024});
    co_return co_await h.join();
  }());
  EXPECT_EQ(touched, 3u);
}

INSTANTIATE_BACKENDS(Fiber);

TEST(FiberMisuse, ThisFiberOutsideAFiberIsALogicError) {
  EXPECT_FALSE(this_fiber::in_fiber());
  try {
    this_fiber::await(uring::nop());
    ADD_FAILURE() << "await outside a fiber did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("uring::this_fiber::await: not called from a fiber"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(this_fiber::yield(), std::logic_error);
  EXPECT_THROW(this_fiber::sleep_for(1ms), std::logic_error);
  // From a coroutine on an executor: still not a fiber.
  executor ex;
  ex.run([]() -> task<void> {
    EXPECT_FALSE(this_fiber::in_fiber());
    EXPECT_THROW(this_fiber::await(uring::nop()), std::logic_error);
    // Nor is a task that a fiber awaits: it runs on the driver, outside the fiber's stack.
    auto h = spawn_fiber(*executor::current(), [] {
      EXPECT_TRUE(this_fiber::in_fiber());
      return this_fiber::await([]() -> task<bool> {
        co_await uring::nop();
        co_return this_fiber::in_fiber();
      }());
    });
    EXPECT_FALSE(co_await h.join());
    // An empty handle cannot be joined.
    fiber_handle<int> empty;
    EXPECT_THROW((void)empty.join(), std::logic_error);
  }());
}

// The guard page: a fiber that recurses past its stack faults at the page below it (checked in a child
// process, whose SIGSEGV handler runs on an alternate stack and reports where the fault was).
constexpr std::size_t kSmallStack = 64 * 1024;
std::atomic<std::uintptr_t> g_stack_top{0};

void on_segv(int, siginfo_t* info, void*) {
  auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  std::uintptr_t top = g_stack_top.load();
  const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // The guard page lies kSmallStack below the top of the usable stack (a little above the fiber's
  // first local, which sits under Boost's record and the first frames).
  const std::uintptr_t guard_low = top - kSmallStack - page;
  const std::uintptr_t guard_high = top - kSmallStack + 4 * page;
  const char* msg =
      addr >= guard_low && addr < guard_high ? "fault in the guard page\n" : "fault elsewhere\n";
  (void)!::write(2, msg, std::char_traits<char>::length(msg));
  ::_exit(addr >= guard_low && addr < guard_high ? 42 : 43);
}

volatile bool g_keep_going =
    true;  // the recursion ends only in the guard page, but the compiler must not know

[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[256];
  frame[0] = static_cast<char>(depth);
  if (!g_keep_going) return frame[0];
  return recurse(depth + 1) + frame[0];
}

void overflow_a_fiber() {
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigaction(SIGSEGV, &sa, nullptr);
  executor ex;
  ex.run([]() -> task<void> {
    auto h = spawn_fiber(*executor::current(),
                         [] {
                           volatile char top = 0;
                           g_stack_top = reinterpret_cast<std::uintptr_t>(&top);
                           return recurse(top);
                         },
                         {.stack_size = kSmallStack});
    (void)co_await h.join();
  }());
  ::_exit(1);  // not reached: the recursion never ends
}

TEST(FiberGuardPage, OverflowFaultsAtOnceInTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(overflow_a_fiber(), ::testing::ExitedWithCode(42), "fault in the guard page");
}

}  // namespace
