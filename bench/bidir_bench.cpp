// Our raw messages (uring::send → inbox) and coroutine hops (resume_on, submit_to) between two
// executors, in every run mode of executor_pair.hpp (native, _defer: SINGLE_ISSUER|DEFER_TASKRUN,
// _emulated, _busy: each thread polling without sleeping). Items = messages; pingpong: round trips;
// bidir: both directions.
//   pingpong/uring_send*       send one message, await the echo (the echo: receive, send back)
//   pingpong/uring_resume*     one coroutine hopping there and back (native: msg_bench.cpp)
//   pingpong/uring_submit_to*  co_await submit_to(other, empty function)
//   stream/uring_send*         one sender coroutine, one inbox receiver (native, emulated: stream_bench.cpp)
//   bidir/uring_send*          both executors run a sender and a receiver at once
// Senders send back to back; the credit window (1024 per pair, as the raw peers keep) suspends them.
// No resume_on stream or bidir: a one-way hop per message needs a coroutine frame per message, which is
// not how anyone would stream values (channel_bench.cpp has channels for that).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <string>

#include <uring/uring.hpp>

#include "executor_pair.hpp"

namespace {

using uring::bench::executor_pair;
using uring::bench::measure_pair;
using uring::bench::run_mode;

uring::task<void> send_n(uring::executor& to, std::uint64_t n, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) co_await uring::send(to, 1, i);
  done.count_down();
}

uring::task<void> receive_n(std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  uring::inbox in(*uring::executor::current());
  for (std::uint64_t i = 0; i < n; ++i) {
    if ((co_await in.receive()).data != i) ok.store(false);
  }
  done.count_down();
}

uring::task<void> ping(uring::executor& peer, std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  uring::inbox in(*uring::executor::current());
  for (std::uint64_t i = 0; i < n; ++i) {
    co_await uring::send(peer, 1, i);
    if ((co_await in.receive()).data != i) ok.store(false);
  }
  done.count_down();
}

uring::task<void> echo(uring::executor& peer, std::uint64_t n, std::atomic<bool>& ok, std::latch& done) {
  uring::inbox in(*uring::executor::current());
  for (std::uint64_t i = 0; i < n; ++i) {
    uring::message m = co_await in.receive();
    if (m.data != i) ok.store(false);
    co_await uring::send(peer, m.value, m.data);
  }
  done.count_down();
}

uring::task<void> hop(uring::executor& home, uring::executor& away, std::uint64_t n, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) {
    co_await uring::resume_on(away);
    co_await uring::resume_on(home);
  }
  done.count_down();
}

uring::task<void> submit(uring::executor& away, std::uint64_t n, std::latch& done) {
  for (std::uint64_t i = 0; i < n; ++i) co_await uring::submit_to(away, [] {});
  done.count_down();
}

void send_pingpong(benchmark::State& state, run_mode m) {
  measure_pair(state, m, 2, 1,
               [](executor_pair& p, std::uint64_t n, std::latch& done, std::atomic<bool>& ok) {
                 uring::spawn(p.at(1), echo(p.at(0), n, ok, done));
                 uring::spawn(p.at(0), ping(p.at(1), n, ok, done));
               });
}

void send_stream(benchmark::State& state, run_mode m) {
  measure_pair(state, m, 2, 1,
               [](executor_pair& p, std::uint64_t n, std::latch& done, std::atomic<bool>& ok) {
                 uring::spawn(p.at(1), receive_n(n, ok, done));
                 uring::spawn(p.at(0), send_n(p.at(1), n, done));
               });
}

void send_bidir(benchmark::State& state, run_mode m) {
  measure_pair(state, m, 4, 2,
               [](executor_pair& p, std::uint64_t n, std::latch& done, std::atomic<bool>& ok) {
                 uring::spawn(p.at(1), receive_n(n, ok, done));
                 uring::spawn(p.at(0), receive_n(n, ok, done));
                 uring::spawn(p.at(0), send_n(p.at(1), n, done));
                 uring::spawn(p.at(1), send_n(p.at(0), n, done));
               });
}

void resume_pingpong(benchmark::State& state, run_mode m) {
  measure_pair(state, m, 1, 1, [](executor_pair& p, std::uint64_t n, std::latch& done, std::atomic<bool>&) {
    uring::spawn(p.at(0), hop(p.at(0), p.at(1), n, done));
  });
}

void submit_pingpong(benchmark::State& state, run_mode m) {
  measure_pair(state, m, 1, 1, [](executor_pair& p, std::uint64_t n, std::latch& done, std::atomic<bool>&) {
    uring::spawn(p.at(0), submit(p.at(1), n, done));
  });
}

void add(const std::string& name, void (*fn)(benchmark::State&, run_mode), run_mode m) {
  benchmark::RegisterBenchmark(name.c_str(), [fn, m](benchmark::State& st) { fn(st, m); })->UseRealTime();
}

const bool registered = [] {
  for (run_mode m : {run_mode::native, run_mode::defer, run_mode::emulated, run_mode::busy}) {
    const std::string s = uring::bench::mode_suffix(m);
    add("pingpong/uring_send" + s + "/1", send_pingpong, m);
    if (m != run_mode::native) add("pingpong/uring_resume" + s + "/1", resume_pingpong, m);
    add("pingpong/uring_submit_to" + s + "/1", submit_pingpong, m);
    if (m == run_mode::defer || m == run_mode::busy) add("stream/uring_send" + s + "/64", send_stream, m);
    add("bidir/uring_send" + s + "/64", send_bidir, m);
  }
  return true;
}();

}  // namespace
