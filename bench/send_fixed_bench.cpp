// Sends from registered buffers against plain ones, copying and zero-copy, over loopback TCP, each through
// our executor and through raw liburing doing the same work (items = sends of `size` bytes in full):
//   send_fixed/raw_send        IORING_OP_SEND, looped on short sends: the baseline
//   send_fixed/raw_zc          IORING_OP_SEND_ZC, each send waited to its notification
//   send_fixed/raw_zc_fixed    IORING_OP_SEND_ZC with IORING_RECVSEND_FIXED_BUF
//   send_fixed/raw_send_fixed  IORING_OP_SEND with IORING_RECVSEND_FIXED_BUF
//   send_fixed/uring_*         the same through the executor: tcp_stream::write_some, tcp_stream::send_zc,
//                              uring::send_zc_fixed, uring::send_fixed
// Every variant sends from the same page-aligned memory, registered as buffer 0, and waits for each send
// before the next (one SQE per enter, as the executor does with one sender). A plain thread reads the
// other end into 1 MiB. A kernel that refuses a variant (a plain send from a registered buffer, up to
// 6.18 at least) skips it with its errno.
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "loopback.hpp"
#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

enum class how { send, zc, zc_fixed, send_fixed };

bool zero_copy(how h) { return h == how::zc || h == how::zc_fixed; }

void count(benchmark::State& state, std::size_t size) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(size));
}

// One send of `len` bytes at `p` from raw liburing, waited to its last completion (the notification of
// a zero-copy send): the bytes sent, or -errno.
int raw_send(io_uring& ring, int fd, const std::byte* p, std::size_t len, how h) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  const auto n = static_cast<unsigned>(len);
  switch (h) {
    case how::send:
    case how::send_fixed:
      io_uring_prep_send(sqe, fd, p, n, MSG_NOSIGNAL);
      if (h == how::send_fixed) {
        sqe->ioprio |= IORING_RECVSEND_FIXED_BUF;
        sqe->buf_index = 0;
      }
      break;
    case how::zc:
      io_uring_prep_send_zc(sqe, fd, p, n, MSG_NOSIGNAL, 0);
      break;
    case how::zc_fixed:
      io_uring_prep_send_zc_fixed(sqe, fd, p, n, MSG_NOSIGNAL, 0, 0);
      break;
  }
  io_uring_submit_and_wait(&ring, 1);
  int res = 0;
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) throw std::runtime_error("io_uring_wait_cqe");
    const unsigned flags = cqe->flags;
    if ((flags & IORING_CQE_F_NOTIF) == 0) res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if ((flags & IORING_CQE_F_MORE) == 0) return res;
  }
}

void raw_sends(benchmark::State& state, how h) {
  const auto size = static_cast<std::size_t>(state.range(0));
  auto [out, in] = uring::bench::tcp_pair();
  std::thread reader = uring::bench::drain(in);
  io_uring ring;
  io_uring_params params{};
  params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(8, &ring, &params) != 0) throw std::runtime_error("io_uring_queue_init");
  if (io_uring_register_ring_fd(&ring) != 1) throw std::runtime_error("io_uring_register_ring_fd");
  auto* buf = static_cast<std::byte*>(std::aligned_alloc(4096, size));
  std::memset(buf, 'z', size);
  const iovec iov{buf, size};
  if (io_uring_register_buffers(&ring, &iov, 1) != 0)
    throw std::runtime_error("io_uring_register_buffers (RLIMIT_MEMLOCK?)");
  // One byte first, outside the clock: a kernel that refuses the variant says so here.
  if (const int r = raw_send(ring, out, buf, 1, h); r < 0) {
    state.SkipWithError((std::string("refused by the kernel: ") + std::strerror(-r)).c_str());
  } else {
    const thread_cpu start = thread_cpu::now();
    for (auto _ : state) {
      for (std::size_t done = 0; done < size;) {
        const int sent = raw_send(ring, out, buf + done, size - done, h);
        if (sent <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(-sent));
        done += static_cast<std::size_t>(sent);
      }
    }
    thread_cpu::now().report(state, start);
  }
  ::shutdown(out, SHUT_WR);
  reader.join();
  ::close(out);
  io_uring_queue_exit(&ring);
  std::free(buf);
  count(state, size);
}

