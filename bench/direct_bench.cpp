// Direct descriptors against plain fds (items = 1-byte writes to /dev/null, 32 per enter), with a second
// thread alive, as in any server with more than one executor: the process's file table is then shared,
// so the kernel's lookup of a plain fd takes and drops a reference on the file (fdget/fdput) for every
// operation, which a direct descriptor skips.
//   direct/raw_plain   raw liburing, a plain fd
//   direct/raw_fixed   raw liburing, the fd registered in the ring's table (IOSQE_FIXED_FILE): baseline
//   direct/plain       our executor: 32 coroutines each looping co_await uring::write(fd, ...)
//   direct/direct      the same on a slot from uring::install_direct
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <latch>
#include <stdexcept>
#include <thread>

#include <uring/uring.hpp>

#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

constexpr unsigned kBatch = 32;

// A thread that shares the file table and does nothing until the benchmark ends.
class second_thread {
 public:
  second_thread() : t_([this] { done_.wait(); }) {}
  ~second_thread() {
    done_.count_down();
    t_.join();
  }

 private:
  std::latch done_{1};
  std::thread t_;
};

int open_null() {
  const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open /dev/null");
  return fd;
}

void raw_writes(benchmark::State& state, bool fixed) {
  second_thread other;
  const int fd = open_null();
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;  // the executor's default flags
  if (io_uring_queue_init_params(256, &ring, &params) != 0)
    throw std::runtime_error("io_uring_queue_init_params");
  if (io_uring_register_ring_fd(&ring) != 1) throw std::runtime_error("io_uring_register_ring_fd");
  if (fixed && io_uring_register_files(&ring, &fd, 1) != 0)
    throw std::runtime_error("io_uring_register_files");
  static const char byte = 0;
  io_uring_cqe* cqes[kBatch];
  const thread_cpu start = thread_cpu::now();
  while (state.KeepRunningBatch(kBatch)) {
    for (unsigned i = 0; i < kBatch; ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_write(sqe, fixed ? 0 : fd, &byte, 1, 0);
      if (fixed) sqe->flags |= IOSQE_FIXED_FILE;
    }
    io_uring_submit_and_wait(&ring, kBatch);
    const unsigned got = io_uring_peek_batch_cqe(&ring, cqes, kBatch);
    io_uring_cq_advance(&ring, got);
  }
  thread_cpu::now().report(state, start);
  state.SetItemsProcessed(state.iterations());
  io_uring_queue_exit(&ring);
  ::close(fd);
}

template <class Fd>
uring::task<void> writer(Fd fd, const bool* stop, long* count) {
  static const char byte = 0;
  while (!*stop) {
    co_await uring::write_at(fd, uring::const_buffer(&byte, 1), 0);
    ++*count;
  }
}

void executor_writes(benchmark::State& state, bool direct) {
  second_thread other;
  uring::owned_fd fd(open_null());
  uring::executor_options opts;
  opts.direct_files = 1;
  uring::executor ex(opts);
  long total = 0;
  bool done = false;
  ex.run([&]() -> uring::task<void> {
    const uring::direct_fd slot = co_await uring::install_direct(fd.get());
    auto spawn_writer = [&] {
      if (direct) {
        uring::spawn(writer(slot, &done, &total));
      } else {
        uring::spawn(writer(fd.get(), &done, &total));
      }
    };
    for (unsigned i = 1; i < kBatch; ++i) spawn_writer();
    static const char byte = 0;
    co_await uring::nop();  // let the writers start, so every measured turn carries kBatch SQEs
    const thread_cpu start = thread_cpu::now();
    while (state.KeepRunningBatch(kBatch)) {
      if (direct) {
        co_await uring::write_at(slot, uring::const_buffer(&byte, 1), 0);
      } else {
        co_await uring::write_at(fd.get(), uring::const_buffer(&byte, 1), 0);
      }
    }
    thread_cpu::now().report(state, start);
    done = true;
    co_await uring::nop();  // the writers see `done` and end
    co_await uring::close_direct(slot);
  }());
  state.SetItemsProcessed(state.iterations());
}

void BM_raw_plain(benchmark::State& state) { raw_writes(state, false); }
void BM_raw_fixed(benchmark::State& state) { raw_writes(state, true); }
void BM_plain(benchmark::State& state) { executor_writes(state, false); }
void BM_direct(benchmark::State& state) { executor_writes(state, true); }

}  // namespace

BENCHMARK(BM_raw_plain)->Name("direct/raw_plain/32");
BENCHMARK(BM_raw_fixed)->Name("direct/raw_fixed/32");
BENCHMARK(BM_plain)->Name("direct/plain/32");
BENCHMARK(BM_direct)->Name("direct/direct/32");
