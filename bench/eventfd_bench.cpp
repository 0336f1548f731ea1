// Eventfd registration and wake-up latency.
//   eventfd_cycle/raw_liburing    io_uring_register_eventfd + io_uring_unregister_eventfd on a plain ring
//   eventfd_cycle/uring_owner     co_await ex.register_eventfd(fd) + co_await reg.unregister(), on ex
//   eventfd_cycle/uring_remote    the same from a coroutine on another executor (two hops per call)
//   wake/futex                    two threads ping-pong through std::atomic wait/notify (futex)
//   wake/uring_event              two executors ping-pong through two auto_reset uring::events
//   wake/uring_resume             one coroutine hopping between two executors with resume_on
// Each wake iteration is one round trip: two cross-thread wake-ups.
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>

#include <uring/uring.hpp>

#include "pingpong.hpp"

namespace {

void BM_cycle_raw(benchmark::State& state) {
  io_uring ring;
  if (io_uring_queue_init(8, &ring, 0) != 0) throw std::runtime_error("io_uring_queue_init");
  int fd = ::eventfd(0, EFD_CLOEXEC);
  for (auto _ : state) {
    if (io_uring_register_eventfd(&ring, fd) != 0 || io_uring_unregister_eventfd(&ring) != 0) {
      state.SkipWithError("register/unregister failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  ::close(fd);
  io_uring_queue_exit(&ring);
}

uring::task<void> cycles(benchmark::State& state, uring::executor& target, int fd) {
  for (auto _ : state) {
    auto reg = co_await target.register_eventfd(fd);
    co_await reg.unregister();
  }
}

void BM_cycle_owner(benchmark::State& state) {
  uring::executor ex;
  int fd = ::eventfd(0, EFD_CLOEXEC);
  ex.run(cycles(state, ex, fd));
  state.SetItemsProcessed(state.iterations());
  ::close(fd);
}

void BM_cycle_remote(benchmark::State& state) {
  uring::executor_group group(1);
  uring::executor ex;
  int fd = ::eventfd(0, EFD_CLOEXEC);
  ex.run(cycles(state, group.at(0), fd));
  state.SetItemsProcessed(state.iterations());
  ::close(fd);
}

void BM_wake_futex(benchmark::State& state) {
  std::atomic<std::uint32_t> turn{0};  // even: the main thread's turn, odd: the echo thread's
  const auto rounds = static_cast<std::uint32_t>(state.max_iterations);
  std::thread echo([&] {
    for (std::uint32_t i = 0; i < rounds; ++i) {
      std::uint32_t want = 2 * i + 1;
      for (std::uint32_t t = turn.load(); t != want; t = turn.load()) turn.wait(t);
      turn.store(want + 1);
      turn.notify_one();
    }
  });
  std::uint32_t i = 0;
  for (auto _ : state) {
    turn.store(2 * i + 1);
    turn.notify_one();
    std::uint32_t want = 2 * i + 2;
    for (std::uint32_t t = turn.load(); t != want; t = turn.load()) turn.wait(t);
    ++i;
  }
  echo.join();
  state.SetItemsProcessed(state.iterations());
}

uring::task<void> echo_events(uring::event& in, uring::event& out, std::int64_t rounds, std::latch& done) {
  for (std::int64_t i = 0; i < rounds; ++i) {
    co_await in.wait();
    out.notify();
  }
  done.count_down();
}

uring::task<void> ping_events(benchmark::State& state, uring::event& in, uring::event& out,
                              std::latch& done) {
  for (auto _ : state) {
    out.notify();
    co_await in.wait();
  }
  done.count_down();
}

void BM_wake_event(benchmark::State& state) {
  uring::executor_group group(2);
  uring::event ping, pong;
  std::latch done(2);
  uring::spawn(group.at(1), echo_events(ping, pong, static_cast<std::int64_t>(state.max_iterations), done));
  uring::spawn(group.at(0), ping_events(state, pong, ping, done));
  done.wait();
  state.SetItemsProcessed(state.iterations());
}

void BM_wake_resume(benchmark::State& state) { uring::bench::resume_pingpong(state, {}); }

}  // namespace

BENCHMARK(BM_cycle_raw)->Name("eventfd_cycle/raw_liburing/1")->UseRealTime();
BENCHMARK(BM_cycle_owner)->Name("eventfd_cycle/uring_owner/1")->UseRealTime();
BENCHMARK(BM_cycle_remote)->Name("eventfd_cycle/uring_remote/1")->UseRealTime();
BENCHMARK(BM_wake_futex)->Name("wake/futex/1")->UseRealTime();
BENCHMARK(BM_wake_event)->Name("wake/uring_event/1")->UseRealTime();
BENCHMARK(BM_wake_resume)->Name("wake/uring_resume/1")->UseRealTime();
