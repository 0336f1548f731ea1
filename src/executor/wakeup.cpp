// executor/wakeup.cpp — work posted from other threads: the remote queue, waking a sleeping owner (the
// doorbell or its eventfd), stop(), and refusing posts once the executor no longer drains them.
#include <mutex>

#include "executor/executor_state.hpp"

namespace uring {

void executor::impl::on_wake(detail::operation* op) noexcept {
  // Re-armed the next time the loop is about to sleep.
  static_cast<wake_op*>(op)->owner->wake_armed = false;
}

void executor::impl::arm_wake() {
  if (wake_armed) return;
  wake_read.complete = &on_wake;
  wake_read.owner = this;
  wake_read.request = {
      .code = detail::op_code::read, .fd = wake_fd, .len = sizeof wake_value, .addr = &wake_value};
  queue.push(wake_read);
  wake_armed = true;
}

void executor::impl::run_remote() noexcept {
  detail::remote_node* n = remote.take_all();
  const std::uint32_t now =
      keeping_histograms && n != nullptr ? fine_now_us() : 0;  // after the posts: never before
  for (; n != nullptr;) {
    detail::remote_node* next = n->next;  // run() may let the poster free the node
    if (keeping_histograms) [[unlikely]]
      note_hop(*n, now);
    if (queue.closed && n->discard != nullptr) {
      n->discard(n);
    } else {
      n->run(n);
    }
    n = next;
  }
}

void executor::impl::refuse_posts() {
  std::lock_guard lock(post_mutex);
  refusing_posts = true;
  refusing_messages.store(true, std::memory_order_release);
}

void executor::impl::wake() noexcept {
  if (doorbell_fd < 0 || detail::send_msg_ring_from_anywhere(doorbell_fd, detail::kDoorbellTag) != 0)
    signal(wake_fd);
  if (int n = notify_fd.load(std::memory_order_acquire); n >= 0) signal(n);  // a foreign loop may drive us
}

// An owner that is awake runs its mailbox before it sleeps (submit_and_maybe_sleep): waking it would cost a
// syscall here and a completion there for nothing.
void executor::impl::wake_if_sleeping() noexcept {
  if (sleeping.load(std::memory_order_seq_cst)) {
    wake();
  } else if (int n = notify_fd.load(std::memory_order_acquire); n >= 0) {
    signal(n);  // a foreign loop sleeps in its own wait, which `sleeping` does not tell
  }
}

void executor::stop() noexcept {
  impl_->stop_requested.store(true, std::memory_order_seq_cst);
  impl_->wake();  // rare enough to wake unconditionally
}

namespace detail {

void executor_access::post_remote(executor& ex, remote_node& node) noexcept {
  node.sent_us = 0;
  auto& im = *ex.impl_;
  if (im.remote.push(node)) im.wake_if_sleeping();
}

void executor_access::drain_remote(executor& ex) noexcept { ex.impl_->run_remote(); }

bool executor_access::try_post(executor& ex, remote_node& node) noexcept {
  node.sent_us = 0;  // timed only as sent by an executor (send)
  return post_node(ex, node);
}

bool executor_access::post_node(executor& ex, remote_node& node) noexcept {
  auto& im = *ex.impl_;
  std::lock_guard lock(im.post_mutex);
  if (im.refusing_posts) return false;
  if (im.remote.push(node)) im.wake_if_sleeping();
  return true;
}

void executor_access::reopen_posts(executor& ex) noexcept {
  auto& im = *ex.impl_;
  if (im.group_stopping != nullptr || im.quiesced_final) return;  // a group member's refusal is for good
  std::lock_guard lock(im.post_mutex);
  im.refusing_posts = false;
  im.refusing_messages.store(false, std::memory_order_release);
}

bool executor_access::try_post_home(executor& home, remote_node& node) noexcept {
  return !group_stopping(home) && try_post(home, node);
}

bool executor_access::asleep(const executor& ex) noexcept {
  return ex.impl_->sleeping.load(std::memory_order_relaxed);
}

}  // namespace detail

}  // namespace uring
