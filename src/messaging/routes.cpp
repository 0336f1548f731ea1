// messaging/routes.cpp — how a hand-off reaches another executor: by the kernel (IORING_OP_MSG_RING
// from this thread's ring) where both executors are native and planned for it, else through the target's
// mailbox; the same roads for direct descriptors and raw messages.
#include <mutex>
#include <new>

#include "executor/executor_state.hpp"

namespace uring::detail {

int executor_core::ring_route(executor* from, executor& to, remote_node& node) noexcept {
  auto& dest = *to.impl_;
  if (from == nullptr || from == &to || !from->impl_->msg_ring_ok || !dest.msg_ring_ok ||
      !from->impl_->backend || from->impl_->queue.closed) {
    return -1;
  }
  {
    std::lock_guard lock(dest.post_mutex);
    if (dest.refusing_posts) return -ESHUTDOWN;
  }
  // Everything read of the target comes before the release: once the message lands, the target may
  // finish and be destroyed (TSan saw this read race with ~executor when it came after).
  const int dest_fd = dest.ring_fd;
  node.target = &to;
  annotate_release(&node);
  return dest_fd;
}

bool executor_access::send(executor& to, remote_node& node) noexcept {
  executor* from = running_executor();
  node.sent_us = from != nullptr ? from->queue_.now_us : 0;  // 0 unless it keeps latency histograms
  const int dest_fd = executor_core::ring_route(from, to, node);
  if (dest_fd == -ESHUTDOWN) return false;
  if (dest_fd < 0) {
    node.target = &to;
    return executor_access::post_node(to, node);
  }
  from->impl_->ring->send_message(dest_fd, reinterpret_cast<std::uint64_t>(&node) | kMessageTag,
                                  reinterpret_cast<std::uint64_t>(&node) | kSendFailedTag);
  ++from->impl_->stats.messages_sent_by_ring;
  return true;
}

void executor_access::flush_send() noexcept {
  executor* ex = running_executor();
  if (ex != nullptr && ex->impl_->backend) ex->impl_->backend->flush_if_alone();
}

int executor_core::direct_route(executor& to, remote_node& node) noexcept {
  if (direct_files(to) == 0) return -ENXIO;  // the kernel would say ENFILE, as for a full table
  const int dest_fd = ring_route(running_executor(), to, node);
  return dest_fd >= 0 ? dest_fd : -1;  // the mailbox road reports a refusal (ESHUTDOWN) itself
}

namespace {
// A raw message through the target's mailbox (no MSG_RING between the two executors).
struct raw_node final : remote_node {
  raw_node(const message& msg, std::uint32_t from) : m(msg), sender(from) {
    run = [](remote_node* n) noexcept {
      auto* self = static_cast<raw_node*>(n);
      executor_core::hub(*self->target).deliver(self->sender, self->m);
      delete self;
    };
    // Accepted before the target stopped: it reaches the inbox even then (delivered, nobody resumed).
    discard = nullptr;
  }
  message m;
  std::uint32_t sender;
};
}  // namespace

bool executor_core::post_raw(executor& from, executor& to, const message& m) noexcept {
  auto* node = new (std::nothrow) raw_node(m, from.impl_->hub->key());
  if (node == nullptr) return false;
  node->target = &to;
  if (!executor_access::try_post(to, *node)) {
    delete node;
    return false;
  }
  return true;
}

}  // namespace uring::detail
