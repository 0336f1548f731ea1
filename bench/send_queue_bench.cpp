// Many small messages over loopback TCP (items = 64-byte messages, `batch` of them per round, as responses
// to a batch of pipelined requests), four ways through one executor:
//   send_queue/write_all      one tcp_stream::write_all per message: the baseline
//   send_queue/copy_write     the round's messages copied into one buffer, then one write_all
//   send_queue/queue_bundle   net::send_queue, natively bundled sends from its buffer ring (skipped where
//                             the executor's plan has none)
//   send_queue/queue_sendmsg  net::send_queue with use_ring = false: one sendmsg of the queued buffers
// The queue variants push the round's messages and go on without waiting (flushing once at the end), as a
// server does between reading one batch of requests and the next; the others wait for each write. A plain
// thread reads the other end into 1 MiB.
#include <benchmark/benchmark.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "loopback.hpp"
#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

enum class how { write_all, copy_write, queue_bundle, queue_sendmsg };

constexpr std::size_t kMessage = 64;

uring::task<void> rounds(benchmark::State& state, const uring::net::tcp_stream* s, std::size_t batch, how h) {
  std::string messages(batch * kMessage, 'r');
  for (std::size_t i = 0; i < batch; ++i) messages[i * kMessage] = static_cast<char>('a' + i % 26);
  std::string joined;
  std::optional<uring::net::send_queue> q;
  if (h == how::queue_bundle || h == how::queue_sendmsg) {
    q.emplace(*s, uring::net::send_queue::options{.use_ring = h == how::queue_bundle});
    if (h == how::queue_bundle && !q->uses_bundles()) {
      state.SkipWithError("no bundled sends on this executor");
      co_await s->shutdown(SHUT_WR);
      co_return;
    }
  }
  const thread_cpu start = thread_cpu::now();
  for (auto _ : state) {
    switch (h) {
      case how::write_all:
        for (std::size_t i = 0; i < batch; ++i)
          co_await s->write_all({messages.data() + i * kMessage, kMessage});
        break;
      case how::copy_write:
        joined.clear();
        for (std::size_t i = 0; i < batch; ++i) joined.append(messages.data() + i * kMessage, kMessage);
        co_await s->write_all(joined);
        break;
      case how::queue_bundle:
      case how::queue_sendmsg:
        for (std::size_t i = 0; i < batch; ++i) co_await q->push({messages.data() + i * kMessage, kMessage});
        break;
    }
  }
  if (q) co_await q->flush();
  thread_cpu::now().report(state, start);
  co_await s->shutdown(SHUT_WR);
}

void run(benchmark::State& state, how h) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  auto [out, in] = uring::bench::tcp_pair();
  std::thread reader = uring::bench::drain(in);
  {
    uring::executor ex;
    const uring::net::tcp_stream s(out);
    ex.run(rounds(state, &s, batch, h));
  }
  reader.join();
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(batch * kMessage));
}

void BM_write_all(benchmark::State& state) { run(state, how::write_all); }
void BM_copy_write(benchmark::State& state) { run(state, how::copy_write); }
void BM_queue_bundle(benchmark::State& state) { run(state, how::queue_bundle); }
void BM_queue_sendmsg(benchmark::State& state) { run(state, how::queue_sendmsg); }

void batches(benchmark::internal::Benchmark* b) {
  for (int n : {16, 64}) b->Arg(n);
  b->UseRealTime();
}

}  // namespace

BENCHMARK(BM_write_all)->Name("send_queue/write_all")->Apply(batches);
BENCHMARK(BM_copy_write)->Name("send_queue/copy_write")->Apply(batches);
BENCHMARK(BM_queue_bundle)->Name("send_queue/queue_bundle")->Apply(batches);
BENCHMARK(BM_queue_sendmsg)->Name("send_queue/queue_sendmsg")->Apply(batches);