uring::task<void> executor_sends(benchmark::State& state, const uring::net::tcp_stream* s, std::size_t size,
                                 how h) {
  uring::fixed_buffers bufs = co_await uring::register_buffers(1, size);
  const uring::fixed_buffer lease = co_await bufs.lease();
  std::memset(lease.data(), 'z', size);
  const int fd = s->fd();
  if (h == how::send_fixed) {
    if (const auto r = co_await uring::send_fixed(fd, lease.slice(0, 1)).nothrow(); !r) {
      state.SkipWithError((std::string("refused by the kernel: ") + r.error().message()).c_str());
      co_await s->shutdown(SHUT_WR);
      co_return;
    }
  }
  const thread_cpu start = thread_cpu::now();
  for (auto _ : state) {
    for (std::size_t done = 0; done < size;) {
      const uring::fixed_slice rest = lease.slice(done, size - done);
      switch (h) {
        case how::send:
          done += co_await s->write_some({rest.data, rest.size});
          break;
        case how::zc:
          done += co_await s->send_zc({rest.data, rest.size});
          break;
        case how::zc_fixed:
          done += co_await uring::send_zc_fixed(fd, rest);
          break;
        case how::send_fixed:
          done += co_await uring::send_fixed(fd, rest);
          break;
      }
    }
  }
  thread_cpu::now().report(state, start);
  co_await s->shutdown(SHUT_WR);
}

void uring_sends(benchmark::State& state, how h) {
  const auto size = static_cast<std::size_t>(state.range(0));
  auto [out, in] = uring::bench::tcp_pair();
  std::thread reader = uring::bench::drain(in);
  {
    uring::executor ex;
    if (zero_copy(h) && !ex.plan().send_zc) state.SkipWithError("no zero-copy send on this executor");
    const uring::net::tcp_stream s(out);
    if (!state.error_occurred()) ex.run(executor_sends(state, &s, size, h));
  }
  reader.join();
  count(state, size);
}

void BM_raw_send(benchmark::State& state) { raw_sends(state, how::send); }
void BM_raw_zc(benchmark::State& state) { raw_sends(state, how::zc); }
void BM_raw_zc_fixed(benchmark::State& state) { raw_sends(state, how::zc_fixed); }
void BM_raw_send_fixed(benchmark::State& state) { raw_sends(state, how::send_fixed); }
void BM_uring_send(benchmark::State& state) { uring_sends(state, how::send); }
void BM_uring_zc(benchmark::State& state) { uring_sends(state, how::zc); }
void BM_uring_zc_fixed(benchmark::State& state) { uring_sends(state, how::zc_fixed); }
void BM_uring_send_fixed(benchmark::State& state) { uring_sends(state, how::send_fixed); }

void sizes(benchmark::internal::Benchmark* b) {
  for (int kib : {4, 64, 256, 1024}) b->Arg(kib * 1024);
  b->UseRealTime();
}

}  // namespace

BENCHMARK(BM_raw_send)->Name("send_fixed/raw_send")->Apply(sizes);
BENCHMARK(BM_raw_zc)->Name("send_fixed/raw_zc")->Apply(sizes);
BENCHMARK(BM_raw_zc_fixed)->Name("send_fixed/raw_zc_fixed")->Apply(sizes);
BENCHMARK(BM_raw_send_fixed)->Name("send_fixed/raw_send_fixed")->Apply(sizes);
BENCHMARK(BM_uring_send)->Name("send_fixed/uring_send")->Apply(sizes);
BENCHMARK(BM_uring_zc)->Name("send_fixed/uring_zc")->Apply(sizes);
BENCHMARK(BM_uring_zc_fixed)->Name("send_fixed/uring_zc_fixed")->Apply(sizes);
BENCHMARK(BM_uring_send_fixed)->Name("send_fixed/uring_send_fixed")->Apply(sizes);
