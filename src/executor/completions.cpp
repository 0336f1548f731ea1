// executor/completions.cpp — reaping the CQ and dispatching each completion: an operation's final one
// (the common case, told apart in one test), a message between executors, one of the library's own
// requests, or a multishot operation's.
#include "executor/executor_state.hpp"

namespace uring {

namespace {
// The kernel's work between two turns evicts most coroutine frames from L1: the batch's operations
// (which sit in those frames) are fetched as the batch is copied, before the first one is resumed. A
// raw message's user_data is the user's 64 bits, not an address: prefetching it cost the receiver a
// page walk per message (bench/README.md, "Raw messages"), so it is skipped.
void prefetch_target(const detail::completion& c) noexcept {
  if (!(c.flags & detail::kRawMessageFlag))
    __builtin_prefetch(reinterpret_cast<const void*>(c.user_data & ~detail::kTagMask));
}
}  // namespace

// A CQE that carries a hand-off rather than an operation's completion.
void executor::impl::on_message_cqe(const detail::completion& c) noexcept {
  auto* node = reinterpret_cast<detail::remote_node*>(c.user_data & ~detail::kTagMask);
  const std::uint64_t tag = c.user_data & detail::kTagMask;
  if (tag == detail::kDoorbellTag) {
    ++stats.doorbells;  // the mailbox is drained every turn: waking up was the point
  } else if (tag == detail::kMessageTag) {
    ++stats.messages_received;
    detail::annotate_acquire(node);
    if (keeping_histograms) [[unlikely]]
      note_hop(*node, reap_us);
    node->res = c.res;
    if (queue.closed && node->discard != nullptr) {
      node->discard(node);
    } else {
      node->run(node);
    }
  } else if (tag == detail::kBufferTag) {
    if (buffer_released != nullptr) buffer_released(buffer_set, c.user_data >> 3);
  } else if (tag == detail::kRawSendFailedTag) {
    hub->on_failed(static_cast<std::uint32_t>(c.user_data >> 3));
  } else if (c.res < 0 && node->target != nullptr) {
    // Our MSG_RING failed (the target's ring refused it): never lose it, take the mailbox road.
    if (!detail::executor_access::try_post(*node->target, *node) && node->discard != nullptr)
      node->discard(node);
  }
}

void executor::impl::on_raw_cqe(const detail::completion& c) noexcept {
  hub->deliver(c.flags >> 16, message{c.res, c.user_data});
}

// Completes every available completion. During shutdown the completions are only counted: nothing is
// resumed, because the frames are about to be destroyed.
void executor::impl::complete_early() {
  early_batch.swap(early);  // completing one may queue another: it waits for the next turn
  for (detail::operation* op : early_batch) {
    const detail::completion c{reinterpret_cast<std::uint64_t>(op), detail::early_result(op->state), 0};
    dispatch_batch(&c, 1);
  }
  early_batch.clear();
}

void executor::impl::reap_all() {
  if (!early.empty()) [[unlikely]]
    complete_early();
  constexpr unsigned kBatch = 64;
  detail::completion batch[kBatch];
  if (cq.cqes != nullptr) [[likely]] {
    while (cq.backlog->empty()) {
      const unsigned kflags = cq.flags();
      if (cq.empty()) {
        if (!(kflags & cq.more_flags)) return;
        break;  // overflowed or deferred completions: the backend's reap brings them in (and counts)
      }
      if (kflags & cq.overflow_flag) ++stats.cq_overflows;  // once per reap that sees it, as the backend
      const unsigned n = cq.take(batch, kBatch, prefetch_target);
      dispatch_batch(batch, n);
      if (n < kBatch) return;  // what came meanwhile waits for the next turn, as it would anyway
    }
  }
  for (;;) {
    const auto n = static_cast<unsigned>(backend->reap(batch, kBatch));
    for (unsigned i = 0; i < n; ++i) prefetch_target(batch[i]);
    dispatch_batch(batch, n);
    if (n < kBatch) return;
  }
}

// During shutdown every completion takes dispatch_special, decided once per batch: nothing a completion
// runs closes the queue (quiesce runs at the loop's level), and release_frames, which a posted node may
// run, leaves it as it found it.
void executor::impl::dispatch_batch(const detail::completion* batch, unsigned n) {
  stats.cqes += n;
  if (keeping_histograms) [[unlikely]]
    reap_us = fine_now_us();
  detail::op_queue& q = queue;
  if (q.closed) [[unlikely]]
    return dispatch_closed(batch, n);
  for (unsigned i = 0; i < n; ++i) dispatch(q, batch[i]);
}

void executor::impl::dispatch_closed(const detail::completion* batch, unsigned n) {
  for (unsigned i = 0; i < n; ++i) dispatch_special(batch[i]);
}

// One completion of a running executor: an operation's final one (the common case, told apart in one
// test), or a message, one of our own requests (tagged) or a multishot operation's.
void executor::impl::dispatch(detail::op_queue& q, const detail::completion& c) {
  // res and flags as one word: one test of the flags, one store into the operation.
  const std::uint64_t res_and_flags = c.res_and_flags();
  constexpr std::uint64_t kNotFinal = std::uint64_t{detail::kRawMessageFlag | detail::kCqeMore} << 32;
  if ((c.user_data & detail::kTagMask) != 0 || (res_and_flags & kNotFinal) != 0) [[unlikely]] {
    if (c.flags & detail::kRawMessageFlag) return on_raw_cqe(c);  // a stream's every CQE: no call between
    return dispatch_special(c);
  }
  --q.inflight;
  auto* op = reinterpret_cast<detail::operation*>(c.user_data);
  q.delist(*op);
  if (observing) [[unlikely]]
    note_final(*op);
  op->finish(res_and_flags);
}

void executor::impl::dispatch_special(detail::completion c) {
  if (c.flags & detail::kRawMessageFlag) return on_raw_cqe(c);
  if (c.user_data == detail::kOwnRequest) return;  // our own fire-and-forget request
  if ((c.user_data & detail::kTagMask) == detail::kWithdrawnTag) {
    c = {c.user_data & ~detail::kTagMask, -ECANCELED, 0};  // the NOP that took its place: its final one
  } else if (c.user_data & detail::kTagMask) {
    return on_message_cqe(c);
  }
  auto* op = reinterpret_cast<detail::operation*>(c.user_data);
  if (c.flags & detail::kCqeMore) {  // not final: still in flight
    // A cancel can miss a multishot operation between two of its completions (a multishot timeout is off
    // the kernel's list from its expiry until its task work re-arms it): one still delivering after it was
    // cancelled, by its owner or by the shutdown, is cancelled again.
    if ((op->cancel_sent || queue.closed) && backend) backend->cancel(*op);
    return complete_multishot(*op, c);
  }
  --queue.inflight;
  queue.delist(*op);
  if (queue.closed) {
    op->state = detail::op_state::idle;  // drained: its frame may now be freed
    if (op->multishot) complete_multishot(*op, c);
    return;
  }
  if (observing) [[unlikely]]
    note_final(*op);
  op->finish(c.res_and_flags());
}

}  // namespace uring
