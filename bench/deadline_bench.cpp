// The cost of a time limit on a whole task, one task at a time (each task awaits one nop):
//   timed_task/plain     co_await step(): no limit (the baseline)
//   timed_task/deadline  co_await with_timeout(step(), 1h): the task under a deadline; its nop carries a
//                        linked timeout at it (two SQEs), and no timer of its own is armed
//   timed_task/race      co_await when_any(step(), sleep 1h): the task raced against a timer, which is how
//                        a time limit on a task was spelled before deadlines (a timer armed and cancelled
//                        per call, four frames)
#include <benchmark/benchmark.h>

#include <chrono>

#include <uring/uring.hpp>

namespace {

using namespace std::chrono_literals;

uring::task<void> step() { co_await uring::nop(); }
uring::task<void> expire() { co_await uring::sleep_for(1h); }

template <class Body>
void timed(benchmark::State& state, Body body) {
  uring::executor ex;
  ex.run([](benchmark::State& s, Body b) -> uring::task<void> {
    for (auto _ : s) co_await b();
  }(state, body));
  state.SetItemsProcessed(state.iterations());
}

void BM_plain(benchmark::State& state) {
  timed(state, [] { return step(); });
}
void BM_deadline(benchmark::State& state) {
  timed(state, [] { return uring::with_timeout(step(), 1h); });
}
void BM_race(benchmark::State& state) {
  timed(state, []() -> uring::task<void> { (void)co_await uring::when_any(step(), expire()); });
}

}  // namespace

BENCHMARK(BM_plain)->Name("timed_task/plain/1");
BENCHMARK(BM_deadline)->Name("timed_task/deadline/1");
BENCHMARK(BM_race)->Name("timed_task/race/1");
