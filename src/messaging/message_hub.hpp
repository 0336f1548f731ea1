// message_hub.hpp — an executor's side of raw messages (uring/message.hpp): its inbox, its credit windows
// towards each target, and its place in the process-wide registry of live executors.
//
// Threads: everything here runs on the owning executor's thread, except registry lookups (any thread,
// under the registry's mutex) and the immutable key() and window().
//
// Flow: a sender spends one credit of the (sender, target) pair per message. The receiver counts what it
// hands to receivers per sender and, every window/2 messages, posts that many credits back (a node
// through the sender's mailbox: rare, so its cost does not matter). A message is identified as ours on
// the target's CQ by kRawMessageFlag in its CQE flags, with the sender's key in the upper bits.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "backend/backend.hpp"
#include "uring/executor.hpp"
#include "uring/message.hpp"

namespace uring::detail {

// CQE flags of a raw message: bit 14 marks it (the kernel sets only bits 0-5 and 15 on the CQEs of our
// operations, and the buffer id in 16-31 only with bit 0), bits 16-31 carry the sender's key.
inline constexpr std::uint32_t kRawMessageFlag = 1u << 14;
inline constexpr std::uint64_t kRawSendFailedTag = 3;  // user_data tag: our raw MSG_RING failed

// How raw messages leave and reach an executor, fixed when it is built (executor.cpp).
struct raw_route {
  op_queue* queue = nullptr;  // the executor's SQ, for MSG_RINGs written in place
  bool by_ring = false;       // native, MSG_RING planned, CQE flags passed: raw messages go by MSG_RING
  int ring_fd = -1;
  const std::atomic<bool>* refusing = nullptr;  // set once the executor no longer accepts messages
};

class message_hub {
 public:
  message_hub(executor& self, executor_stats& stats, unsigned window, raw_route route);
  ~message_hub();
  message_hub(const message_hub&) = delete;
  message_hub& operator=(const message_hub&) = delete;

  // This executor's name in the registry: 16 bits, never reused while it lives.
  [[nodiscard]] std::uint32_t key() const noexcept { return key_; }
  // key() plus a generation never reused: what an executor_handle holds.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  // Leaves the registry (idempotent): from then on handles, credits and hand-offs by key no longer find
  // this executor. Its destructor calls it before anything they could touch is freed.
  void leave_registry() noexcept;
  [[nodiscard]] std::uint32_t cqe_flags() const noexcept { return kRawMessageFlag | (key_ << 16); }
  [[nodiscard]] unsigned window() const noexcept { return window_; }

  // Sender side. The common case (a stream to the last target, both rings native, credit left, SQ
  // room) is inline: one MSG_RING written into our SQ, no call.
  // 0 or an errno, as try_send_message.
  [[gnu::always_inline]] int try_send(executor& target, const message& m) noexcept {
    peer& p = &target == last_target_ ? *last_peer_ : peer_for(target);
    if (p.by_ring && p.head == nullptr && p.in_flight < p.window && !p.broken && !route_.queue->closed &&
        !p.refusing->load(std::memory_order_acquire) && write_to_ring(p, m)) [[likely]] {
      ++stats_.raw_messages_sent;
      ++p.in_flight;
      return 0;
    }
    return try_send_slow(p, m);
  }
  void park_sender(executor& target, message_waiter& w);
  void on_credit(std::uint32_t receiver_key, std::uint32_t n) noexcept;
  // The kernel refused one of our MSG_RINGs to that receiver (its ring closed): counted, the pair broken.
  void on_failed(std::uint32_t receiver_key) noexcept;
  void on_closed(std::uint32_t receiver_key, std::uint32_t delivered) noexcept;

