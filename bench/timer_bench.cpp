// Timer and cancellation round trips, one at a time (each needs the kernel's answer before the next):
//   timer/raw_liburing   IORING_OP_TIMEOUT of 0 ns, submit and wait for its CQE
//   timer/uring          co_await uring::sleep_for(0ns)
//   timer/emulated       the same on the emulated backend (the timer heap + a zero-timeout epoll_pwait2)
//   cancel/raw_liburing  a read on an empty pipe, then an ASYNC_CANCEL for it; wait for both CQEs
//   cancel/raw_stop_token  raw_liburing plus what a std::stop_token costs any library that takes one: a
//                        stop_source per round trip (its shared state is allocated), a stop_callback
//                        registered around the read whose callback queues the ASYNC_CANCEL, the stop
//                        request: what the token adds to raw_liburing
//   cancel/raw_coroutine the least a coroutine loop adds to raw_stop_token, the floor under cancel/uring:
//                        the same two coroutines as cancel/uring (the reader and the stopper, resumed on
//                        the next turn) on a bare loop over the raw ring, a read awaitable that is its
//                        CQE's user_data and whose stop_callback queues the cancel (its success skips its
//                        CQE, as ours does). No executor, no error path, no bookkeeping.
//   cancel/uring         the same work: a read on an empty pipe, awaited with a stop token, goes to the
//                        kernel in one enter; on the next turn request_stop() queues an ASYNC_CANCEL for it,
//                        and the second enter waits for both CQEs (the read fails ECANCELED). A stop in the
//                        read's own turn would keep it from the kernel (no kernel work to compare), so a
//                        coroutine resumed on a later turn stops it. Ours also pays what a stop token costs:
//                        the stop_source's shared state and the operation's canceller, per round trip.
//   cancel/emulated      the same on the emulated backend
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <vector>

#include <uring/uring.hpp>

#include "bare_coroutine.hpp"

namespace {

io_uring make_raw_ring() {
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(64, &ring, &params) != 0)
    throw std::runtime_error("io_uring_queue_init_params");
  if (io_uring_register_ring_fd(&ring) != 1) throw std::runtime_error("io_uring_register_ring_fd");
  return ring;
}

void reap(io_uring& ring, unsigned n) {
  io_uring_cqe* cqe;
  for (unsigned i = 0; i < n; ++i) {
    io_uring_wait_cqe(&ring, &cqe);
    io_uring_cqe_seen(&ring, cqe);
  }
}

void BM_timer_raw(benchmark::State& state) {
  io_uring ring = make_raw_ring();
  __kernel_timespec zero{0, 0};
  for (auto _ : state) {
    io_uring_prep_timeout(io_uring_get_sqe(&ring), &zero, 0, 0);
    io_uring_submit_and_wait(&ring, 1);
    reap(ring, 1);
  }
  state.SetItemsProcessed(state.iterations());
  io_uring_queue_exit(&ring);
}

void timer_ours(benchmark::State& state, uring::backend_kind backend) {
  uring::executor::options opts;
  opts.backend = backend;
  uring::executor ex(opts);
  ex.run([&]() -> uring::task<void> {
    for (auto _ : state) co_await uring::sleep_for(std::chrono::nanoseconds(0));
  }());
  state.SetItemsProcessed(state.iterations());
}

// The raw cancel round trip; with `stop_token`, the ASYNC_CANCEL is queued by a stop_callback that a
// stop_source's request runs (cancel/raw_stop_token).
void raw_cancels(benchmark::State& state, bool stop_token) {
  io_uring ring = make_raw_ring();
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  char buf[1];
  auto cancel_read = [&ring] { io_uring_prep_cancel64(io_uring_get_sqe(&ring), 1, 0); };
  for (auto _ : state) {
    io_uring_sqe* read = io_uring_get_sqe(&ring);
    io_uring_prep_read(read, p[0], buf, 1, 0);
    io_uring_sqe_set_data64(read, 1);
    io_uring_submit(&ring);
    if (stop_token) {
      std::stop_source source;
      const std::stop_callback cancel(source.get_token(), cancel_read);
      source.request_stop();
    } else {
      cancel_read();
    }
    io_uring_submit_and_wait(&ring, 2);
    reap(ring, 2);
  }
  state.SetItemsProcessed(state.iterations());
  ::close(p[0]);
  ::close(p[1]);
  io_uring_queue_exit(&ring);
}

