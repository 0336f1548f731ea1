// Bulk send throughput over loopback TCP by send size: where zero-copy starts to pay, and so where
// tcp_stream::write_all switches to it (kZeroCopyThreshold, src/net/tcp_stream.cpp).
//   copy       write_some looped until the buffer is sent (IORING_OP_SEND: the kernel copies the bytes)
//   zc         write_all_zc (IORING_OP_SEND_ZC: the pages are pinned, one extra completion per send)
//   write_all  tcp_stream::write_all, which picks one of the two by size
// One executor on the benchmark thread sends `size` bytes per iteration on one connection; a plain thread
// reads them (recv into 1 MiB) and throws them away. Native backend.
#include <benchmark/benchmark.h>
#include <sys/socket.h>

#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "loopback.hpp"

namespace {

enum class send_mode { copy, zc, write_all };

uring::task<void> sender(benchmark::State& state, const uring::net::tcp_stream* s, const std::string* buf,
                         send_mode mode) {
  for (auto _ : state) {
    switch (mode) {
      case send_mode::copy:
        for (std::size_t done = 0; done < buf->size();) {
          done += co_await s->write_some(std::string_view(*buf).substr(done));
        }
        break;
      case send_mode::zc:
        co_await s->write_all_zc(*buf);
        break;
      case send_mode::write_all:
        co_await s->write_all(*buf);
        break;
    }
  }
  co_await s->shutdown(SHUT_WR);
}

void run(benchmark::State& state, send_mode mode) {
  const auto size = static_cast<std::size_t>(state.range(0));
  auto [out, in] = uring::bench::tcp_pair();
  std::thread reader = uring::bench::drain(in);
  const std::string buf(size, 'z');
  {
    uring::executor ex;
    uring::net::tcp_stream s(out);
    ex.run(sender(state, &s, &buf, mode));
  }
  reader.join();
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

void BM_send_copy(benchmark::State& state) { run(state, send_mode::copy); }
void BM_send_zc(benchmark::State& state) { run(state, send_mode::zc); }
void BM_send_write_all(benchmark::State& state) { run(state, send_mode::write_all); }

void sizes(benchmark::internal::Benchmark* b) {
  for (int kib : {1, 4, 8, 16, 32, 64, 256, 1024}) b->Arg(kib * 1024);
  b->UseRealTime();
}

}  // namespace

BENCHMARK(BM_send_copy)->Name("send/copy")->Apply(sizes);
BENCHMARK(BM_send_zc)->Name("send/zc")->Apply(sizes);
BENCHMARK(BM_send_write_all)->Name("send/write_all")->Apply(sizes);
