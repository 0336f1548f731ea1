// raw_nop.hpp — the raw liburing NOP loop, the baseline that several benchmark groups share.
#pragma once

#include <benchmark/benchmark.h>

namespace uring::bench {

// state.range(0) NOPs per io_uring_enter on a plain liburing ring (SUBMIT_ALL|COOP_TASKRUN, the
// executor's default flags), its fd registered if `registered`.
void raw_nops(benchmark::State& state, bool registered);

}  // namespace uring::bench
