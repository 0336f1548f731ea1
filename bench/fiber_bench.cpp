// Fibers (uring::fiber) against coroutines and raw liburing, one NOP at a time:
//   fiber/raw_liburing        a NOP, submit and wait for its CQE (registered ring fd): the mechanism
//   fiber/coroutine           one coroutine looping `co_await uring::nop()` (the baseline of the group)
//   fiber/fiber               one fiber looping `this_fiber::await(uring::nop())`: the coroutine path plus
//                             two stack switches (fiber -> driver -> fiber) per NOP
// Switch cost, no I/O:
//   fiber_switch/coroutine_yield  a coroutine rescheduling itself on the executor's ready list (baseline)
//   fiber_switch/fiber_yield      a fiber doing this_fiber::yield(): the same, plus two stack switches
//   fiber_switch/boost_raw        a bare boost::context::fiber resumed and switching back: 2 switches
// Memory:
//   fiber_memory/parked/N     N fibers parked in a sleep at the default stack size; reports the resident
//                             memory they add (bytes_per_fiber: stack pages touched + driver frame + state)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include <uring/fiber.hpp>
#include <uring/uring.hpp>

#include "raw_nop.hpp"

namespace {

void BM_raw(benchmark::State& state) { uring::bench::raw_nops(state, true); }

// Puts the awaiting coroutine at the back of the executor's ready list (what this_fiber::yield does for
// the fiber's driver).
struct reschedule {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    uring::detail::executor_access::schedule(uring::detail::executor_access::current("reschedule"), h);
  }
  void await_resume() const noexcept {}
};

// One coroutine awaiting `make()` once per iteration.
template <class Make>
void coroutine_loop(benchmark::State& state, Make make) {
  uring::executor ex;
  ex.run([](benchmark::State& s, Make m) -> uring::task<void> {
    for (auto _ : s) co_await m();
  }(state, make));
  state.SetItemsProcessed(state.iterations());
}

// One fiber calling `step()` once per iteration.
template <class Step>
void fiber_loop(benchmark::State& state, Step step) {
  uring::executor ex;
  ex.run([](uring::executor& self, benchmark::State& s, Step st) -> uring::task<void> {
    auto h = uring::spawn_fiber(self, [&s, st] {
      for (auto _ : s) st();
    });
    co_await h.join();
  }(ex, state, step));
  state.SetItemsProcessed(state.iterations());
}

void BM_coroutine(benchmark::State& state) {
  coroutine_loop(state, [] { return uring::nop(); });
}
void BM_fiber(benchmark::State& state) {
  fiber_loop(state, [] { uring::this_fiber::await(uring::nop()); });
}
void BM_coroutine_yield(benchmark::State& state) {
  coroutine_loop(state, [] { return reschedule{}; });
}
void BM_fiber_yield(benchmark::State& state) {
  fiber_loop(state, [] { uring::this_fiber::yield(); });
}

void BM_boost_raw(benchmark::State& state) {
  namespace ctx = boost::context;
  bool stop = false;
  ctx::fiber f([&stop](ctx::fiber&& back) {
    while (!stop) back = std::move(back).resume();
    return std::move(back);
  });
  for (auto _ : state) f = std::move(f).resume();
  stop = true;
  f = std::move(f).resume();
  state.SetItemsProcessed(state.iterations());
}

long resident_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * ::sysconf(_SC_PAGESIZE);
}

void BM_parked_memory(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  double per_fiber = 0;
  for (auto _ : state) {
    uring::executor ex;
    ex.run([](uring::executor& self, int count, double& out) -> uring::task<void> {
      int parked = 0;
      long before = resident_bytes();
      for (int i = 0; i < count; ++i) {
        uring::spawn_fiber(self, [&parked] {
          ++parked;
          uring::this_fiber::sleep_for(std::chrono::hours(1));
        }).detach();
      }
      while (parked < count) co_await uring::nop();
      out = static_cast<double>(resident_bytes() - before) / count;
      self.stop();  // unwinds the parked fibers
      co_await uring::nop();
    }(ex, n, per_fiber));
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["bytes_per_fiber"] = per_fiber;
}

}  // namespace

BENCHMARK(BM_raw)->Name("fiber/raw_liburing")->Arg(1);
BENCHMARK(BM_coroutine)->Name("fiber/coroutine")->Arg(1);
BENCHMARK(BM_fiber)->Name("fiber/fiber")->Arg(1);
BENCHMARK(BM_coroutine_yield)->Name("fiber_switch/coroutine_yield")->Arg(1);
BENCHMARK(BM_fiber_yield)->Name("fiber_switch/fiber_yield")->Arg(1);
BENCHMARK(BM_boost_raw)->Name("fiber_switch/boost_raw")->Arg(1);
BENCHMARK(BM_parked_memory)->Name("fiber_memory/parked")->Arg(10000)->Iterations(1);
