// executor_pair.hpp — two executors on two threads, set up the way a messaging benchmark variant asks.
//
// Provides: uring::bench::run_mode, executor_pair, mode_suffix.
// Threads: construct and destroy a pair on one thread; at() from any thread (spawn onto it from anywhere).
//
// Each executor runs in an executor_group worker (run()). native, defer and emulated sleep in the kernel
// when idle; busy is native with executor_options::busy_poll (kBusyPollWindow): an idle loop spins on its
// CQ and mailbox before it parks.
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>

#include <uring/executor.hpp>
#include <uring/executor_group.hpp>

namespace uring::bench {

enum class run_mode { native, defer, emulated, busy };
inline constexpr std::chrono::microseconds kBusyPollWindow{200};

// "" for native, else "_defer", "_emulated", "_busy": appended to a benchmark's variant name.
const char* mode_suffix(run_mode m);

class executor_pair {
 public:
  explicit executor_pair(run_mode m);
  ~executor_pair();
  executor_pair(const executor_pair&) = delete;
  executor_pair& operator=(const executor_pair&) = delete;

  executor& at(int i);

 private:
  std::unique_ptr<executor_group> group_;
};

// Runs one batch of state.max_iterations on a fresh pair: start(pair, n, done, ok) spawns the coroutines,
// each of which counts `done` down at its end (`parties` of them) and clears `ok` on a wrong message.
// Items = iterations * items_per_iteration.
template <class Start>
void measure_pair(benchmark::State& state, run_mode m, int parties, int items_per_iteration, Start start) {
  executor_pair pair(m);
  std::atomic<bool> ok{true};
  const auto n = static_cast<std::uint64_t>(state.max_iterations);
  while (state.KeepRunningBatch(state.max_iterations)) {
    std::latch done(parties);
    start(pair, n, done, ok);
    done.wait();
  }
  if (!ok.load()) state.SkipWithError("messages lost or out of order");
  state.SetItemsProcessed(state.iterations() * items_per_iteration);
}

}  // namespace uring::bench
