// A chain of two steps against the same two steps awaited one after the other, and against raw liburing
// (items = pairs of steps, each waited to its end before the next pair):
//   <group>/raw_linked    liburing: the two SQEs linked (IOSQE_IO_LINK), one submit_and_wait: the baseline
//   <group>/raw_unlinked  liburing: one SQE, submit_and_wait, then the other
//   <group>/chain         co_await uring::chain(a, b): linked SQEs in one submit
//   <group>/awaits        co_await a; co_await b;
// Groups: chain_fsync (a `size`-byte write at offset 0 of an unlinked file in /tmp, then its fsync: the
// disk's time), chain_write (two `size`-byte writes at offsets 0 and `size` of it: buffered writes),
// chain_nop (two NOPs: next to no kernel work, so the library's cost shows). Native backend; rings with
// the executor's default flags and a registered ring fd.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

#include <uring/uring.hpp>

#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

enum class steps { fsync, write, nop };

// The two steps' SQEs for raw liburing.
void prep(io_uring_sqe* sqe, steps s, unsigned which, int fd, const std::vector<char>& buf) {
  if (s == steps::nop) {
    io_uring_prep_nop(sqe);
  } else if (which == 0 || s == steps::write) {
    io_uring_prep_write(sqe, fd, buf.data(), static_cast<unsigned>(buf.size()), which * buf.size());
  } else {
    io_uring_prep_fsync(sqe, fd, 0);
  }
}

// The result a step must have: the byte count for a write, 0 otherwise.
int expected(steps s, unsigned which, std::size_t size) {
  return s == steps::nop || (s == steps::fsync && which == 1) ? 0 : static_cast<int>(size);
}

int scratch_file() {
  const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("open(O_TMPFILE)");
  return fd;
}

void raw_pairs(benchmark::State& state, steps s, bool linked) {
  const std::vector<char> buf(static_cast<std::size_t>(state.range(0)), 'c');
  const int fd = scratch_file();
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(8, &ring, &params) != 0) throw std::runtime_error("io_uring_queue_init");
  if (io_uring_register_ring_fd(&ring) != 1) throw std::runtime_error("io_uring_register_ring_fd");
  auto reap = [&](unsigned which) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring, &cqe) != 0 || cqe->res != expected(s, which, buf.size()))
      throw std::runtime_error("a step failed");
    io_uring_cqe_seen(&ring, cqe);
  };
  const thread_cpu start = thread_cpu::now();
  for (auto _ : state) {
    if (linked) {
      io_uring_sqe* first = io_uring_get_sqe(&ring);
      prep(first, s, 0, fd, buf);
      first->flags |= IOSQE_IO_LINK;
      prep(io_uring_get_sqe(&ring), s, 1, fd, buf);
      io_uring_submit_and_wait(&ring, 2);
      reap(0);
      reap(1);
    } else {
      for (unsigned which = 0; which < 2; ++which) {
        prep(io_uring_get_sqe(&ring), s, which, fd, buf);
        io_uring_submit_and_wait(&ring, 1);
        reap(which);
      }
    }
  }
  thread_cpu::now().report(state, start);
  state.SetItemsProcessed(state.iterations());
  io_uring_queue_exit(&ring);
  ::close(fd);
}

uring::task<void> executor_pairs(benchmark::State& state, int fd, steps s, bool chained) {
  const std::vector<char> buf(static_cast<std::size_t>(state.range(0)), 'c');
  const std::size_t n = buf.size();
  const thread_cpu start = thread_cpu::now();
  for (auto _ : state) {
    switch (s) {
      case steps::fsync:
        if (chained) {
          co_await uring::chain(uring::write_at(fd, buf, 0), uring::fsync(fd));
        } else {
          if (co_await uring::write_at(fd, buf, 0) != n) throw std::runtime_error("short write");
          co_await uring::fsync(fd);
        }
        break;
      case steps::write:
        if (chained) {
          co_await uring::chain(uring::write_at(fd, buf, 0), uring::write_at(fd, buf, n));
        } else if (co_await uring::write_at(fd, buf, 0) != n || co_await uring::write_at(fd, buf, n) != n) {
          throw std::runtime_error("short write");
        }
        break;
      case steps::nop:
        if (chained) {
          co_await uring::chain(uring::nop(), uring::nop());
        } else {
          co_await uring::nop();
          co_await uring::nop();
        }
        break;
    }
  }
  thread_cpu::now().report(state, start);
}

void uring_pairs(benchmark::State& state, steps s, bool chained) {
  const int fd = scratch_file();
  {
    uring::executor ex;
    ex.run(executor_pairs(state, fd, s, chained));
  }
  state.SetItemsProcessed(state.iterations());
  ::close(fd);
}

enum class way { raw_linked, raw_unlinked, chain, awaits };

template <steps S, way W>
void BM_pairs(benchmark::State& state) {
  if constexpr (W == way::raw_linked || W == way::raw_unlinked) {
    raw_pairs(state, S, W == way::raw_linked);
  } else {
    uring_pairs(state, S, W == way::chain);
  }
}

}  // namespace

BENCHMARK(BM_pairs<steps::fsync, way::raw_linked>)->Name("chain_fsync/raw_linked")->Arg(4096)->UseRealTime();
BENCHMARK(BM_pairs<steps::fsync, way::raw_unlinked>)
    ->Name("chain_fsync/raw_unlinked")
    ->Arg(4096)
    ->UseRealTime();
BENCHMARK(BM_pairs<steps::fsync, way::chain>)->Name("chain_fsync/chain")->Arg(4096)->UseRealTime();
BENCHMARK(BM_pairs<steps::fsync, way::awaits>)->Name("chain_fsync/awaits")->Arg(4096)->UseRealTime();
BENCHMARK(BM_pairs<steps::write, way::raw_linked>)->Name("chain_write/raw_linked")->Arg(512)->UseRealTime();
BENCHMARK(BM_pairs<steps::write, way::raw_unlinked>)
    ->Name("chain_write/raw_unlinked")
    ->Arg(512)
    ->UseRealTime();
BENCHMARK(BM_pairs<steps::write, way::chain>)->Name("chain_write/chain")->Arg(512)->UseRealTime();
BENCHMARK(BM_pairs<steps::write, way::awaits>)->Name("chain_write/awaits")->Arg(512)->UseRealTime();
BENCHMARK(BM_pairs<steps::nop, way::raw_linked>)->Name("chain_nop/raw_linked")->Arg(0)->UseRealTime();
BENCHMARK(BM_pairs<steps::nop, way::raw_unlinked>)->Name("chain_nop/raw_unlinked")->Arg(0)->UseRealTime();
BENCHMARK(BM_pairs<steps::nop, way::chain>)->Name("chain_nop/chain")->Arg(0)->UseRealTime();
BENCHMARK(BM_pairs<steps::nop, way::awaits>)->Name("chain_nop/awaits")->Arg(0)->UseRealTime();
