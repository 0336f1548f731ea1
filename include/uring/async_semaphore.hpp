/// @file
/// uring/async_semaphore.hpp — a counting semaphore for the coroutines of one executor.
///
/// Provides: uring::async_semaphore.
/// Threads: none. A semaphore belongs to one executor: only coroutines running on that executor use it, and
/// only on that executor's thread (nothing is atomic; to share one across threads, hop onto its executor
/// first). Using it from two executors is undefined.
///
/// `co_await s.acquire()` takes a permit; when one is free it takes it without suspending. Waiters are served
/// in FIFO order: a permit released while anyone waits goes straight to the first waiter, so a later
/// acquire() or try_acquire() cannot overtake it. The waiter is resumed on a later turn of its executor's
/// loop, never inside release(): resuming inline would run the waiter on the releaser's stack (a chain of
/// hand-offs would recurse without bound) and in the middle of the releaser's own code. Each waiter is a node
/// in its coroutine's frame, so waiting allocates nothing. No wake-up is lost: a release either raises the
/// count or hands the permit to a waiter already in the queue, and there is no other thread to race with.
///
/// Lifetime: destroying a semaphore while coroutines wait on it is a bug; the destructor prints a message
/// and calls std::terminate rather than leave frames that would touch freed memory. A waiting coroutine
/// whose frame is destroyed (executor shutdown does that) leaves the queue; if a permit had already been
/// handed to it, the permit passes on to the next waiter, or back to the count.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>

#include "uring/executor.hpp"

namespace uring {

/// A counting semaphore for the coroutines of one executor: `co_await s.acquire()` takes a permit,
/// suspending while none is free; release() hands permits to the waiters in order.
///
/// Threads: none. A semaphore belongs to one executor: only coroutines running on that executor use it,
/// and only on that executor's thread (nothing is atomic; to share one across threads, hop onto its
/// executor first). Using it from two executors is undefined.
class async_semaphore {
 public:
  /// The default maximum: in effect no bound.
  static constexpr std::ptrdiff_t kUnbounded = std::numeric_limits<std::ptrdiff_t>::max();

  /// The awaitable returned by acquire(). It lives in the awaiting coroutine's frame and is the queue node.
  class [[nodiscard]] acquire_awaiter {
   public:
    /// For acquire(): a permit of `s`.
    explicit acquire_awaiter(async_semaphore& s) noexcept : sem_(&s) {}
    acquire_awaiter(const acquire_awaiter&) = delete;
    acquire_awaiter& operator=(const acquire_awaiter&) = delete;
    ~acquire_awaiter() {
      if (state_ == state::queued || state_ == state::granted) sem_->abandon(*this);
    }

    ///@{
    /// The awaiter protocol, called by `co_await`. await_suspend throws std::logic_error when no executor
    /// runs on this thread.
    bool await_ready() noexcept {
      if (!sem_->try_acquire()) return false;
      state_ = state::done;
      return true;
    }
    void await_suspend(std::coroutine_handle<> h) {
      executor_ = &detail::executor_access::current("async_semaphore::acquire");  // throws before linking
      handle_ = h;
      sem_->enqueue(*this);
    }
    void await_resume() noexcept { state_ = state::done; }
    ///@}

   private:
    friend class async_semaphore;
    /// idle -> done (a free permit), or idle -> queued -> granted (permit handed over, resume scheduled)
    /// -> done (resumed).
    enum class state : std::uint8_t { idle, queued, granted, done };

    async_semaphore* sem_;
    acquire_awaiter* prev_ = nullptr;
    acquire_awaiter* next_ = nullptr;
    std::coroutine_handle<> handle_;
    executor* executor_ = nullptr;
    state state_ = state::idle;
  };

