// pingpong.hpp — the resume_on round trip, shared by the ping-pong and wake-up groups.
#pragma once

#include <benchmark/benchmark.h>

#include <uring/executor_options.hpp>

namespace uring::bench {

// One coroutine hopping between the two executors of a group with resume_on: one round trip per iteration.
void resume_pingpong(benchmark::State& state, feature_set disable);

}  // namespace uring::bench
