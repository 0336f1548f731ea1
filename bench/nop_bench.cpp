// NOP throughput at N requests per io_uring_enter:
//   raw_plain       liburing, ring fd not registered (every enter does fdget/fdput)
//   raw_registered  liburing, ring fd registered (IORING_ENTER_REGISTERED_RING) — the mechanism's limit
//   raw_coroutine   the least any coroutine library adds to raw_registered: N bare coroutines on the same
//                   ring, each awaiting a NOP that its await_suspend writes into the SQ; the loop enters
//                   once a turn and resumes each CQE's coroutine with its result. No executor, no error
//                   path, no bookkeeping: the floor under `uring`.
//   uring           our executor: N coroutines each looping `co_await uring::nop()`; the loop submits the
//                   turn's N SQEs in one enter, exactly like the raw loop.
//   emulated        the same coroutines on the emulated backend (no syscall per nop at all: an upper
//                   bound on the library's own per-operation cost, not a fair race with the kernel)
//   uring_restricted  `uring` on a ring restricted to nop (executor_options::allowed_ops)
//   uring_latency     `uring` with executor_options::histograms
//   raw_sqpoll, uring_sqpoll  liburing and ours on an SQPOLL ring: a kernel thread takes the SQEs, and
//                   each turn enters only to wait for its completions
// nop_threaded/*: raw_plain, raw_registered and uring again, in a process with one more thread that only
// sleeps. A process whose file table is shared (any threaded server) pays an atomic reference count on
// every fd lookup, the ring fd's included: that is what a registered ring fd saves, so this group shows
// the mechanism where it matters; a single-threaded process skips the count. nop_threaded/*/threads:2:
// two threads, each driving its own ring.
// All rings use the executor's default setup flags, so only the registration and the library differ.
#include <benchmark/benchmark.h>
#include <liburing.h>

#include <coroutine>
#include <exception>
#include <semaphore>
#include <stdexcept>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "bare_coroutine.hpp"
#include "raw_nop.hpp"
#include "thread_cpu.hpp"

namespace uring::bench {

namespace {

// A ring as the executor sets one up by default; the fd registered if `registered`.
io_uring make_nop_ring(bool registered, bool sqpoll) {
  io_uring ring;
  io_uring_params params{};
  // The kernel refuses COOP_TASKRUN with SQPOLL; the executor's plan drops it the same way.
  params.flags = IORING_SETUP_SUBMIT_ALL | (sqpoll ? IORING_SETUP_SQPOLL : IORING_SETUP_COOP_TASKRUN);
  params.sq_thread_idle = 10;  // ms, as executor_options::sqpoll's default
  if (io_uring_queue_init_params(256, &ring, &params) != 0)
    throw std::runtime_error("io_uring_queue_init_params");
  if (registered && io_uring_register_ring_fd(&ring) != 1)
    throw std::runtime_error("io_uring_register_ring_fd");
  return ring;
}

}  // namespace

void raw_nops(benchmark::State& state, bool registered, bool sqpoll) {
  const auto batch = static_cast<unsigned>(state.range(0));
  io_uring ring = make_nop_ring(registered, sqpoll);
  io_uring_cqe* cqes[256];
  const thread_cpu start = thread_cpu::now();
  while (state.KeepRunningBatch(batch)) {
    for (unsigned i = 0; i < batch; ++i) io_uring_prep_nop(io_uring_get_sqe(&ring));
    io_uring_submit_and_wait(&ring, batch);
    unsigned got = io_uring_peek_batch_cqe(&ring, cqes, batch);
    io_uring_cq_advance(&ring, got);
  }
  thread_cpu::now().report(state, start);
  state.SetItemsProcessed(state.iterations());
  io_uring_queue_exit(&ring);
}

}  // namespace uring::bench

namespace {

using uring::bench::bare_task;

using uring::bench::raw_nops;
using uring::bench::thread_cpu;

void BM_raw_plain(benchmark::State& state) { raw_nops(state, false); }
void BM_raw_registered(benchmark::State& state) { raw_nops(state, true); }
void BM_raw_sqpoll(benchmark::State& state) { raw_nops(state, true, true); }

// `batch` coroutines in lock step: each turn every one of them has one nop in flight, so each enter
// carries `batch` SQEs. The root drives the benchmark's clock; the others stop when it does.
void executor_nops(benchmark::State& state, uring::backend_kind backend, bool restricted = false,
                   bool latency = false, bool sqpoll = false) {
  const auto batch = static_cast<int>(state.range(0));
  uring::executor::options opts;
  opts.backend = backend;
  opts.sqpoll.enabled = sqpoll;
  if (restricted) opts.allowed_ops = {uring::op_kind::nop};
  opts.histograms = latency;
  uring::executor ex(opts);
  long total = 0;
  bool done = false;
  int running = 0;
  // Plain parameters, not lambda captures: the loop itself should cost what a user's would, no more.
  auto helper = [](const bool* stop, long* sum, int* live) -> uring::task<void> {
    ++*live;
    long mine = 0;
    while (!*stop) {
      co_await uring::nop();
      ++mine;
    }
    *sum += mine;
    --*live;
  };
  ex.run([&]() -> uring::task<void> {
    for (int i = 1; i < batch; ++i) uring::spawn(helper(&done, &total, &running));
    co_await uring::nop();  // let the helpers start, so every measured turn carries `batch` SQEs
    long mine = 0;
    const thread_cpu start = thread_cpu::now();
    while (state.KeepRunningBatch(batch)) {
      co_await uring::nop();
      ++mine;
    }
    thread_cpu::now().report(state, start);
    done = true;
    while (running > 0) co_await uring::nop();
    total += mine;
  }());
  state.SetItemsProcessed(total);
  if (backend == uring::backend_kind::native) {
    state.counters["sqes_per_enter"] =
        static_cast<double>(ex.stats().sqes) / static_cast<double>(ex.stats().enters ? ex.stats().enters : 1);
  }
}

// The bare coroutine floor: a bare_task, and a NOP awaitable that is its own CQE's user_data (the loop
// stores the result in it and resumes its waiter).
struct bare_nop {
  io_uring* ring;
  std::coroutine_handle<> waiter{};
  int res = 0;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    waiter = h;
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, this);
  }
  int await_resume() const noexcept { return res; }
};