  // Receiver side.
  // A sender's first message to this executor: from the sender's thread, before that message. settle()
  // tells every sender it knows, also one none of whose messages arrived before the last drain.
  void add_sender(std::uint32_t sender_key) noexcept;
  void deliver(std::uint32_t sender_key, const message& m) noexcept;
  bool try_receive(message& out) noexcept;
  void park_receiver(message_waiter& w) noexcept;
  // The executor shuts down for good: later sends to it fail ESHUTDOWN (its executor refuses them).
  void close() noexcept;
  // After close() and the ring's last drain: tells each sender how many of its messages arrived and were
  // not yet credited back, so that the sender reports the rest of its window as failed (a send that
  // passed the refusal check but reached the ring after that drain) and its blocked sends fail ESHUTDOWN.
  void settle() noexcept;
  // Shutdown drains the ring: messages still arriving are queued, nobody is resumed.
  void quiesce() noexcept { quiescing_ = true; }
  // The waiting coroutines' frames are being freed: forget them (after quiesce()).
  void forget_waiters() noexcept;

 private:
  struct peer {
    executor* target = nullptr;
    unsigned window = 0;  // the target's message_window (immutable): no call into it per send
    // How to reach the target by MSG_RING (its raw_route, fixed): no call into it per send.
    bool by_ring = false;  // both executors send raw messages by MSG_RING
    int ring_fd = -1;
    std::uint64_t failed_tag = 0;  // user_data of the CQE that comes back if the kernel refuses one
    const std::atomic<bool>* refusing = nullptr;
    std::uint32_t in_flight = 0;
    message_waiter* head = nullptr;  // blocked senders, oldest first
    message_waiter* tail = nullptr;
    std::error_code broken;             // ESHUTDOWN or EPIPE: every later send fails with it
    executor* introduced_to = nullptr;  // the target whose add_sender knows us (a key may be reused)
  };
  struct queued {
    message m;
    std::uint32_t sender;
  };

  [[gnu::noinline]] peer& peer_for(executor& target);
  int try_send_slow(peer& p, const message& m) noexcept;
  // One message to p's target now, credit aside: by MSG_RING where both executors can (into our SQ,
  // submitting first when it is full), else through the target's mailbox. False: the target refuses.
  bool send_now(peer& p, const message& m) noexcept;
  // The MSG_RING itself, written into our SQ; false when the SQ has no room for it (kMessagesPerEnter).
  bool write_to_ring(const peer& p, const message& m) noexcept {
    return write_raw_message(*route_.queue, p.ring_fd, m.value, m.data, cqe_flags(), p.failed_tag);
  }
  void fail_waiters(peer& p) noexcept;
  // One more message from that sender taken off the inbox: every window/2 of them go back as credit. The
  // common case (the same sender as last time, no credit due) inline: the call with the map lookup and
  // the credit's allocation in it saved 7 registers for every message.
  void consumed_from(std::uint32_t sender_key) noexcept {
    if (sender_key != last_sender_ || *last_consumed_ + 1 >= window_ / 2) [[unlikely]] {
      return consume_slow(sender_key);
    }
    ++*last_consumed_;
  }
  [[gnu::noinline]] void consume_slow(std::uint32_t sender_key) noexcept;
  void send_credit(std::uint32_t sender_key, std::uint32_t n, bool closed = false) noexcept;

  executor& self_;
  executor_stats& stats_;
  const unsigned window_;
  const std::uint64_t id_;
  const std::uint32_t key_;
  const raw_route route_;
  bool left_ = false;
  std::unordered_map<std::uint32_t, peer> peers_;  // by target key (references stay valid)
  executor* last_target_ = nullptr;                // a stream sends to one target: skip the lookup
  peer* last_peer_ = nullptr;
  std::uint32_t last_sender_ = ~0u;  // ... and receives from one sender
  std::uint32_t* last_consumed_ = nullptr;
  std::deque<queued> inbox_;
  message_waiter* receivers_head_ = nullptr;
  message_waiter* receivers_tail_ = nullptr;
  std::unordered_map<std::uint32_t, std::uint32_t> consumed_;  // by sender key: taken, not yet credited
  std::mutex senders_mutex_;                                   // add_sender comes from the senders' threads
  std::unordered_set<std::uint32_t> senders_;  // every sender key that ever sent here (16-bit: bounded)
  bool closed_ = false;
  bool settled_ = false;
  bool quiescing_ = false;
};

}  // namespace uring::detail
