/// @file
/// uring/channel.hpp — a bounded queue of values from any executors (or threads) to one executor.
///
/// Provides: uring::channel<T>.
/// Threads: `co_await send(v)` from a coroutine on any executor; try_send() and close() from any thread,
/// also one with no executor; `co_await receive()` only from coroutines on the receiving executor, one at
/// a time. T must be nothrow move-constructible.
///
/// Ordering: the values of one sender (one coroutine awaiting its sends in turn, or one thread calling
/// try_send in turn) arrive in the order they were sent; senders interleave in no particular order.
/// Back-pressure: at most capacity() values wait in the channel. A send that finds it full suspends its
/// coroutine until the receiver takes a value. (The receiver takes the queued values in one batch under
/// the lock and hands them out without it; the places they free show to senders every capacity/8 values,
/// 1 to 64, or when the batch is used up; while senders are blocked the receiver takes the lock to let
/// them in.) Blocked senders are served first come, first served, and while any is blocked a try_send()
/// fails, so no newcomer overtakes them. A send completes when its value is accepted (queued, or handed
/// to the waiting receiver).
/// Close: close() makes every blocked and every later send throw std::system_error(EPIPE) (their values
/// were not accepted and stay with the sender), and try_send() return false. Every value accepted before
/// is still delivered: receive() yields them, then std::nullopt for good.
///
/// Wake-ups: the payload sits in a queue under a lock (detail::spin_lock: the critical sections are
/// short). Only a party that is parked gets a doorbell: a waiting receiver is resumed by sending a node
/// (living in its awaitable) to the receiving executor; a blocked sender by sending its node to the
/// executor it suspended on. The doorbell rides the waker's ring as a MSG_RING where both executors are
/// native (no syscall of its own: it leaves with the waker's next enter; except that a sleeping sender
/// let into a full channel is woken by an enter at once, see accept_senders), else the target's mailbox
/// (an eventfd write if the target sleeps). Nothing is resumed inline on the waker's thread. Every
/// hand-over (value, space, close) changes the waiter's state and posts its node
/// under the mutex, so each waiter is woken exactly once, and a coroutine whose frame is destroyed (only
/// executor shutdown does that) takes its awaitable out of the channel under the same mutex: no post can
/// then touch its frame. A node posted to an executor that is shutting down is discarded there, not run.
/// If the waiter's executor no longer accepts work, the hand-over is undone: a blocked sender's value is
/// not accepted; a send to a receiver whose executor refuses work throws std::system_error(ESHUTDOWN)
/// (try_send returns false) and keeps its value.
///
/// Lifetime: the receiving executor must outlive the channel. The channel may go while coroutines wait on
/// it (a channel declared after the executor_group it serves, left by an exception before the group
/// stops; or destroyed on an executor's thread): its destructor closes it, so each waiter resumes with
/// EPIPE or std::nullopt whenever its executor runs it (or is freed by that executor's shutdown), and none
/// touches the channel's memory again. It waits for nobody. Code must not use the channel after that.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "uring/detail/prefetch.hpp"
#include "uring/detail/remote.hpp"
#include "uring/detail/spin_lock.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"

