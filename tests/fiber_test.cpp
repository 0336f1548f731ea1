// Stackful fibers (uring::fiber): every kind of awaitable awaited from a fiber, results and exceptions
// through join, stop tokens, 10'000 fibers doing I/O at once, and fairness with coroutines, on every
// backend.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
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
using uring::test::unique_fd;
namespace this_fiber = uring::this_fiber;
using uring::test::Fiber;
using uring::test::this_id;

struct socket_pair {
  unique_fd a, b;
  socket_pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
      throw std::system_error(errno, std::system_category(), "socketpair");
    }
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

TEST_P(Fiber, ReturnsItsValueThroughJoin) {
  int got = run([]() -> task<int> {
    auto h = spawn_fiber(*executor::current(), [] { return 6 * 7; });
    co_return co_await h.join();
  }());
  EXPECT_EQ(got, 42);
}

TEST_P(Fiber, AwaitsOperations) {
  pipe_pair p;
  socket_pair s;
  std::string got = run([](int rd, int wr, int sa, int sb) -> task<std::string> {
    auto h = spawn_fiber(*executor::current(), [=] {
      std::string out;
      this_fiber::await(uring::nop());
      EXPECT_TRUE(this_fiber::await(uring::nop().nothrow()).ok());
      // Pipe: write, then read back.
      std::size_t w = this_fiber::await(uring::write(wr, std::string_view("pipe")));
      EXPECT_EQ(w, 4u);
      char buf[16];
      std::size_t n = this_fiber::await(uring::read(rd, buf));
      out.append(buf, n);
      // Socket: poll for readability (nothing there yet: the peer writes after a sleep), then read.
      auto writer = spawn_fiber(*executor::current(), [sb] {
        this_fiber::sleep_for(2ms);
        this_fiber::await(uring::write(sb, std::string_view("|sock")));
      });
      unsigned ev = this_fiber::await(uring::poll(sa, POLLIN));
      EXPECT_TRUE(ev & POLLIN);
      n = this_fiber::await(uring::read(sa, buf));
      out.append(buf, n);
      this_fiber::join(writer);
      // Errors throw std::system_error naming the operation, as in a coroutine.
      try {
        this_fiber::await(uring::read(-1, buf));
        ADD_FAILURE() << "read(-1) did not throw";
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::bad_file_descriptor);
        EXPECT_EQ(std::string(e.what()).rfind("read: ", 0), 0u) << e.what();
      }
      EXPECT_EQ(this_fiber::await(uring::read(-1, buf).nothrow()).res, -EBADF);
      // A linked timeout, and a sleep.
      try {
        this_fiber::await(uring::with_timeout(uring::read(rd, buf), 1ms));
        ADD_FAILURE() << "the read on an empty pipe did not time out";
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::timed_out);
      }
      auto t0 = std::chrono::steady_clock::now();
      this_fiber::sleep_for(3ms);
      EXPECT_GE(std::chrono::steady_clock::now() - t0, 3ms);
      return out;
    });
    co_return co_await h.join();
  }(p.read_end.get(), p.write_end.get(), s.a.get(), s.b.get()));
  EXPECT_EQ(got, "pipe|sock");
}

TEST_P(Fiber, AwaitsTasksChannelsMutexesAndSemaphores) {
  int sum = run([]() -> task<int> {
    executor& ex = *executor::current();
    uring::channel<int> to_fiber(ex, 1);
    uring::channel<int> from_fiber(ex, 1);
    uring::async_mutex m;
    uring::async_semaphore sem(0, 1);
    auto h = spawn_fiber(ex, [&] {
      int total = 0;
      // A task: runs on the driver, the fiber waits for its value.
      total += this_fiber::await([]() -> task<int> {
        co_await uring::nop();
        co_return 1;
      }());
      // Channel receive (the coroutine sends later) and send (into a full channel: waits for space).
      total += *this_fiber::await(to_fiber.receive());
      this_fiber::await(from_fiber.send(100));
      this_fiber::await(from_fiber.send(1000));
      // A mutex the coroutine holds, and a semaphore it releases.
      auto guard = this_fiber::await(m.lock());
      total += 10000;
      this_fiber::await(sem.acquire());
      return total;
    });
    auto lock = co_await m.lock();  // before the fiber asks for it
    co_await uring::nop();
    co_await to_fiber.send(10);
    int a = *co_await from_fiber.receive();
    int b = *co_await from_fiber.receive();
    EXPECT_EQ(a + b, 1100);
    lock.unlock();
    co_await uring::nop();
    EXPECT_FALSE(h.done());  // waiting on the semaphore
    sem.release();
    co_return co_await h.join() + a + b;
  }());
  EXPECT_EQ(sum, 1 + 10 + 10000 + 1100);
}

