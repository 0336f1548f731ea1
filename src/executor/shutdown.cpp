// executor/shutdown.cpp — the shutdown that keeps frames safe: every in-flight operation cancelled and
// its completion drained, posted work run or discarded, and only then the frames freed; an
// executor_group's members free theirs once all have quiesced.
#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>

#include "executor/executor_state.hpp"
#include "net/zc_shutdown.hpp"

namespace uring {

void executor::impl::shutdown() noexcept {
  if (group_stopping != nullptr) {
    refuse_posts();  // before the last drain, so that no accepted post is left behind it
    hub->close();
    quiesce();
    hub->settle();
    quiesced_final = true;
    frames_pending = true;
  } else {
    // Refused from before the last drain until the caller's own frame is gone too (run's task, freed
    // after this returns; executor_access::reopen_posts): a hand-off accepted meanwhile, say a semaphore's
    // grant to a coroutine in that frame, would stay queued and point into freed memory.
    refuse_posts();
    quiesce();
    release_frames();
  }
}

// Cancels and drains every in-flight operation and runs (or discards) what was posted. After it, no
// completion can refer to a frame, so frames may be freed.
void executor::impl::quiesce() noexcept {
  queue.set_closed(true);
  hub->quiesce();
  // Operations awaited this turn never reached the kernel: forget them.
  auto forget = [this](detail::operation* op) {
    --queue.inflight;
    queue.delist(*op);
    op->state = detail::op_state::idle;
    if (op->multishot) complete_multishot(*op, detail::completion{0, -ECANCELED, 0});
  };
  for (detail::operation* op = queue.take_all(); op != nullptr;) {
    detail::operation* next = op->next;  // a multishot operation may free itself
    forget(op);
    op = next;
  }
  for (detail::operation* op : std::exchange(early, {})) forget(op);
  try {
    if (backend) backend->flush();  // messages already sent must leave before the ring closes
    if (queue.inflight > 0) {
      backend->cancel_all();
      drain_cancelled();
    }
    // Hand-offs that reached the CQ (or, with DEFER_TASKRUN, the kernel's task list) without being in
    // flight here: posts from threads without an executor own their function, so none may be left.
    // The kernel runs at most 20 deferred items per enter (IO_LOCAL_TW_DEFAULT_MAX): enter until dry.
    for (std::uint64_t seen = ~std::uint64_t{0}; backend && msg_ring_ok && seen != stats.cqes;) {
      seen = stats.cqes;
      backend->submit(nullptr, false);
      reap_and_complete();
    }
  } catch (const std::exception& e) {
    // The ring no longer answers: closing it makes the kernel cancel and reap everything it holds.
    std::fprintf(stderr, "uring: executor shutdown could not drain its ring (%s); closing it\n", e.what());
    close_ring();
  }
  wake_armed = false;
  run_remote();  // posted work is owner-thread work; none of it may outlive the frames it refers to
}

void executor::impl::close_ring() noexcept {
  doorbell_fd = -1;
  queue.sqes = nullptr;  // no inline path into a closed ring
  queue.update_inline_codes();
  cq = {};
  ring = nullptr;
  backend.reset();
  queue.inflight = 0;
}

// Most cancelled operations complete at once; a zero-copy send's notification ignores the cancel (it
// comes when the peer has read the data). After kShutdownGrace the connections of such sends are reset,
// which frees their pages; if after another grace nothing but such sends is left (a connection closed
// meanwhile), the ring is closed: the kernel ends them alone, keeping their pages pinned, and no
// completion can reach our memory any more. Anything else still in flight is waited for, as it may still
// write into a frame.
void executor::impl::drain_cancelled() {
  static constexpr auto kShutdownGrace = std::chrono::seconds(1);
  detail::timespec64 at{};
  struct grace_timer : detail::operation {
  } timer;
  auto deadline = std::chrono::steady_clock::time_point::min();
  // False once a timer ended before its time (an op allowlist refused it): then wait as long as it takes.
  bool timed = true;
  for (int graces = 0;;) {
    const bool timing = timer.state != detail::op_state::idle;
    if (queue.inflight == (timing ? 1u : 0u)) break;
    if (!timing && timed && std::chrono::steady_clock::now() < deadline) timed = false;
    if (!timing && timed) {
      if (graces == 1) detail::reset_zero_copy_sends(*self);
      if (graces >= 2 && detail::zero_copy_sends_waiting(*self) == queue.inflight) {
        std::fprintf(stderr, "uring: executor shutdown closes its ring without %zu zero-copy notifications\n",
                     queue.inflight);
        close_ring();
        detail::orphan_zero_copy_sends(*self);
        return;
      }
      ++graces;
      deadline = std::chrono::steady_clock::now() + kShutdownGrace;
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
      at = detail::timespec_of_ns(ns);
      timer.request = {.code = detail::op_code::timeout, .op_flags = detail::kTimeoutAbsolute, .addr = &at};
      queue.push(timer);
    }
    submit(true);
    reap_and_complete();
  }
  if (timer.state == detail::op_state::idle) return;
  backend->cancel(timer);
  while (timer.state != detail::op_state::idle) {
    backend->submit(nullptr, true);
    reap_and_complete();
  }
}

void executor::impl::release_frames() noexcept {
  queue.set_closed(true);
  queue.live.reset();  // what is still listed (an orphaned zero-copy send) may sit in a frame freed here
  while (spawned.next != &spawned) {
    detail::spawn_node* node = spawned.next;
    unlink(*node);
    node->frame.destroy();
  }
  ready.clear();
  hub->forget_waiters();
  frames_pending = false;
  queue.set_closed(backend == nullptr);  // a closed ring stays closed
}

namespace detail {

bool executor_access::in_group(const executor& ex) noexcept { return ex.impl_->group_stopping != nullptr; }

bool executor_access::group_stopping(const executor& ex) noexcept {
  const std::atomic<bool>* stopping = ex.impl_->group_stopping;
  return stopping != nullptr && stopping->load(std::memory_order_acquire);
}

}  // namespace detail

}  // namespace uring