namespace uring {

namespace detail {
/// What a channel leaves behind for the coroutines suspended in it: it counts them (plus one for the
/// channel itself) and says whether the channel is still there, so that a waiter resumed or destroyed
/// after the channel went touches only this.
struct channel_life {
  std::atomic<std::uint32_t> refs{1};
  spin_lock lock;  ///< an abandoned waiter unlinks itself under it; ~channel ends `alive` under it
  bool alive = true;
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};
}  // namespace detail

/// A bounded queue of values from any executors (or threads) to one executor. The values of one sender
/// arrive in the order they were sent; at most capacity() values wait, and a send that finds the channel
/// full suspends its coroutine until the receiver takes a value. T must be nothrow move-constructible.
///
/// Threads: `co_await send(v)` from a coroutine on any executor; try_send() and close() from any thread,
/// also one with no executor; `co_await receive()` only from coroutines on the receiving executor, one at
/// a time.
template <class T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>,
                "uring::channel<T>: T must be nothrow movable (a value is moved under the channel's lock)");

 public:
  /// The awaitable returned by send(). It lives in the sending coroutine's frame, holds the value and is
  /// the blocked-sender node.
  class [[nodiscard]] send_awaiter : private detail::remote_node {
   public:
    /// One per value sent: the node's fields are set only if the send blocks (start_send), as most do not.
    send_awaiter(channel& ch, T value) noexcept
        : detail::remote_node(detail::remote_node::unset_t{}), ch_(&ch), value_(std::move(value)) {}
    send_awaiter(const send_awaiter&) = delete;
    send_awaiter& operator=(const send_awaiter&) = delete;
    ~send_awaiter() {
      if (suspended_) abandon(ch_, life_, *this);  // the frame is destroyed while the send waits
    }

    ///@{
    /// The awaiter protocol, called by `co_await`. await_resume throws std::system_error for a failed send
    /// (EPIPE: closed; ESHUTDOWN: the receiving executor no longer accepts work). Most sends complete in
    /// await_ready, without suspending the coroutine (callgrind: 79 -> 74 instructions a send, against a
    /// suspension that returns at once).
    bool await_ready() { return ch_->send_now(*this); }
    bool await_suspend(std::coroutine_handle<> h) { return ch_->start_send(*this, h); }
    void await_resume() {
      if (suspended_) {
        suspended_ = false;
        life_->release();
      }
      if (error_ != 0) {
        throw std::system_error(error_, std::system_category(),
                                error_ == EPIPE
                                    ? "uring::channel::send: the channel is closed"
                                    : "uring::channel::send: the receiving executor no longer accepts work");
      }
    }
    ///@}

   private:
    friend class channel;
    /// idle -> done (accepted or failed at once), or idle -> queued -> done (woken: accepted, or EPIPE).
    enum class state : std::uint8_t { idle, queued, done };

    channel* ch_;
    T value_;
    /// Set when the send blocks.
    send_awaiter* next_;
    send_awaiter* prev_;
    std::coroutine_handle<> handle_;
    executor* executor_;
    int error_ = 0;
    state state_ = state::idle;   ///< guarded by the channel's mutex
    bool suspended_ = false;      ///< the sending coroutine's own: true from suspension to resumption
    detail::channel_life* life_;  ///< set when the send blocks
  };

  /// The awaitable returned by receive(); the parked receiver's node.
  class [[nodiscard]] receive_awaiter : private detail::remote_node {
   public:
    /// One per value received: the node's fields are set only if the receive parks (start_receive).
    explicit receive_awaiter(channel& ch) noexcept
        : detail::remote_node(detail::remote_node::unset_t{}), ch_(&ch) {}
    receive_awaiter(const receive_awaiter&) = delete;
    receive_awaiter& operator=(const receive_awaiter&) = delete;
    ~receive_awaiter() {
      if (suspended_) abandon(ch_, life_, *this);
    }

    ///@{
    /// The awaiter protocol, called by `co_await`.
    bool await_ready() { return ch_->receive_now(*this); }
    bool await_suspend(std::coroutine_handle<> h) { return ch_->start_receive(*this, h); }
    std::optional<T> await_resume() noexcept {
      if (suspended_) {
        suspended_ = false;
        life_->release();
      }
      return std::move(result_);
    }
    ///@}

   private:
    friend class channel;
    channel* ch_;
    std::optional<T> result_;         ///< written by the waker before it posts this node
    std::coroutine_handle<> handle_;  ///< set when the receive parks
    bool suspended_ = false;
    detail::channel_life* life_;  ///< set when the receive parks
  };

  /// Values go to coroutines on `receiver`. Throws std::invalid_argument if capacity is 0.
  channel(executor& receiver, std::size_t capacity)
      : receiver_(receiver), capacity_(capacity), publish_every_(publish_interval(capacity)) {
    if (capacity == 0) {
      delete life_;
      throw std::invalid_argument("uring::channel: capacity must be at least 1");
    }
  }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  /// Closes the channel: its waiters are woken (a blocked send throws EPIPE, a parked receive yields
  /// std::nullopt) and left to resume on their executors' turns; from then on they touch only the
  /// channel's detail::channel_life.
  ~channel() {
    close();
    {
      std::lock_guard lock(life_->lock);  // an abandoning waiter is done with the channel
      life_->alive = false;
    }
    life_->release();
  }

  /// Awaiting it sends `value`: suspends while the channel is full. Throws std::system_error(EPIPE) once
  /// the channel is closed, and std::logic_error if no executor runs on this thread.
  send_awaiter send(T value) noexcept(std::is_nothrow_move_constructible_v<T>) {
    return send_awaiter(*this, std::move(value));
  }

  ///@{
  /// From any thread: accepts `value` if there is room and the channel is open; moves from it only then.
  /// Yields what every try_ form yields (uring::io_result): true when accepted; else -EAGAIN (full, or a
  /// sender waits ahead), -EPIPE (closed) or -ESHUTDOWN (the waiting receiver's executor is gone).
  io_result try_send(T&& value) {
    std::lock_guard lock(mutex_);
    int error = 0;
    if (!offer(value, error)) return io_result{-EAGAIN};
    return io_result{-error};
  }
  io_result try_send(const T& value) {
    T copy(value);
    return try_send(std::move(copy));
  }
  ///@}

  /// Awaiting it yields the next value, or std::nullopt once the channel is closed and drained. Only
  /// from a coroutine on the receiving executor, one receive at a time (std::logic_error otherwise).
  receive_awaiter receive() noexcept { return receive_awaiter(*this); }

  /// From any thread; idempotent. Blocked and later sends fail with EPIPE; accepted values stay.
  void close() noexcept {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    while (head_ != nullptr) {
      send_awaiter& w = *head_;
      unlink(w);
      w.error_ = EPIPE;
      w.state_ = send_awaiter::state::done;
      (void)detail::executor_access::try_post(*w.executor_, w);  // refused: its frame is being destroyed
    }
    if (parked_ != nullptr) {  // parked means drained: it gets nullopt
      receive_awaiter& r = *std::exchange(parked_, nullptr);
      (void)detail::executor_access::try_post(receiver_, r);
    }
  }

  /// The most values that wait in the channel.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// The executor whose coroutines receive.
  [[nodiscard]] executor& receiver() const noexcept { return receiver_; }

 private:
  /// Sender side, before suspending: true when the send is over (accepted, or failed with error_ set);
  /// false when the channel is full, and start_send takes it from there.
  bool send_now(send_awaiter& s) {
    (void)detail::executor_access::current("uring::channel::send");  // throws before any change
    std::lock_guard lock(mutex_);
    return offer(s.value_, s.error_);
  }

  /// Every send's first step, under the mutex: true when it is over, because `value` was accepted (queued,
  /// or handed to the parked receiver) or refused (`error` set: EPIPE closed, ESHUTDOWN the receiver's
  /// executor takes no work); false when the channel is full (also whenever a sender is blocked). Moves
  /// from `value` only when it was accepted.
  bool offer(T& value, int& error) {
    if (closed_) {
      error = EPIPE;
      return true;
    }
    if (parked_ != nullptr) {
      if (!hand_to_receiver(value)) error = ESHUTDOWN;
      return true;
    }
    if (occupied() >= capacity_) return false;
    enqueue(value);
    return true;
  }

  /// Sender side, suspended (the channel was full a moment ago). Returns true when the coroutine stays
  /// suspended.
  bool start_send(send_awaiter& s, std::coroutine_handle<> h) {
    executor& ex = detail::executor_access::current("uring::channel::send");  // throws before linking
    std::lock_guard lock(mutex_);
    s.state_ = send_awaiter::state::done;
    if (offer(s.value_, s.error_)) return false;
    s.state_ = send_awaiter::state::queued;
    s.run = [](detail::remote_node* n) noexcept { static_cast<send_awaiter*>(n)->handle_.resume(); };
    s.discard = [](detail::remote_node*) noexcept {};  // the shutting-down executor frees the frame itself
    s.executor_ = &ex;
    s.handle_ = h;
    s.suspended_ = true;
    s.life_ = life_;
    life_->refs.fetch_add(1, std::memory_order_relaxed);
    s.prev_ = tail_;
    s.next_ = nullptr;
    (tail_ != nullptr ? tail_->next_ : head_) = &s;
    tail_ = &s;
    blocked_.store(true, std::memory_order_relaxed);
    // Posted to our own executor later, so it cannot resume before this thread has finished suspending.
    return true;
  }

  /// A sender's value joins the queue. Caller holds the mutex. The line a few values on is asked for now
  /// (detail/prefetch.hpp): the receiver read it last, and the next send's lock would otherwise wait for
  /// it (bench/README.md, "Channels"). Inlined by force: clang otherwise leaves it a call on every send,
  /// because vector's growth path is inside.
  [[gnu::always_inline]] void enqueue(T& value) {
    queue_.push_back(std::move(value));
    if (const std::size_t ahead = queue_.size() + kPrefetchAhead; ahead < queue_.capacity()) {
      detail::prefetch_for_write(queue_.data() + ahead);
    }
  }
  static constexpr std::size_t kPrefetchAhead = (256 + sizeof(T) - 1) / sizeof(T);  ///< four 64-byte lines

  /// The receiver is parked, so the queue is empty and nobody is blocked: the value goes straight to it.
  /// Caller holds the mutex. Moves from `value` only when it returns true.
  bool hand_to_receiver(T& value) noexcept {
    receive_awaiter& r = *parked_;
    r.result_.emplace(std::move(value));
    parked_ = nullptr;
    // The doorbell rides the waker's own ring (MSG_RING, no syscall of its own) where it can.
    if (detail::executor_access::send(receiver_, r)) return true;  // r may be running already: hands off
    value = std::move(*r.result_);                                 // its executor is shutting down: undo
    r.result_.reset();
    parked_ = &r;  // its frame's destruction takes it out
    return false;
  }

  /// Receiver side, before suspending: true when a value was taken without the lock.
  bool receive_now(receive_awaiter& r) {
    if (executor::current() != &receiver_) {
      throw std::logic_error("uring::channel::receive: awaited off the receiving executor");
    }
    // The receiver takes the whole backlog per lock acquisition and serves it from here without the lock
    // (one contended cache line per batch instead of per value), unless senders are blocked: they are
    // let in under the lock as each value leaves.
    if (local_.empty() || blocked_.load(std::memory_order_relaxed)) return false;
    take_local(r);
    // Senders see the room this frees only every publish_every_ values (or when the batch is gone):
    // until then they see less room than there is, never more, and the shared line stays put.
    if (++unpublished_ == publish_every_ || local_.empty()) publish_room();
    return true;
  }

  /// Receiver side, suspended: takes a value under the lock, or parks. Returns true when the coroutine
  /// stays suspended.
  bool start_receive(receive_awaiter& r, std::coroutine_handle<> h) {
    bool wake_now = false;
    const bool parked = receive_locked(r, h, wake_now);
    if (wake_now) detail::executor_access::flush_send();  // after the unlock: it is a syscall
    return parked;
  }

  /// start_receive's path under the lock. Sets wake_now where a sender was woken that should not wait
  /// for this executor's next enter.
  bool receive_locked(receive_awaiter& r, std::coroutine_handle<> h, bool& wake_now) {
    std::lock_guard lock(mutex_);
    publish_room();
    wake_now = accept_senders();  // a sender may have blocked just before values were handed out lock-free
    if (local_.empty() && !queue_.empty()) local_.items.swap(queue_);  // published once one is taken below
    if (!local_.empty()) {
      take_local(r);
      publish_room();
      wake_now |= accept_senders();  // the room just freed goes to blocked senders, oldest first
      return false;
    }
    if (closed_) return false;  // drained: nullopt
    if (parked_ != nullptr) throw std::logic_error("uring::channel::receive: two receives at once");
    r.run = [](detail::remote_node* n) noexcept { static_cast<receive_awaiter*>(n)->handle_.resume(); };
    r.discard = [](detail::remote_node*) noexcept {};
    r.handle_ = h;
    r.suspended_ = true;
    r.life_ = life_;
    life_->refs.fetch_add(1, std::memory_order_relaxed);
    parked_ = &r;
    woke_early_ = false;  // a new turn: its enter carries every doorbell still queued
    return true;
  }

  void take_local(receive_awaiter& r) noexcept {
    r.result_.emplace(std::move(local_.items[local_.next]));
    if (++local_.next == local_.items.size()) local_.reset();  // the moved-from values go now
  }
  /// local_'s size, for senders' room checks. Only the receiver writes it: a store, not an RMW.
  void publish_room() noexcept {
    in_local_.store(local_.size(), std::memory_order_relaxed);
    unpublished_ = 0;
  }

  /// Values waiting in the channel: queued, plus those the receiver has taken but not handed out yet (as
  /// last published: possibly more than there are, never fewer).
  std::size_t occupied() const noexcept { return queue_.size() + in_local_.load(std::memory_order_relaxed); }

  /// Space freed up: blocked senders' values join the queue, oldest first, and their coroutines are woken.
  /// Caller holds the mutex. True where a woken sender's executor is asleep and the channel is full again:
  /// with a whole channel still to hand out, the doorbell should leave now, by an enter of its own, so
  /// that the sender's wake-up overlaps that work instead of following it. Otherwise a stream runs in
  /// turns, each side asleep while the other works (docs/messaging.md). At most once per turn of the
  /// receiver's (until it parks): each costs a syscall, and more is no faster (bench/README.md, "Channels").
  bool accept_senders() {
    bool wake_now = false;
    while (head_ != nullptr && occupied() < capacity_) {
      send_awaiter& w = *head_;
      queue_.push_back(std::move(w.value_));  // may throw (allocation): nothing has changed then
      unlink(w);
      w.state_ = send_awaiter::state::done;
      executor& to = *w.executor_;
      const bool to_asleep = detail::executor_access::asleep(to);  // before the send: then w and to may go
      if (detail::executor_access::send(to, w)) {                  // w may be running already
        wake_now |= to_asleep;
        continue;
      }
      w.value_ = std::move(queue_.back());  // its executor is shutting down: the send never completes
      queue_.pop_back();
    }
    if (!wake_now || woke_early_ || queue_.size() + local_.size() < capacity_) return false;
    woke_early_ = true;
    return true;
  }

  void unlink(send_awaiter& w) noexcept {
    (w.prev_ != nullptr ? w.prev_->next_ : head_) = w.next_;
    (w.next_ != nullptr ? w.next_->prev_ : tail_) = w.prev_;
    w.prev_ = w.next_ = nullptr;
    blocked_.store(head_ != nullptr, std::memory_order_relaxed);
  }

  /// A waiter's frame is destroyed before it resumed. If it is still linked, nobody has posted it and,
  /// holding the mutex, nobody can; if it was posted, its executor discards the node. A channel already
  /// gone unlinked every waiter when it closed.
  template <class Awaiter>
  static void abandon(channel* ch, detail::channel_life* life, Awaiter& w) noexcept {
    {
      std::lock_guard keep(life->lock);
      if (life->alive) ch->unlink_abandoned(w);
    }
    life->release();
  }
  void unlink_abandoned(send_awaiter& w) noexcept {
    std::lock_guard lock(mutex_);
    if (w.state_ == send_awaiter::state::queued) unlink(w);
    w.state_ = send_awaiter::state::done;
  }
  void unlink_abandoned(receive_awaiter& r) noexcept {
    std::lock_guard lock(mutex_);
    if (parked_ == &r) parked_ = nullptr;
  }

  /// Three cache lines, by who writes them: measured, a stream's sender spent ~70% of its time in the
  /// mutex while the receiver's per-value update of in_local_ shared its line. The receiver publishes the
  /// room it frees every capacity/8 values (1 to 64): rarely on a large channel, and soon enough on a
  /// small one that a sender never sees most of it full while it has room.
  static std::size_t publish_interval(std::size_t capacity) noexcept {
    return std::min<std::size_t>(64, std::max<std::size_t>(1, capacity / 8));
  }
  /// Senders' line: written on every send, under the mutex.
  alignas(64) detail::spin_lock mutex_;
  std::vector<T> queue_;          ///< accepted values, oldest first; with in_local_, at most capacity_
  send_awaiter* head_ = nullptr;  ///< blocked senders, oldest first; only while the channel is full
  send_awaiter* tail_ = nullptr;
  receive_awaiter* parked_ = nullptr;  ///< only while queue_ and local_ are empty
  bool closed_ = false;
  /// Read by both sides, written rarely: the receiver every publish_every_ values, a sender when it blocks.
  alignas(64) std::atomic<std::size_t> in_local_{0};  ///< local_'s size as last published (never below it)
  std::atomic<bool> blocked_{false};                  ///< head_ != nullptr, for the receiver's lock-free path
  /// Written on every suspension and resumption, on a line of its own (a separate allocation), so that
  /// senders' reads of in_local_ stay put.
  detail::channel_life* life_ = new detail::channel_life;
  executor& receiver_;
  const std::size_t capacity_;
  const std::size_t publish_every_;
  /// The receiver's own.
  /// The receiver's batch, taken from queue_ by swapping vectors: the emptied one goes back to the senders
  /// with its capacity, so once warm neither side allocates (a deque allocated a block per 64 values on
  /// the sender's thread and freed it on the receiver's).
  struct batch {
    std::vector<T> items;
    std::size_t next = 0;  ///< items before it were handed out (moved from)
    [[nodiscard]] bool empty() const noexcept { return next == items.size(); }
    [[nodiscard]] std::size_t size() const noexcept { return items.size() - next; }
    void reset() noexcept {
      items.clear();
      next = 0;
    }
  };
  alignas(64) batch local_;
  std::size_t unpublished_ = 0;  ///< values taken from local_ since in_local_ was last published
  bool woke_early_ = false;      ///< accept_senders pushed a doorbell out since the receiver last parked
};

}  // namespace uring