// Events (notified from another thread), raw messages and eventfd registration, from a fiber.
TEST_P(Fiber, AwaitsEventsMessagesAndEventfdRegistration) {
  uring::event ev;
  std::thread notifier;
  int got = run([](uring::event& ev, std::thread& notifier) -> task<int> {
    executor& ex = *executor::current();
    auto h = spawn_fiber(ex, [&] {
      notifier = std::thread([&ev] { ev.notify(2); });
      this_fiber::await(ev.wait());
      this_fiber::await(ev.wait());
      this_fiber::await(uring::send(ex, 5, 55));
      uring::message m = this_fiber::await(uring::inbox(ex).receive());
      uring::test::unique_fd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
      auto reg = this_fiber::await(ex.register_eventfd(efd.get()));
      this_fiber::await(uring::nop());
      std::uint64_t signals = 0;
      EXPECT_EQ(::read(efd.get(), &signals, sizeof signals), 8);
      this_fiber::await(reg.unregister());
      return m.value + static_cast<int>(m.data);
    });
    co_return co_await h.join();
  }(ev, notifier));
  notifier.join();
  EXPECT_EQ(got, 60);
}

TEST_P(Fiber, AwaitsFileOperationsAndCombinators) {
  auto [size, first, closed] = run([]() -> task<std::tuple<long, std::size_t, bool>> {
    auto h = spawn_fiber(*executor::current(), [] {
      // Payload-carrying operations (a path, a struct statx) from a fiber's stack.
      int fd = this_fiber::await(uring::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
      this_fiber::await(uring::write_at(fd, std::string_view("twelve bytes"), 0));
      this_fiber::await(uring::fsync(fd));
      auto st = this_fiber::await(uring::stat("/proc/self/fd/" + std::to_string(fd)));
      // when_all and when_any over tasks.
      auto nap = [](int ms) -> task<int> {
        co_await uring::sleep_for(std::chrono::milliseconds(ms));
        co_return ms;
      };
      auto [a, b] = this_fiber::await(uring::when_all(nap(1), nap(2)));
      auto won = this_fiber::await(uring::when_any(nap(1), nap(1000)));
      this_fiber::await(uring::close(fd));
      return std::tuple{static_cast<long>(st.stx_size), static_cast<std::size_t>(a + b) + won.index(),
                        ::fcntl(fd, F_GETFD) == -1};
    });
    co_return co_await h.join();
  }());
  EXPECT_EQ(size, 12);
  EXPECT_EQ(first, 3u);  // 1 + 2, and the first nap won (index 0)
  EXPECT_TRUE(closed);
}

TEST_P(Fiber, MovesWithResumeOnAndUsesSubmitTo) {
  uring::executor_group group(1, options());
  executor& other = group.at(0);
  auto [moved, back, value] = run([](executor& away) -> task<std::tuple<bool, bool, int>> {
    executor& home = *executor::current();
    auto h = spawn_fiber(home, [&home, &away] {
      std::thread::id start = this_id();
      this_fiber::await(uring::resume_on(away));
      bool went = this_id() != start && executor::current() == &away;
      this_fiber::await(uring::nop());  // on away's ring
      int v = this_fiber::await(uring::submit_to(home, [] { return 5; }));
      this_fiber::await(uring::resume_on(home));
      bool returned = this_id() == start && executor::current() == &home;
      v += this_fiber::await(uring::submit_to(away, []() -> task<int> {
        co_await uring::nop();
        co_return 2;
      }));
      return std::tuple{went, returned, v};
    });
    co_return co_await h.join();
  }(other));
  EXPECT_TRUE(moved);
  EXPECT_TRUE(back);
  EXPECT_EQ(value, 7);
}

TEST_P(Fiber, JoinsAcrossThreadsAndFromFibers) {
  uring::executor_group group(1, options());
  executor& other = group.at(0);
  // Spawned from this thread onto another executor, joined from a coroutine here.
  auto far = spawn_fiber(other, [] {
    this_fiber::await(uring::nop());
    return std::this_thread::get_id();
  });
  auto [far_id, chained] = run([](fiber_handle<std::thread::id>& f) -> task<std::pair<std::thread::id, int>> {
    executor& ex = *executor::current();
    std::thread::id id = co_await f.join();
    // A fiber joining fibers.
    auto inner = spawn_fiber(ex, [] {
      this_fiber::yield();
      return 20;
    });
    auto outer = spawn_fiber(ex, [&inner] { return this_fiber::join(inner) + 1; });
    co_return std::pair{id, co_await outer.join()};
  }(far));
  EXPECT_NE(far_id, std::this_thread::get_id());
  EXPECT_EQ(chained, 21);
}

TEST_P(Fiber, ExceptionsCrossJoin) {
  run([]() -> task<void> {
    executor& ex = *executor::current();
    auto thrower = spawn_fiber(ex, []() -> int {
      this_fiber::await(uring::nop());
      throw std::runtime_error("from the fiber");
    });
    try {
      (void)co_await thrower.join();
      ADD_FAILURE() << "join did not rethrow";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "from the fiber");
    }
    // A second join is a logic error.
    EXPECT_THROW((void)co_await thrower.join(), std::logic_error);
    // From fiber to fiber, and an error of an operation that the fiber does not catch.
    auto failing = spawn_fiber(ex, [] {
      char b[1];
      this_fiber::await(uring::read(-1, b));
    });
    auto joiner = spawn_fiber(ex, [&failing] {
      try {
        this_fiber::join(failing);
      } catch (const std::system_error& e) {
        return e.code() == std::errc::bad_file_descriptor;
      }
      return false;
    });
    EXPECT_TRUE(co_await joiner.join());
  }());
}

