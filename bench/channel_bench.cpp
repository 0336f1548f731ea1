// uring::channel<std::uint64_t> (capacity 1024) between two executors, in every run mode of
// executor_pair.hpp. Items = values; pingpong: round trips; bidir: both directions.
//   pingpong/uring_channel*  send a value on one channel, await it back on the other
//   stream/uring_channel*    one sender coroutine, one receiver coroutine
//   bidir/uring_channel*     a channel each way, both executors sending and receiving at once
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <string>

#include <uring/channel.hpp>
#include <uring/uring.hpp>

#include "executor_pair.hpp"

namespace {

using uring::bench::executor_pair;
using uring::bench::run_mode;
using chan = uring::channel<std::uint64_t>;

constexpr std::size_t kCapacity = 1024;

uring::task<void> send_n(chan& ch, std::uint64_t n, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) co_await ch.send(i);
  done.count_down();
}

uring::task<void> receive_n(chan& ch, std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) {
    if (co_await ch.receive() != i) ok.store(false);
  }
  done.count_down();
}

uring::task<void> ping(chan& to, chan& from, std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) {
    co_await to.send(i);
    if (co_await from.receive() != i) ok.store(false);
  }
  done.count_down();
}

uring::task<void> echo(chan& in, chan& out, std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) {
    auto v = co_await in.receive();
    if (v != i) ok.store(false);
    co_await out.send(v.value_or(0));
  }
  done.count_down();
}

// Channels live outside the timed batch and outlive every coroutine using them (each has counted
// `done` down, and left its awaits, before the batch ends).
void channel_bench(benchmark::State& state, run_mode m, int pattern) {
  executor_pair pair(m);
  chan to1(pair.at(1), kCapacity), to0(pair.at(0), kCapacity);
  std::atomic<bool> ok{true};
  const auto n = static_cast<std::uint64_t>(state.max_iterations);
  while (state.KeepRunningBatch(state.max_iterations)) {
    std::latch done(pattern == 2 ? 4 : 2);
    if (pattern == 0) {
      uring::spawn(pair.at(1), echo(to1, to0, n, ok, done));
      uring::spawn(pair.at(0), ping(to1, to0, n, ok, done));
    } else {
      uring::spawn(pair.at(1), receive_n(to1, n, ok, done));
      uring::spawn(pair.at(0), send_n(to1, n, done));
      if (pattern == 2) {
        uring::spawn(pair.at(0), receive_n(to0, n, ok, done));
        uring::spawn(pair.at(1), send_n(to0, n, done));
      }
    }
    done.wait();
  }
  if (!ok.load()) state.SkipWithError("values lost or out of order");
  state.SetItemsProcessed(state.iterations() * (pattern == 2 ? 2 : 1));
}

const bool registered = [] {
  const char* names[] = {"pingpong/uring_channel%s/1", "stream/uring_channel%s/64",
                         "bidir/uring_channel%s/64"};
  for (run_mode m : {run_mode::native, run_mode::defer, run_mode::emulated, run_mode::busy}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      char name[64];
      std::snprintf(name, sizeof name, names[pattern], uring::bench::mode_suffix(m));
      benchmark::RegisterBenchmark(name, [m, pattern](benchmark::State& st) {
        channel_bench(st, m, pattern);
      })->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