void BM_cancel_raw(benchmark::State& state) { raw_cancels(state, false); }
void BM_cancel_raw_stop_token(benchmark::State& state) { raw_cancels(state, true); }

// cancel/raw_coroutine: a loop of one ready list and one raw ring, nothing else.
struct bare_loop {
  io_uring ring = make_raw_ring();
  std::vector<std::coroutine_handle<>> ready, resuming;
  std::uint64_t enters = 0;
};

// What the stopping coroutine reads: the round trip's stop source, and how many enters the loop had made
// when the round trip began.
struct round_trip {
  std::stop_source* source = nullptr;
  std::uint64_t enters_before = 0;
};

// The two loops the stopper runs on: our executor, and the bare one.
std::uint64_t enters(const uring::executor& ex) { return ex.stats().enters; }
std::uint64_t enters(const bare_loop& loop) { return loop.enters; }
void schedule(uring::executor& ex, std::coroutine_handle<> h) {
  uring::detail::executor_access::schedule(ex, h);
}
void schedule(bare_loop& loop, std::coroutine_handle<> h) { loop.ready.push_back(h); }

using stopper = uring::bench::bare_coroutine<true>;  // started by the loop, each round trip

template <class Loop>
struct next_turn {
  Loop& loop;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { schedule(loop, h); }
  void await_resume() const noexcept {}
};

// A coroutine that, each time it is resumed, stops the round trip's read once the loop has entered since
// the read started (the kernel has it), else waits one more turn. A coroutine resumed by a completion runs
// in the reaping turn, so the turn after it may come before the read's enter: counting says when. (A stop
// before that enter would withdraw the read instead: no round trip.)
template <class Loop>
stopper stop_once_started(Loop& loop, const round_trip& trip) {
  for (;;) {
    while (enters(loop) == trip.enters_before) co_await next_turn<Loop>{loop};
    trip.source->request_stop();
    co_await std::suspend_always{};
  }
}

using uring::bench::bare_task;

// A read at offset 0 that is its own CQE's user_data; a stop queues an ASYNC_CANCEL for it.
struct bare_read {
  struct on_stop {
    bare_read* self;
    void operator()() const noexcept {
      io_uring_sqe* sqe = io_uring_get_sqe(&self->loop->ring);
      io_uring_prep_cancel(sqe, self, 0);
      sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    }
  };
  bare_loop* loop;
  int fd;
  char* buf;
  std::stop_token token;
  std::coroutine_handle<> waiter{};
  int res = 0;
  std::optional<std::stop_callback<on_stop>> callback{};
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    waiter = h;
    io_uring_sqe* sqe = io_uring_get_sqe(&loop->ring);
    io_uring_prep_read(sqe, fd, buf, 1, 0);
    io_uring_sqe_set_data(sqe, this);
    callback.emplace(token, on_stop{this});
  }
  int await_resume() noexcept {
    callback.reset();
    return res;
  }
};

bare_task bare_reads(benchmark::State& state, bare_loop& loop, round_trip& trip, std::coroutine_handle<> stop,
                     int fd, bool& all_cancelled) {
  for (auto _ : state) {
    std::stop_source source;
    trip.source = &source;
    trip.enters_before = enters(loop);
    schedule(loop, stop);
    char buf[1];
    const int res = co_await bare_read{.loop = &loop, .fd = fd, .buf = buf, .token = source.get_token()};
    all_cancelled = all_cancelled && res == -ECANCELED;
  }
}

