// One-way message streams between two threads (items = messages):
//   stream/raw_msg_ring    two liburing rings (the executor's default flags, SUBMIT_ALL|COOP_TASKRUN):
//                          the sender queues MSG_RINGs (CQE_SKIP_SUCCESS) and submits
//                          64 per enter, the receiver waits for CQEs and checks each message's order; an
//                          atomic count of what was reaped keeps at most 1024 in flight (what our credit
//                          window does)
//   stream/uring_send      uring::send from a coroutine on one executor to an inbox on another, which
//                          checks each message's order
//   stream/uring_send_mailbox   the same with MSG_RING disabled (mailbox + eventfd)
//   stream/uring_send_emulated  both executors on the emulated backend
#include <benchmark/benchmark.h>
#include <liburing.h>

#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>

#include <uring/uring.hpp>

#include "thread_cpu.hpp"

namespace {

using uring::bench::thread_cpu;

constexpr unsigned kWindow = 1024;
constexpr unsigned kBatch = 64;

void BM_raw_stream(benchmark::State& state) {
  // The executor's default setup flags on both rings, so that only the library differs.
  io_uring tx, rx;
  io_uring_params p{};
  p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  io_uring_params q = p;
  q.flags |= IORING_SETUP_CQSIZE;
  q.cq_entries = 4096;
  if (io_uring_queue_init_params(256, &tx, &p) != 0 || io_uring_queue_init_params(256, &rx, &q) != 0) {
    throw std::runtime_error("io_uring_queue_init");
  }
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::atomic<std::uint64_t> reaped{0};
  std::uint64_t rx_waits = 0;  // waits that found the CQ empty, so entered the kernel
  bool in_order = true;
  std::thread receiver([&] {
    std::uint64_t got = 0;
    io_uring_cqe* cqe;
    while (got < total) {
      if (io_uring_peek_cqe(&rx, &cqe) != 0) {
        ++rx_waits;
        io_uring_wait_cqe(&rx, &cqe);
      }
      // Each message is read and checked, as the inbox receiver below (and bidir/raw_msg_ring) does: a
      // receiver that never touched the CQEs would leave their cache lines to the sending thread.
      unsigned head, n = 0;
      io_uring_for_each_cqe(&rx, head, cqe) {
        in_order = in_order && cqe->user_data == got + n && cqe->res == 1;
        ++n;
      }
      io_uring_cq_advance(&rx, n);
      got += n;
      reaped.store(got, std::memory_order_release);
    }
  });
  // The sender on a thread of its own too, as an executor pair's are (see pingpong/raw_msg_ring).
  std::thread sender([&] {
    std::uint64_t sent = 0;
    const thread_cpu start = thread_cpu::now();
    while (state.KeepRunningBatch(kBatch)) {
      while (sent + kBatch - reaped.load(std::memory_order_acquire) > kWindow) std::this_thread::yield();
      for (unsigned i = 0; i < kBatch; ++i) {
        io_uring_sqe* sqe = io_uring_get_sqe(&tx);
        io_uring_prep_msg_ring(sqe, rx.ring_fd, 1, sent + i, 0);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      }
      io_uring_submit(&tx);
      sent += kBatch;
    }
    // The receiver expects max_iterations; KeepRunningBatch may stop short or go past it.
    while (sent < total) {
      io_uring_sqe* sqe = io_uring_get_sqe(&tx);
      io_uring_prep_msg_ring(sqe, rx.ring_fd, 1, sent++, 0);
      sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      io_uring_submit(&tx);
    }
    thread_cpu::now().report(state, start, "tx_");
  });
  sender.join();
  receiver.join();
  if (!in_order) state.SkipWithError("messages lost or out of order");
  state.SetItemsProcessed(state.iterations());
  state.counters["rx_enters_per_msg"] =
      static_cast<double>(rx_waits) / static_cast<double>(state.iterations());
  io_uring_queue_exit(&tx);
  io_uring_queue_exit(&rx);
}

uring::task<void> drain(std::uint64_t n, std::latch& done, bool& in_order) {
  uring::inbox in(*uring::executor::current());
  for (std::uint64_t i = 0; i < n; ++i) {
    const uring::message m = co_await in.receive();
    in_order = in_order && m.data == i && m.value == 1;
  }
  done.count_down();
}

uring::task<void> pour(benchmark::State& state, uring::executor& to, std::latch& done) {
  std::uint64_t sent = 0;
  const thread_cpu start = thread_cpu::now();
  while (state.KeepRunningBatch(kBatch)) {
    for (unsigned i = 0; i < kBatch; ++i) co_await uring::send(to, 1, sent++);
  }
  while (sent < static_cast<std::uint64_t>(state.max_iterations)) co_await uring::send(to, 1, sent++);
  thread_cpu::now().report(state, start, "tx_");
  done.count_down();
}

void uring_stream(benchmark::State& state, uring::executor_options opts) {
  opts.message_window = kWindow;
  uring::executor_group group(2, opts);
  std::latch done(2);
  bool in_order = true;  // written on the receiver's thread, read here after done.wait()
  uring::spawn(group.at(1), drain(static_cast<std::uint64_t>(state.max_iterations), done, in_order));
  uring::spawn(group.at(0), pour(state, group.at(1), done));
  done.wait();
  if (!in_order) state.SkipWithError("messages lost or out of order");
  state.SetItemsProcessed(state.iterations());
  group.stop();
  group.join();  // the executors' stats are read on this thread: only once their loops have ended
  const double n = static_cast<double>(state.iterations());
  state.counters["rx_enters_per_msg"] = static_cast<double>(group.at(1).stats().enters) / n;
  state.counters["rx_waits_per_msg"] = static_cast<double>(group.at(1).stats().waits) / n;
  state.counters["tx_enters_per_msg"] = static_cast<double>(group.at(0).stats().enters) / n;
  state.counters["tx_doorbells_per_msg"] = static_cast<double>(group.at(0).stats().doorbells) / n;
}

void BM_uring_stream(benchmark::State& state) { uring_stream(state, {}); }
void BM_uring_stream_mailbox(benchmark::State& state) {
  uring::executor_options o;
  o.disable = uring::feature::msg_ring;
  uring_stream(state, o);
}
void BM_uring_stream_emulated(benchmark::State& state) {
  uring::executor_options o;
  o.backend = uring::backend_kind::emulated;
  uring_stream(state, o);
}

}  // namespace

BENCHMARK(BM_raw_stream)->Name("stream/raw_msg_ring/64")->UseRealTime();
BENCHMARK(BM_uring_stream)->Name("stream/uring_send/64")->UseRealTime();
BENCHMARK(BM_uring_stream_mailbox)->Name("stream/uring_send_mailbox/64")->UseRealTime();
BENCHMARK(BM_uring_stream_emulated)->Name("stream/uring_send_emulated/64")->UseRealTime();