bare_task bare_nop_loop(io_uring* ring, benchmark::State* clock, unsigned batch, const bool* stop,
                        long* sum) {
  long mine = 0;
  if (clock != nullptr) {
    while (clock->KeepRunningBatch(batch)) mine += co_await bare_nop{ring} == 0;
  } else {
    while (!*stop) mine += co_await bare_nop{ring} == 0;
  }
  *sum += mine;
}

void BM_raw_coroutine(benchmark::State& state) {
  const auto batch = static_cast<unsigned>(state.range(0));
  io_uring ring = uring::bench::make_nop_ring(true, false);
  bool done = false;
  long total = 0;
  std::vector<bare_task> tasks;
  for (unsigned i = 1; i < batch; ++i) tasks.push_back(bare_nop_loop(&ring, nullptr, batch, &done, &total));
  const thread_cpu start = thread_cpu::now();
  bare_task root = bare_nop_loop(&ring, &state, batch, &done, &total);
  io_uring_cqe* cqes[256];
  for (unsigned queued = io_uring_sq_ready(&ring); queued > 0; queued = io_uring_sq_ready(&ring)) {
    io_uring_submit_and_wait(&ring, queued);
    const unsigned got = io_uring_peek_batch_cqe(&ring, cqes, 256);
    for (unsigned i = 0; i < got; ++i) {
      auto* op = static_cast<bare_nop*>(io_uring_cqe_get_data(cqes[i]));
      op->res = cqes[i]->res;
      op->waiter.resume();
    }
    io_uring_cq_advance(&ring, got);
    if (root.handle.done() && !done) {
      thread_cpu::now().report(state, start);
      done = true;  // the others end at their next resume
    }
  }
  root.handle.destroy();
  for (bare_task& t : tasks) t.handle.destroy();
  state.SetItemsProcessed(total);
  io_uring_queue_exit(&ring);
}

void BM_uring(benchmark::State& state) { executor_nops(state, uring::backend_kind::native); }
void BM_emulated(benchmark::State& state) { executor_nops(state, uring::backend_kind::emulated); }
// The same on a ring restricted to nop (executor_options::allowed_ops): the kernel checks every SQE
// against the list, the executor every operation.
void BM_uring_restricted(benchmark::State& state) { executor_nops(state, uring::backend_kind::native, true); }
// With executor_options::histograms: clock reads per turn and per reap, a bucket per NOP.
void BM_uring_latency(benchmark::State& state) {
  executor_nops(state, uring::backend_kind::native, false, true);
}
void BM_uring_sqpoll(benchmark::State& state) {
  executor_nops(state, uring::backend_kind::native, false, false, true);
}

// A second thread that only waits, for the benchmark's whole run: the process's file table is shared.
class idle_thread {
 public:
  idle_thread() : thread_([this] { release_.acquire(); }) {}
  ~idle_thread() {
    release_.release();
    thread_.join();
  }
  idle_thread(const idle_thread&) = delete;
  idle_thread& operator=(const idle_thread&) = delete;

 private:
  std::binary_semaphore release_{0};
  std::thread thread_;
};

// With two benchmark threads the process is threaded already; with one, an idle thread makes it so.
template <auto Loop>
void threaded(benchmark::State& state) {
  if (state.threads() > 1) return Loop(state);
  idle_thread idle;
  Loop(state);
}

}  // namespace

BENCHMARK(threaded<BM_raw_plain>)
    ->Name("nop_threaded/raw_plain")
    ->Arg(1)
    ->Arg(32)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(threaded<BM_raw_registered>)
    ->Name("nop_threaded/raw_registered")
    ->Arg(1)
    ->Arg(32)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(threaded<BM_uring>)
    ->Name("nop_threaded/uring")
    ->Arg(1)
    ->Arg(32)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_raw_plain)->Name("nop/raw_plain")->Arg(1)->Arg(32);
BENCHMARK(BM_raw_registered)->Name("nop/raw_registered")->Arg(1)->Arg(32);
BENCHMARK(BM_raw_coroutine)->Name("nop/raw_coroutine")->Arg(1)->Arg(32);
BENCHMARK(BM_uring)->Name("nop/uring")->Arg(1)->Arg(32);
BENCHMARK(BM_emulated)->Name("nop/emulated")->Arg(1)->Arg(32);
BENCHMARK(BM_uring_restricted)->Name("nop/uring_restricted")->Arg(1)->Arg(32);
BENCHMARK(BM_uring_latency)->Name("nop/uring_latency")->Arg(1)->Arg(32);
BENCHMARK(BM_raw_sqpoll)->Name("nop/raw_sqpoll")->Arg(1)->Arg(32);
BENCHMARK(BM_uring_sqpoll)->Name("nop/uring_sqpoll")->Arg(1)->Arg(32);