void BM_cancel_raw_coroutine(benchmark::State& state) {
  bare_loop loop;
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  round_trip trip;
  const stopper stop = stop_once_started(loop, trip);
  bool all_cancelled = true;
  const bare_task root = bare_reads(state, loop, trip, stop.handle, p[0], all_cancelled);
  io_uring_cqe* cqes[64];
  while (!root.handle.done()) {
    if (!loop.ready.empty()) {
      loop.resuming.swap(loop.ready);
      for (const std::coroutine_handle<> h : loop.resuming) h.resume();
      loop.resuming.clear();
    }
    if (root.handle.done()) break;
    if (loop.ready.empty()) {
      io_uring_submit_and_wait(&loop.ring, 1);
    } else {
      io_uring_submit(&loop.ring);
    }
    ++loop.enters;
    const unsigned got = io_uring_peek_batch_cqe(&loop.ring, cqes, 64);
    for (unsigned i = 0; i < got; ++i) {
      auto* op = static_cast<bare_read*>(io_uring_cqe_get_data(cqes[i]));
      op->res = cqes[i]->res;
      op->waiter.resume();
    }
    io_uring_cq_advance(&loop.ring, got);
  }
  state.counters["enters_per_op"] =
      static_cast<double>(loop.enters) / static_cast<double>(state.iterations());
  if (!all_cancelled) state.SkipWithError("a read ended other than by its cancel");
  state.SetItemsProcessed(state.iterations());
  root.handle.destroy();
  stop.handle.destroy();
  ::close(p[0]);
  ::close(p[1]);
  io_uring_queue_exit(&loop.ring);
}

void cancel_ours(benchmark::State& state, uring::backend_kind backend) {
  uring::executor::options opts;
  opts.backend = backend;
  uring::executor ex(opts);
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  round_trip trip;
  const stopper stop = stop_once_started(ex, trip);
  bool all_cancelled = true;
  ex.run([&]() -> uring::task<void> {
    for (auto _ : state) {
      std::stop_source source;
      trip.source = &source;
      trip.enters_before = enters(ex);
      schedule(ex, stop.handle);
      char buf[1];
      const uring::io_result r =
          co_await uring::with_stop_token(uring::read_at(p[0], buf, 0), source.get_token()).nothrow();
      all_cancelled = all_cancelled && r.res == -ECANCELED;
    }
  }());
  stop.handle.destroy();
  // Two on both roads when the work matches raw's: the read's enter, then the cancel's that waits.
  state.counters["enters_per_op"] =
      static_cast<double>(ex.stats().enters) / static_cast<double>(state.iterations());
  if (!all_cancelled) state.SkipWithError("a read ended other than by its cancel");
  state.SetItemsProcessed(state.iterations());
  ::close(p[0]);
  ::close(p[1]);
}

void BM_timer_uring(benchmark::State& state) { timer_ours(state, uring::backend_kind::native); }
void BM_timer_emulated(benchmark::State& state) { timer_ours(state, uring::backend_kind::emulated); }
void BM_cancel_uring(benchmark::State& state) { cancel_ours(state, uring::backend_kind::native); }
void BM_cancel_emulated(benchmark::State& state) { cancel_ours(state, uring::backend_kind::emulated); }

}  // namespace

BENCHMARK(BM_timer_raw)->Name("timer/raw_liburing/1");
BENCHMARK(BM_timer_uring)->Name("timer/uring/1");
BENCHMARK(BM_timer_emulated)->Name("timer/emulated/1");
BENCHMARK(BM_cancel_raw)->Name("cancel/raw_liburing/1");
BENCHMARK(BM_cancel_raw_stop_token)->Name("cancel/raw_stop_token/1");
BENCHMARK(BM_cancel_raw_coroutine)->Name("cancel/raw_coroutine/1");
BENCHMARK(BM_cancel_uring)->Name("cancel/uring/1");
BENCHMARK(BM_cancel_emulated)->Name("cancel/emulated/1");
