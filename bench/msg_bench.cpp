// Cross-thread ping-pong, two threads, one round trip per iteration (both sides sleep between messages,
// so this measures the wake-up path, which costs about the same for every mechanism on a small VM;
// bench/README.md, "Ping-pong"):
//   pingpong/raw_msg_ring   two liburing rings (the executor's default flags), IORING_OP_MSG_RING each
//                           way, each side waiting in enter
//   pingpong/uring_resume   a coroutine hopping between two executors of a group with resume_on, which
//                           travels by MSG_RING between native executors
//   pingpong/uring_resume_mailbox   the same with MSG_RING disabled: mailbox + eventfd wake
// A thread without an executor posting to one (executor::post): a push onto the mailbox, and when it was
// empty a doorbell, either the kernel's (a CQE posted by IORING_REGISTER_SEND_MSG_RING) or, with
// send_msg_ring disabled, the eventfd that the owner keeps a read on:
//   outside_post/mailbox, outside_post/kernel           a stream of posts, the owner counting them
//   outside_post_wake/mailbox, outside_post_wake/kernel one post at a time, the poster waiting for it to run
#include <benchmark/benchmark.h>
#include <liburing.h>

#include <atomic>
#include <latch>
#include <memory>
#include <semaphore>
#include <stdexcept>
#include <thread>

#include <uring/uring.hpp>

#include "pingpong.hpp"

void uring::bench::resume_pingpong(benchmark::State& state, uring::feature_set disable) {
  uring::executor_options opts;
  opts.disable = disable;
  uring::executor_group group(2, opts);
  std::latch done(1);
  uring::spawn(
      group.at(0),
      [](benchmark::State& st, uring::executor& a, uring::executor& b, std::latch& l) -> uring::task<void> {
        for (auto _ : st) {
          co_await uring::resume_on(b);
          co_await uring::resume_on(a);
        }
        l.count_down();
      }(state, group.at(0), group.at(1), done));
  done.wait();
  state.SetItemsProcessed(state.iterations());
}

namespace {

void BM_raw_msg_ring(benchmark::State& state) {
  io_uring a, b;
  // The executor's default setup flags, so that only the library differs.
  io_uring_params pa{}, pb{};
  pa.flags = pb.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  if (io_uring_queue_init_params(8, &a, &pa) != 0 || io_uring_queue_init_params(8, &b, &pb) != 0) {
    throw std::runtime_error("setup");
  }
  const auto rounds = static_cast<std::int64_t>(state.max_iterations);
  std::thread echo([&] {
    io_uring_cqe* cqe;
    for (std::int64_t i = 0; i < rounds; ++i) {
      io_uring_wait_cqe(&b, &cqe);
      io_uring_cqe_seen(&b, cqe);
      io_uring_sqe* sqe = io_uring_get_sqe(&b);
      io_uring_prep_msg_ring(sqe, a.ring_fd, 0, 2, 0);
      sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      io_uring_submit(&b);
    }
  });
  // Both sides on threads started for the measurement, as an executor pair's are: run on the benchmark's
  // own main thread, this side measured 18.5-19.3 us a round trip where a fresh thread took 25.2-25.5
  // (the scheduler places a long-lived thread differently), which said nothing about io_uring.
  std::thread ping([&] {
    io_uring_cqe* cqe;
    for (auto _ : state) {
      io_uring_sqe* sqe = io_uring_get_sqe(&a);
      io_uring_prep_msg_ring(sqe, b.ring_fd, 0, 1, 0);
      sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      io_uring_submit_and_wait(&a, 1);
      io_uring_wait_cqe(&a, &cqe);
      io_uring_cqe_seen(&a, cqe);
    }
  });
  ping.join();
  echo.join();
  state.SetItemsProcessed(state.iterations());
  io_uring_queue_exit(&a);
  io_uring_queue_exit(&b);
}

void BM_uring_resume(benchmark::State& state) { uring::bench::resume_pingpong(state, {}); }
void BM_uring_resume_mailbox(benchmark::State& state) {
  uring::bench::resume_pingpong(state, uring::feature::msg_ring);
}

// One executor on its own thread, its doorbell the kernel's or the eventfd; null (and the benchmark
// skipped) where the kernel has no IORING_REGISTER_SEND_MSG_RING.
std::unique_ptr<uring::executor_group> post_target(benchmark::State& state, bool kernel) {
  uring::executor_options opts;
  opts.disable = kernel ? uring::feature_set{} : uring::feature::send_msg_ring;
  auto group = std::make_unique<uring::executor_group>(1, opts);
  if (kernel && !group->at(0).plan().send_msg_ring) {
    state.SkipWithError("the kernel has no IORING_REGISTER_SEND_MSG_RING");
    return nullptr;
  }
  return group;
}

void BM_outside_post(benchmark::State& state, bool kernel) {
  auto group = post_target(state, kernel);
  if (!group) return;
  std::atomic<std::int64_t> ran{0};
  std::int64_t posted = 0;
  for (auto _ : state) {
    group->at(0).post(
        [&ran] { ran.store(ran.load(std::memory_order_relaxed) + 1, std::memory_order_release); });
    ++posted;
  }
  while (ran.load(std::memory_order_acquire) != posted) std::this_thread::yield();
  state.SetItemsProcessed(state.iterations());
}

void BM_outside_post_wake(benchmark::State& state, bool kernel) {
  auto group = post_target(state, kernel);
  if (!group) return;
  std::binary_semaphore done(0);
  for (auto _ : state) {
    group->at(0).post([&done] { done.release(); });
    done.acquire();
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK_CAPTURE(BM_outside_post, mailbox, false)->Name("outside_post/mailbox/1")->UseRealTime();
BENCHMARK_CAPTURE(BM_outside_post, kernel, true)->Name("outside_post/kernel/1")->UseRealTime();
BENCHMARK_CAPTURE(BM_outside_post_wake, mailbox, false)->Name("outside_post_wake/mailbox/1")->UseRealTime();
BENCHMARK_CAPTURE(BM_outside_post_wake, kernel, true)->Name("outside_post_wake/kernel/1")->UseRealTime();
BENCHMARK(BM_raw_msg_ring)->Name("pingpong/raw_msg_ring/1")->UseRealTime();
BENCHMARK(BM_uring_resume)->Name("pingpong/uring_resume/1")->UseRealTime();
BENCHMARK(BM_uring_resume_mailbox)->Name("pingpong/uring_resume_mailbox/1")->UseRealTime();
