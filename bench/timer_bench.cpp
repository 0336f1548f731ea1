// Timer and cancellation round trips, one at a time (each needs the kernel's answer before the next):
//   timer/raw_liburing   IORING_OP_TIMEOUT of 0 ns, submit and wait for its CQE
//   timer/uring          co_await uring::sleep_for(0ns)
//   timer/emulated       the same on the emulated backend (the timer heap + a zero-timeout epoll_pwait2)
//   cancel/raw_liburing  a read on an empty pipe, then an ASYNC_CANCEL for it; wait for both CQEs
//   cancel/uring         a read awaited with a stop token, then request_stop(): the read fails ECANCELED
//   cancel/emulated      the same on the emulated backend
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <stop_token>

#include <uring/uring.hpp>

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

void BM_cancel_raw(benchmark::State& state) {
  io_uring ring = make_raw_ring();
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  char buf[1];
  for (auto _ : state) {
    io_uring_sqe* read = io_uring_get_sqe(&ring);
    io_uring_prep_read(read, p[0], buf, 1, 0);
    io_uring_sqe_set_data64(read, 1);
    io_uring_submit(&ring);
    io_uring_prep_cancel64(io_uring_get_sqe(&ring), 1, 0);
    io_uring_submit_and_wait(&ring, 2);
    reap(ring, 2);
  }
  state.SetItemsProcessed(state.iterations());
  ::close(p[0]);
  ::close(p[1]);
  io_uring_queue_exit(&ring);
}

void cancel_ours(benchmark::State& state, uring::backend_kind backend) {
  uring::executor::options opts;
  opts.backend = backend;
  uring::executor ex(opts);
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  ex.run([&]() -> uring::task<void> {
    for (auto _ : state) {
      std::stop_source source;
      bool done = false;
      uring::spawn([](int fd, std::stop_token tok, bool& flag) -> uring::task<void> {
        char buf[1];
        (void)co_await uring::with_stop_token(uring::read(fd, buf), tok).nothrow();
        flag = true;
      }(p[0], source.get_token(), done));
      co_await uring::nop();  // the read is in the kernel now
      source.request_stop();
      while (!done) co_await uring::nop();
    }
  }());
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
BENCHMARK(BM_cancel_uring)->Name("cancel/uring/1");
BENCHMARK(BM_cancel_emulated)->Name("cancel/emulated/1");
