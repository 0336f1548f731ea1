// thread_cpu.hpp — the calling thread's CPU time, user and system, for per-item counters.
//
// On this shared VM a run's throughput moves ±20% with the host; the CPU time a thread spends per item,
// split into user (the library) and system (the kernel), moves far less and says which side a
// difference comes from.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <string>

namespace uring::bench {

struct thread_cpu {
  double user_ns = 0;
  double sys_ns = 0;

  static thread_cpu now() {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    auto ns = [](const timeval& t) {
      return 1e9 * static_cast<double>(t.tv_sec) + 1e3 * static_cast<double>(t.tv_usec);
    };
    return {ns(u.ru_utime), ns(u.ru_stime)};
  }
  // Sets counters `<prefix>user_ns` and `<prefix>sys_ns`: this thread's time since `start`, per iteration.
  void report(benchmark::State& state, const thread_cpu& start, const char* prefix = "") const {
    const auto n = static_cast<double>(state.iterations());
    state.counters[std::string(prefix) + "user_ns"] = (user_ns - start.user_ns) / n;
    state.counters[std::string(prefix) + "sys_ns"] = (sys_ns - start.sys_ns) / n;
  }
};

}  // namespace uring::bench
