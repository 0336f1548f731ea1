// Eventfd registration as an awaitable (register, signals, async-only, toggle, the one slot, bad fds,
// registration from another executor) and uring::event in both modes, across threads and processes.
// Every backend.
#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "eventfd_count.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::event;
using uring::event_mode;
using uring::eventfd_options;
using uring::eventfd_registration;
using uring::executor;
using uring::task;
using uring::test::take;
using uring::test::take_signalled;
using uring::test::unique_fd;

class Eventfd : public uring::test::backend_test {};

unique_fd make_eventfd() { return unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

template <class F>
void expect_system_error(F&& f, int code, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected errno " << code;
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST_P(Eventfd, CompletionsSignalUntilUnregistered) {
  auto efd = make_eventfd();
  run([](int fd) -> task<void> {
    executor& ex = *executor::current();
    auto reg = co_await ex.register_eventfd(fd);
    EXPECT_TRUE(reg.active());
    EXPECT_EQ(reg.fd(), fd);
    take(fd);
    co_await uring::nop();
    EXPECT_GE(take_signalled(fd), 1u) << "a completion did not signal the registered eventfd";
    co_await reg.unregister();
    EXPECT_FALSE(reg.active());
    take(fd);
    co_await uring::nop();
    co_await uring::sleep_for(1ms);
    EXPECT_EQ(take(fd), 0u) << "signalled after unregistering";
    // The slot is free again, and the handle's destructor unregisters.
    {
      auto again = co_await ex.register_eventfd(fd);
      EXPECT_TRUE(again.active());
    }
    auto third = co_await ex.register_eventfd(fd);
    EXPECT_TRUE(third.active());
  }(efd.get()));
}

// Async-only counts only what the kernel finished in an io-wq worker: fsync yes; nop, timers and
// readiness-driven reads no. The emulation classifies its completions the same way.
TEST_P(Eventfd, AsyncOnlySignalsOnlyWorkerCompletions) {
  auto efd = make_eventfd();
  auto file = uring::test::temp_file();
  uring::test::pipe_pair pipe;
  run([](int fd, int file_fd, int rd, int wr) -> task<void> {
    auto reg = co_await executor::current()->register_eventfd(fd, eventfd_options{.async_only = true});
    EXPECT_TRUE(reg.async_only());
    take(fd);
    co_await uring::nop();
    co_await uring::sleep_for(1ms);
    char c = 'x';
    (void)!::write(wr, &c, 1);
    char got = 0;
    co_await uring::read(rd, uring::mutable_buffer(&got, 1));
    EXPECT_EQ(take(fd), 0u) << "an inline or readiness completion signalled an async-only eventfd";
    co_await uring::fsync(file_fd);
    EXPECT_GE(take_signalled(fd), 1u) << "fsync (an io-wq completion) did not signal";
  }(efd.get(), file.get(), pipe.read_end.get(), pipe.write_end.get()));
}

TEST_P(Eventfd, EnableTogglesSignals) {
  auto efd = make_eventfd();
  run([](int fd) -> task<void> {
    auto reg = co_await executor::current()->register_eventfd(fd);
    co_await reg.enable(false);
    take(fd);
    co_await uring::nop();
    EXPECT_EQ(take(fd), 0u) << "signalled while disabled";
    co_await reg.enable(true);
    co_await uring::nop();
    EXPECT_GE(take_signalled(fd), 1u) << "not signalled after enabling again";
    co_await reg.unregister();
    bool threw = false;
    try {
      co_await reg.enable(true);
    } catch (const std::system_error& e) {
      threw = e.code().value() == ENXIO;
    }
    EXPECT_TRUE(threw) << "enable on an unregistered handle must fail with ENXIO";
  }(efd.get()));
}

TEST_P(Eventfd, OneSlotSecondRegistrationIsBusyAndNamesTheHolder) {
  auto a = make_eventfd();
  auto b = make_eventfd();
  executor ex(options());
  ex.run([](int fa, int fb) -> task<void> {
    executor& ex = *executor::current();
    auto reg = co_await ex.register_eventfd(fa);
    std::string held_by = "a registration of eventfd " + std::to_string(fa);
    bool busy = false;
    try {
      (void)co_await ex.register_eventfd(fb);
    } catch (const std::system_error& e) {
      busy = e.code().value() == EBUSY && std::string(e.what()).find(held_by) != std::string::npos;
      EXPECT_TRUE(busy) << e.what();
    }
    EXPECT_TRUE(busy);
    expect_system_error([&] { ex.notify_fd(); }, EBUSY, held_by);
    // The failed attempts changed nothing: the first registration still signals.
    take(fa);
    co_await uring::nop();
    EXPECT_GE(take_signalled(fa), 1u);
  }(a.get(), b.get()));
  // notify_fd holds the slot for good; a registration then names it.
  ex.notify_fd();
  ex.run([](int fa) -> task<void> {
    bool busy = false;
    try {
      (void)co_await executor::current()->register_eventfd(fa);
    } catch (const std::system_error& e) {
      busy = e.code().value() == EBUSY && std::string(e.what()).find("notify_fd()") != std::string::npos;
      EXPECT_TRUE(busy) << e.what();
    }
    EXPECT_TRUE(busy);
  }(a.get()));
}

TEST_P(Eventfd, BadDescriptorsFailClearly) {
  uring::test::pipe_pair pipe;
  executor ex(options());
  int closed = ::eventfd(0, EFD_CLOEXEC);  // closed after the executor made its own fds: not reused
  ::close(closed);
  auto registered = [](executor& ex, int fd) -> task<eventfd_registration> {
    co_return co_await ex.register_eventfd(fd);
  };
  auto attempt = [&](int fd) { (void)ex.run(registered(ex, fd)); };
  expect_system_error([&] { attempt(-1); }, EBADF, "not an open file descriptor");
  expect_system_error([&] { attempt(closed); }, EBADF, "not an open file descriptor");
  expect_system_error([&] { attempt(pipe.read_end.get()); }, EINVAL, "not an eventfd");
  // None of them took the slot.
  auto good = make_eventfd();
  auto reg = ex.run(registered(ex, good.get()));
  EXPECT_TRUE(reg.active());
}

// Registered from a coroutine on executor A onto executor B: B's completions signal, A's do not; the
// handle's destructor on A's thread unregisters on B.
task<void> register_and_set(executor& ex, int fd, std::promise<bool>& done) {
  try {
    auto reg = co_await ex.register_eventfd(fd);
    done.set_value(reg.active());
  } catch (...) {
    done.set_value(false);
  }
}

TEST_P(Eventfd, RegistersFromAnotherExecutor) {
  auto efd = make_eventfd();
  uring::executor_group group(1, options());
  executor& b = group.at(0);
  executor a(options());
  auto reg = a.run([](executor& b, int fd) -> task<eventfd_registration> {
    auto reg = co_await b.register_eventfd(fd);
    EXPECT_EQ(reg.owner(), &b);
    // B is held inside a posted function while A works: whatever B's own last turns signalled (its
    // wake-up for the registration, say) has happened by then, and nothing of B's can signal meanwhile.
    std::promise<void> held, release;
    b.post([&held, done = release.get_future()] {
      held.set_value();
      done.wait();
    });
    held.get_future().wait();
    take(fd);
    co_await uring::nop();  // on A
    co_await uring::sleep_for(1ms);
    EXPECT_EQ(take(fd), 0u) << "A's completions signalled B's eventfd";
    release.set_value();
    co_await uring::submit_to(b, []() -> task<void> { co_await uring::nop(); });  // a completion on B
    EXPECT_GE(take_signalled(fd), 1u) << "B's completion did not signal";
    co_return reg;
  }(b, efd.get()));
  ASSERT_TRUE(reg.active());
  reg = eventfd_registration();  // destroyed off B's thread: unregistered by a post to B
  // A later post runs after it (one mailbox, in order): the slot is free there.
  std::promise<bool> registered;
  b.post([&] { uring::spawn(register_and_set(b, efd.get(), registered)); });
  EXPECT_TRUE(registered.get_future().get());
}

TEST_P(Eventfd, ReRegisteringRightAfterAnOffThreadDestructionFindsTheSlotFree) {
  auto efd = make_eventfd();
  uring::executor_group group(1, options());
  executor& owner = group.at(0);
  const int tries = static_cast<int>(uring::test::scaled(200)) + 1;
  int failures = run([](executor& owner, int fd, int tries) -> task<int> {
    int failed = 0;
    for (int i = 0; i < tries; ++i) {
      try {
        auto reg = co_await owner.register_eventfd(fd);
        reg = eventfd_registration();  // destroyed here, off the owner's thread: a post to the owner
        auto again = co_await owner.register_eventfd(fd);  // a hop that may overtake that post
      } catch (const std::system_error& e) {
        ADD_FAILURE() << "try " << i << ": " << e.what();
        ++failed;
      }
    }
    co_return failed;
  }(owner, efd.get(), tries));
  EXPECT_EQ(failures, 0);
}

TEST_P(Eventfd, UnregisterActsWhenAwaitedNotWhenCalled) {
  auto efd = make_eventfd();
  run([](int fd) -> task<void> {
    auto reg = co_await executor::current()->register_eventfd(fd);
    {
      [[maybe_unused]] auto pending = reg.unregister();  // made, never awaited
    }
    EXPECT_TRUE(reg.active()) << "a call that was not awaited gave up the slot";
    co_await reg.unregister();
    EXPECT_FALSE(reg.active());
    auto again = co_await executor::current()->register_eventfd(fd);  // the slot is free
    EXPECT_TRUE(again.active());
  }(efd.get()));
}

// --- uring::event ----------------------------------------------------------------------------------------

TEST_P(Eventfd, AutoResetCountsAccumulate) {
  run([]() -> task<void> {
    event ev(event_mode::auto_reset);
    ev.notify(3);
    for (int i = 0; i < 3; ++i) co_await ev.wait();
    auto r = co_await uring::with_timeout(ev.wait(), 20ms).nothrow();
    EXPECT_EQ(r.error(), std::errc::timed_out) << "a fourth wait took a count that was never given";
    ev.notify();
    co_await ev.wait();  // the timed-out wait took nothing: this count is still there
    EXPECT_THROW(ev.reset(), std::logic_error);
  }());
}

TEST_P(Eventfd, ManualResetReleasesEveryWaiterUntilReset) {
  run([]() -> task<void> {
    event gate(event_mode::manual_reset);
    std::atomic<int> passed{0};
    auto waiter = [](event& g, std::atomic<int>& n) -> task<void> {
      co_await g.wait();
      ++n;
    };
    for (int i = 0; i < 5; ++i) uring::spawn(waiter(gate, passed));
    co_await uring::sleep_for(1ms);
    EXPECT_EQ(passed.load(), 0);
    gate.notify();
    gate.notify();  // opening an open gate changes nothing
    while (passed.load() < 5) co_await uring::nop();
    co_await gate.wait();  // still open
    gate.reset();
    auto r = co_await uring::with_timeout(gate.wait(), 20ms).nothrow();
    EXPECT_EQ(r.error(), std::errc::timed_out);
    gate.reset();  // resetting a closed gate does not block
  }());
}

// Waiters on two executors and the test's own, notified from a plain thread: every notify releases
// exactly one wait (none lost: all finish; none doubled: a last wait times out).
task<void> take_counts(event& ev, long n, std::atomic<long>& total) {
  for (long i = 0; i < n; ++i) {
    co_await ev.wait();
    total.fetch_add(1, std::memory_order_relaxed);
  }
}

TEST_P(Eventfd, AutoResetAcrossThreadsLosesAndDoublesNothing) {
  const long per = uring::test::scaled(50'000);
  event ev(event_mode::auto_reset);
  std::atomic<long> total{0};
  uring::executor_group group(2, options());
  std::thread notifier([&] {
    for (long i = 0; i < 2 * per; ++i) ev.notify();
  });
  std::promise<void> a_done, b_done;
  auto run_and_signal = [](event& ev, long n, std::atomic<long>& total,
                           std::promise<void>& done) -> task<void> {
    co_await take_counts(ev, n, total);
    done.set_value();
  };
  uring::spawn(group.at(0), run_and_signal(ev, per, total, a_done));
  uring::spawn(group.at(1), run_and_signal(ev, per, total, b_done));
  a_done.get_future().get();
  b_done.get_future().get();
  notifier.join();
  EXPECT_EQ(total.load(), 2 * per);
  run([](event& ev) -> task<void> {
    auto r = co_await uring::with_timeout(ev.wait(), 20ms).nothrow();
    EXPECT_EQ(r.error(), std::errc::timed_out) << "a count was delivered twice or notified too often";
  }(ev));
}

// Two gates, ping-pong between executors: each cycle is a notify on one thread waking a wait on another.
task<void> ping(event& mine, event& theirs, long cycles, bool first) {
  for (long i = 0; i < cycles; ++i) {
    if (first) theirs.notify();
    co_await mine.wait();
    mine.reset();
    if (!first) theirs.notify();
  }
}

TEST_P(Eventfd, ManualResetPingPongAcrossThreads) {
  const long cycles = uring::test::scaled(50'000);
  event a(event_mode::manual_reset), b(event_mode::manual_reset);
  uring::executor_group group(1, options());
  std::promise<void> done;
  uring::spawn(group.at(0), [](event& a, event& b, long n, std::promise<void>& d) -> task<void> {
    co_await ping(b, a, n, false);
    d.set_value();
  }(a, b, cycles, done));
  run(ping(a, b, cycles, true));
  done.get_future().get();
}

TEST_P(Eventfd, NotifiedByAnotherProcess) {
  event ev(event_mode::auto_reset);
  pid_t child = ::fork();
  if (child == 0) {
    ev.notify(2);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  run([](event& ev) -> task<void> {
    co_await ev.wait();
    co_await ev.wait();
  }(ev));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Event, AdoptChecksTheDescriptor) {
  uring::test::pipe_pair pipe;
  expect_system_error([&] { (void)event::adopt(pipe.read_end.get(), event_mode::auto_reset); }, EINVAL,
                      "not an eventfd");
  unique_fd plain(::eventfd(0, EFD_CLOEXEC));
  expect_system_error([&] { (void)event::adopt(plain.get(), event_mode::auto_reset); }, EINVAL,
                      "EFD_SEMAPHORE");
  expect_system_error([&] { (void)event::adopt(plain.get(), event_mode::manual_reset); }, EINVAL,
                      "non-blocking");
  int sem = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  event ev = event::adopt(sem, event_mode::auto_reset);
  EXPECT_EQ(ev.native_handle(), sem);
  ev.notify(2);
  std::uint64_t v = 0;
  ASSERT_EQ(::read(sem, &v, sizeof v), 8);
  EXPECT_EQ(v, 1u);  // a semaphore read takes one count
}

INSTANTIATE_BACKENDS(Eventfd);

}  // namespace
