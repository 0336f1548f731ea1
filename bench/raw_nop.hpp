// raw_nop.hpp — the raw liburing NOP loop, the baseline that several benchmark groups share.
#pragma once

#include <benchmark/benchmark.h>

namespace uring::bench {

// state.range(0) NOPs per io_uring_enter on a plain liburing ring (SUBMIT_ALL|COOP_TASKRUN, the
// executor's default flags), its fd registered if `registered`; with `sqpoll`, an SQPOLL ring
// (SUBMIT_ALL|SQPOLL: the kernel refuses COOP_TASKRUN with it).
void raw_nops(benchmark::State& state, bool registered, bool sqpoll = false);

}  // namespace uring::bench