  /// `initial` permits are free at first; release() may never raise the count above `max`.
  /// Throws std::invalid_argument unless 0 <= initial <= max and max >= 1.
  explicit async_semaphore(std::ptrdiff_t initial, std::ptrdiff_t max = kUnbounded)
      : available_(initial), max_(max) {
    if (max < 1 || initial < 0 || initial > max) {
      throw std::invalid_argument("uring::async_semaphore: need 0 <= initial <= max and max >= 1");
    }
  }
  async_semaphore(const async_semaphore&) = delete;
  async_semaphore& operator=(const async_semaphore&) = delete;
  ~async_semaphore() {
    if (waiting_ != 0) {
      std::fprintf(stderr, "uring::async_semaphore destroyed while %zu coroutine(s) wait on it\n", waiting_);
      std::terminate();
    }
  }

  /// Awaiting yields once a permit is held (immediately if one is free). Throws std::logic_error if it has
  /// to wait and no executor runs on this thread.
  acquire_awaiter acquire() noexcept { return acquire_awaiter(*this); }

  /// Takes a free permit if there is one. Never overtakes a waiter: while any wait, no permit is free.
  bool try_acquire() noexcept {
    if (available_ == 0) return false;
    --available_;
    return true;
  }

  /// Returns `n` permits: each goes to the next waiter (resumed on a later turn), the rest to the count.
  /// Throws std::invalid_argument if n < 0 and std::logic_error if the free count would exceed max();
  /// either way nothing changes.
  void release(std::ptrdiff_t n = 1) {
    if (n < 0) throw std::invalid_argument("uring::async_semaphore::release: negative count");
    if (n > max_ - available_) throw std::logic_error("uring::async_semaphore::release: above max()");
    for (; n > 0 && head_ != nullptr; --n) hand_to_first();
    available_ += n;
  }

  /// Free permits now; zero whenever a coroutine waits.
  [[nodiscard]] std::ptrdiff_t available() const noexcept { return available_; }
  /// The most permits the semaphore holds (release() above it is a std::logic_error).
  [[nodiscard]] std::ptrdiff_t max() const noexcept { return max_; }
  /// Coroutines queued for a permit (not counting those handed one but not yet resumed).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_; }

 private:
  void enqueue(acquire_awaiter& w) noexcept {
    w.state_ = acquire_awaiter::state::queued;
    w.prev_ = tail_;
    w.next_ = nullptr;
    (tail_ != nullptr ? tail_->next_ : head_) = &w;
    tail_ = &w;
    ++waiting_;
  }

  void unlink(acquire_awaiter& w) noexcept {
    (w.prev_ != nullptr ? w.prev_->next_ : head_) = w.next_;
    (w.next_ != nullptr ? w.next_->prev_ : tail_) = w.prev_;
    w.prev_ = w.next_ = nullptr;
    --waiting_;
  }

  /// The permit changes owner here and now; only the resumption waits for the loop. noexcept: if the
  /// executor cannot even grow its ready list, a waiter holding a permit it never learns of would hang
  /// silently, so that is fatal.
  void hand_to_first() noexcept {
    acquire_awaiter& w = *head_;
    unlink(w);
    w.state_ = acquire_awaiter::state::granted;
    detail::executor_access::schedule(*w.executor_, w.handle_);
  }

  /// The waiter's frame is being destroyed before it resumed. Only the executor destroys suspended frames,
  /// at shutdown, and it drops its ready list afterwards, so scheduling the next waiter here never leaves a
  /// handle to a freed frame behind.
  void abandon(acquire_awaiter& w) noexcept {
    if (w.state_ == acquire_awaiter::state::queued) {
      unlink(w);
    } else if (head_ != nullptr) {
      hand_to_first();
    } else {
      ++available_;
    }
    w.state_ = acquire_awaiter::state::done;
  }

  acquire_awaiter* head_ = nullptr;
  acquire_awaiter* tail_ = nullptr;
  std::size_t waiting_ = 0;
  std::ptrdiff_t available_;
  std::ptrdiff_t max_;
};

}  // namespace uring