TEST_P(Fiber, DetachedFiberExceptionStopsTheExecutor) {
  executor ex(options());
  EXPECT_THROW(ex.run([](executor& self) -> task<void> {
    spawn_fiber(self, [] {
      this_fiber::await(uring::nop());
      throw std::runtime_error("nobody joins me");
    }).detach();
    co_await uring::sleep_for(1h);
  }(ex)),
               std::runtime_error);
}

TEST_P(Fiber, StopTokenCancelsTheFibersOperations) {
  pipe_pair p;
  std::stop_source stop;
  bool cancelled = run([](int rd, std::stop_source& src) -> task<bool> {
    executor& ex = *executor::current();
    auto h = spawn_fiber(ex,
                         [rd] {
                           char b[1];
                           try {
                             this_fiber::await(uring::read(rd, b));
                           } catch (const std::system_error& e) {
                             return e.code() == std::errc::operation_canceled;
                           }
                           return false;
                         },
                         {.stop_token = src.get_token()});
    co_await uring::nop();
    co_await uring::nop();
    src.request_stop();
    co_return co_await h.join();
  }(p.read_end.get(), stop));
  EXPECT_TRUE(cancelled);
}

TEST_P(Fiber, TenThousandFibersDoingIoAtOnce) {
  const long n = uring::test::scaled(10000);
  const std::size_t stacks_before = uring::fiber_stacks_in_use();
  pipe_pair go, out;
  long echoed =
      run([](long count, int go_rd, int go_wr, int out_rd, int out_wr, std::size_t base) -> task<long> {
        executor& ex = *executor::current();
        long parked = 0;
        std::vector<fiber_handle<bool>> fibers;
        fibers.reserve(static_cast<std::size_t>(count));
        for (long i = 0; i < count; ++i) {
          fibers.push_back(spawn_fiber(ex, [&parked, go_rd, out_wr] {
            ++parked;
            unsigned ev = this_fiber::await(uring::poll(go_rd, POLLIN));  // all of them wait at once
            this_fiber::await(uring::nop());
            return (ev & POLLIN) != 0 && this_fiber::await(uring::write(out_wr, std::string_view("x"))) == 1;
          }));
        }
        while (parked < count) co_await uring::nop();
        co_await uring::nop();
        EXPECT_EQ(uring::fiber_stacks_in_use() - base, static_cast<std::size_t>(count));
        co_await uring::write(go_wr, std::string_view("!"));
        long ok = 0;
        for (auto& f : fibers) ok += co_await f.join() ? 1 : 0;
        EXPECT_EQ(ok, count);
        long total = 0;
        std::vector<char> buf(4096);
        while (total < count) total += static_cast<long>(co_await uring::read(out_rd, buf));
        co_return total;
      }(n, go.read_end.get(), go.write_end.get(), out.read_end.get(), out.write_end.get(), stacks_before));
  EXPECT_EQ(echoed, n);
  EXPECT_EQ(uring::fiber_stacks_in_use(), stacks_before);
}

TEST_P(Fiber, FibersAndCoroutinesInterleaveFairly) {
  constexpr int kSteps = 200;
  std::string order = run([]() -> task<std::string> {
    executor& ex = *executor::current();
    std::string log;
    auto nops = spawn_fiber(ex, [&log] {
      for (int i = 0; i < kSteps; ++i) {
        this_fiber::await(uring::nop());
        log += 'F';
      }
    });
    auto yields = spawn_fiber(ex, [&log] {
      for (int i = 0; i < kSteps; ++i) {
        this_fiber::yield();
        log += 'Y';
      }
    });
    for (int i = 0; i < kSteps; ++i) {
      co_await uring::nop();
      log += 'C';
    }
    co_await nops.join();
    co_await yields.join();
    co_return log;
  }());
  ASSERT_EQ(order.size(), 3u * kSteps);
  // Every prefix: no party more than a couple of steps ahead of another (one step per loop turn each).
  // An SQPOLL ring's poller completes the nops in its own time while turns go on without waiting for it,
  // so there the yielding fiber may run ahead: only the two parties doing I/O are held level.
  const bool yields_level = !options().sqpoll.enabled;
  int f = 0, y = 0, c = 0, worst = 0;
  for (char ch : order) {
    (ch == 'F' ? f : ch == 'Y' ? y : c) += 1;
    if (f < kSteps && y < kSteps && c < kSteps) {
      worst = std::max(worst, std::abs(f - c));
      if (yields_level) worst = std::max({worst, std::abs(y - c), std::abs(f - y)});
    }
  }
  EXPECT_LE(worst, 2) << order;
}

INSTANTIATE_BACKENDS(Fiber);

}  // namespace
