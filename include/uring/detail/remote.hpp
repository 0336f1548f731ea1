// uring/detail/remote.hpp — work handed to an executor from any thread.
//
// Provides: detail::remote_node, detail::remote_queue.
// Threads: push() from any thread; take_all() only on the owner thread.
//
// A lock-free multi-producer stack that the owner empties in one exchange and replays oldest first.
// Nodes are intrusive (they live in the poster's memory), so posting allocates nothing; the poster keeps
// a node alive until the owner has run it.
#pragma once

#include <atomic>
#include <cstdint>

namespace uring {
class executor;
}

namespace uring::detail {

struct remote_node {
  using run_fn = void (*)(remote_node* self) noexcept;
  remote_node() noexcept
      : run(nullptr), discard(nullptr), next(nullptr), target(nullptr), res(0), sent_us(0) {}
  // Leaves every field unset: for a node built on a hot path that is mostly never posted (a channel's
  // awaiters, one per value). Its owner sets run and discard before it hands the node over; the queue
  // and the routes set the rest as for any node.
  struct unset_t {};
  explicit remote_node(unset_t) noexcept {}

  run_fn run;
  // What a shutting-down owner does instead of run(), or null to run() anyway. A node that would resume
  // a coroutine must not resume it then (its frame is about to be freed): it gives `discard`.
  run_fn discard;
  remote_node* next;
  // Where the node is going: a message sent through the kernel (MSG_RING) that fails falls back to this
  // executor's mailbox.
  executor* target;
  // The result of the CQE that brought the node by MSG_RING (0 for a plain message; for a direct
  // descriptor sent with IORING_MSG_SEND_FD, the slot it got on this ring).
  std::int32_t res;
  // The sending executor's turn clock (op_queue::now_us) when an executor sent the node to another one,
  // for the receiver's hop histogram; 0 when the sender keeps no latency histograms, or a thread posted.
  std::uint32_t sent_us;
};

// A node's address travels in a CQE's user_data; its low bits say which kind of CQE it is (nodes are
// 8-byte aligned, operations' addresses never have these bits set).
inline constexpr std::uint64_t kMessageTag = 1;     // a message for this ring: run the node
inline constexpr std::uint64_t kSendFailedTag = 2;  // our MSG_RING to another ring failed: use the mailbox
// (3 is message_hub's: a raw message of ours failed.)
inline constexpr std::uint64_t kDoorbellTag = 4;  // no node: a poster woke us up to drain the mailbox
// The whole user_data of the backend's own requests whose completions are ignored (cancels, the
// completion of a linked timeout): tagged like the rest, so one test tells every CQE that is not an
// operation's from one that is.
inline constexpr std::uint64_t kOwnRequest = 5;
// No node: the kernel no longer uses a registered buffer (its tag; uring/fixed_buffers.hpp), named by the
// bits above the tag.
inline constexpr std::uint64_t kBufferTag = 6;
// An operation stopped while its SQE still waited for the turn's enter: the SQE was made a NOP that
// carries this tag, and the operation completes -ECANCELED (op_queue::withdraw).
inline constexpr std::uint64_t kWithdrawnTag = 7;
inline constexpr std::uint64_t kTagMask = 7;

class remote_queue {
 public:
  // Returns true if the queue was empty before (the owner may need a wake-up).
  bool push(remote_node& n) noexcept {
    remote_node* old = head_.load(std::memory_order_relaxed);
    do {
      n.next = old;
    } while (!head_.compare_exchange_weak(old, &n, std::memory_order_seq_cst, std::memory_order_relaxed));
    return old == nullptr;
  }

  // empty(), ordered with the owner's store of its `sleeping` flag (a post either sees the flag or is seen).
  [[nodiscard]] bool empty_ordered() const noexcept {
    return head_.load(std::memory_order_seq_cst) == nullptr;
  }

  // Everything posted so far, oldest first.
  remote_node* take_all() noexcept {
    // A plain load first: the owner calls this every turn, and a locked exchange on an empty queue would
    // cost every turn a few nanoseconds for nothing.
    if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    remote_node* n = head_.exchange(nullptr, std::memory_order_acquire);
    remote_node* reversed = nullptr;
    while (n != nullptr) {
      remote_node* next = n->next;
      n->next = reversed;
      reversed = n;
      n = next;
    }
    return reversed;
  }

  [[nodiscard]] bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == nullptr; }

 private:
  std::atomic<remote_node*> head_{nullptr};
};

}  // namespace uring::detail
