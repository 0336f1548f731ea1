// executor/shutdown.cpp — the shutdown that keeps frames safe: every in-flight operation cancelled and
// its completion drained, posted work run or discarded, and only then the frames freed; an
// executor_group's members free theirs once all have quiesced.
#include <cstdio>
#include <exception>

#include "executor/executor_state.hpp"

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
  for (detail::operation* op = queue.take_all(); op != nullptr;) {
    detail::operation* next = op->next;  // a multishot operation may free itself
    --queue.inflight;
    op->state = detail::op_state::idle;
    if (op->multishot) complete_multishot(*op, detail::completion{0, -ECANCELED, 0});
    op = next;
  }
  try {
    if (backend) backend->flush();  // messages already sent must leave before the ring closes
    if (queue.inflight > 0) {
      backend->cancel_all();
      while (queue.inflight > 0) {
        backend->submit(nullptr, true);
        reap_and_complete();
      }
    }
    // Hand-offs that reached the CQ (or, with DEFER_TASKRUN, the kernel's task list) without being in
    // flight here: posts from threads without an executor own their function, so none may be left.
    // The kernel runs at most 20 deferred items per enter (IO_LOCAL_TW_DEFAULT_MAX): enter until dry.
    for (std::uint64_t seen = ~std::uint64_t{0}; msg_ring_ok && seen != stats.cqes;) {
      seen = stats.cqes;
      backend->submit(nullptr, false);
      reap_and_complete();
    }
  } catch (const std::exception& e) {
    // The ring no longer answers: closing it makes the kernel cancel and reap everything it holds.
    std::fprintf(stderr, "uring: executor shutdown could not drain its ring (%s); closing it\n", e.what());
    doorbell_fd = -1;
    queue.sqes = nullptr;  // no inline path into a closed ring
    queue.update_inline_codes();
    cq = {};
    ring = nullptr;
    backend.reset();
    queue.inflight = 0;
  }
  wake_armed = false;
  run_remote();  // posted work is owner-thread work; none of it may outlive the frames it refers to
}

void executor::impl::release_frames() noexcept {
  queue.set_closed(true);
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

bool executor_access::group_stopping(const executor& ex) noexcept {
  const std::atomic<bool>* stopping = ex.impl_->group_stopping;
  return stopping != nullptr && stopping->load(std::memory_order_acquire);
}

}  // namespace detail

}  // namespace uring
