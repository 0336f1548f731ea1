// Registered buffers against plain ones: reads of a file in the page cache (items = reads of `size`
// bytes, one per enter, offsets stepping through a 16 MiB file).
//   fixed_read/raw_read    raw liburing, IORING_OP_READ into a plain buffer: baseline
//   fixed_read/raw_fixed   raw liburing, IORING_OP_READ_FIXED from a registered buffer
//   fixed_read/plain       our executor: co_await uring::read_at(fd, buffer, offset)
//   fixed_read/fixed       our executor: co_await uring::read_fixed(fd, lease, offset)
// A registered buffer's pages are pinned once at registration; a plain read pins and unpins (or copies
// through) the user pages on every call, which is what the ratio measures as the size grows.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include <uring/uring.hpp>

#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

constexpr std::size_t kFileSize = std::size_t{16} << 20;

// An unlinked 16 MiB file, written and read once so that every page is in the page cache.
int cached_file() {
  const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("open(O_TMPFILE)");
  std::vector<char> chunk(1 << 20, 'x');
  for (std::size_t done = 0; done < kFileSize; done += chunk.size()) {
    if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(done)) !=
        static_cast<ssize_t>(chunk.size()))
      throw std::runtime_error("pwrite");
  }
  for (std::size_t done = 0; done < kFileSize; done += chunk.size())
    (void)::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(done));
  return fd;
}

std::uint64_t next_offset(std::uint64_t at, std::size_t size) { return (at + size) % kFileSize; }

void raw_reads(benchmark::State& state, bool fixed) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const int fd = cached_file();
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(8, &ring, &params) != 0) throw std::runtime_error("io_uring_queue_init");
  void* buf = std::aligned_alloc(4096, size);
  const iovec iov{buf, size};
  if (fixed && io_uring_register_buffers(&ring, &iov, 1) != 0)
    throw std::runtime_error("io_uring_register_buffers (RLIMIT_MEMLOCK?)");
  std::uint64_t at = 0;
  const thread_cpu start = thread_cpu::now();
  for (auto _ : state) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (fixed) {
      io_uring_prep_read_fixed(sqe, fd, buf, static_cast<unsigned>(size), at, 0);
    } else {
      io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(size), at);
    }
    io_uring_cqe* cqe = nullptr;
    io_uring_submit_and_wait(&ring, 1);
    if (io_uring_peek_cqe(&ring, &cqe) != 0 || cqe->res != static_cast<int>(size))
      throw std::runtime_error("short read");
    io_uring_cqe_seen(&ring, cqe);
    at = next_offset(at, size);
  }
  thread_cpu::now().report(state, start);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(size));
  io_uring_queue_exit(&ring);
  std::free(buf);
  ::close(fd);
}

void executor_reads(benchmark::State& state, bool fixed) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const int fd = cached_file();
  uring::executor ex;
  ex.run([](benchmark::State& st, int file, std::size_t n, bool use_fixed) -> uring::task<void> {
    uring::fixed_buffers bufs = co_await uring::register_buffers(1, n);
    uring::fixed_buffer lease = co_await bufs.lease();
    std::vector<std::byte> plain(n);
    std::uint64_t at = 0;
    const thread_cpu start = thread_cpu::now();
    for (auto _ : st) {
      const std::size_t got =
          use_fixed ? co_await uring::read_fixed(file, lease, at) : co_await uring::read_at(file, plain, at);
      if (got != n) throw std::runtime_error("short read");
      at = next_offset(at, n);
    }
    thread_cpu::now().report(st, start);
  }(state, fd, size, fixed));
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(size));
  ::close(fd);
}

void BM_raw_read(benchmark::State& state) { raw_reads(state, false); }
void BM_raw_fixed(benchmark::State& state) { raw_reads(state, true); }
void BM_plain(benchmark::State& state) { executor_reads(state, false); }
void BM_fixed(benchmark::State& state) { executor_reads(state, true); }

}  // namespace

BENCHMARK(BM_raw_read)->Name("fixed_read/raw_read")->Arg(4096)->Arg(65536)->Arg(1 << 20);
BENCHMARK(BM_raw_fixed)->Name("fixed_read/raw_fixed")->Arg(4096)->Arg(65536)->Arg(1 << 20);
BENCHMARK(BM_plain)->Name("fixed_read/plain")->Arg(4096)->Arg(65536)->Arg(1 << 20);
BENCHMARK(BM_fixed)->Name("fixed_read/fixed")->Arg(4096)->Arg(65536)->Arg(1 << 20);
