/// @file
/// uring/async_mutex.hpp — mutual exclusion for the coroutines of one executor.
///
/// Provides: uring::async_mutex, uring::async_mutex::scoped_lock.
/// Threads: none. A mutex belongs to one executor: only coroutines running on that executor use it, and
/// only on that executor's thread (nothing is atomic; it orders coroutines that interleave at co_await
/// points, not threads). Using it from two executors is undefined.
///
///   auto guard = co_await m.lock();   // an RAII guard, movable; unlocks when it goes
///
/// Locking a free mutex does not suspend. Waiters are served in FIFO order and unlock() hands ownership
/// straight to the first of them, so no later lock() or try_lock() can overtake it; that waiter is resumed
/// on a later turn of its executor's loop, never inside unlock() (inline resumption would run the next
/// holder on the unlocker's stack, so a queue of 10'000 would recurse 10'000 deep, and the unlocker's code
/// after unlock() would run only once everyone after it had finished). Waiting allocates nothing: the
/// queue node lives in the awaiting coroutine's frame. Nothing is lost: an unlock either frees the mutex or
/// hands it to a waiter already queued.
///
/// Lifetime: destroying a mutex that is locked (waiters imply locked) is a bug, as for std::mutex; the
/// destructor prints a message and calls std::terminate instead of letting a guard or a waiter touch freed
/// memory later. A coroutine destroyed while it waits (executor shutdown) leaves the queue; if ownership
/// had already been handed to it, ownership passes on to the next waiter or the mutex becomes free, so a
/// shutdown leaves every mutex consistent.
#pragma once

#include <coroutine>
#include <cstdio>
#include <exception>
#include <mutex>
#include <utility>

#include "uring/async_semaphore.hpp"

namespace uring {

/// Mutual exclusion for the coroutines of one executor: `auto lock = co_await m.lock();` suspends while
/// another coroutine holds it.
///
/// Threads: none. A mutex belongs to one executor: only coroutines running on that executor use it, and
/// only on that executor's thread (nothing is atomic; it orders coroutines that interleave at co_await
/// points, not threads). Using it from two executors is undefined.
class async_mutex {
 public:
  /// Owns a lock on an async_mutex, like std::unique_lock: unlocks on destruction, movable, not copyable.
  /// Not thread-safe (it belongs to the mutex's executor).
  class [[nodiscard]] scoped_lock {
   public:
    /// Owns no lock.
    scoped_lock() noexcept = default;
    /// Takes over a lock the caller already holds (after try_lock()).
    scoped_lock(async_mutex& m, std::adopt_lock_t) noexcept : mutex_(&m) {}
    ///@{
    /// Moves the lock; `other` is left owning none (an assigned-to guard first unlocks its own).
    scoped_lock(scoped_lock&& other) noexcept : mutex_(std::exchange(other.mutex_, nullptr)) {}
    scoped_lock& operator=(scoped_lock&& other) noexcept {
      if (this != &other) {
        unlock();
        mutex_ = std::exchange(other.mutex_, nullptr);
      }
      return *this;
    }
    ///@}
    scoped_lock(const scoped_lock&) = delete;
    scoped_lock& operator=(const scoped_lock&) = delete;
    /// Unlocks, if it owns a lock.
    ~scoped_lock() { unlock(); }

    /// Unlocks now (handing off to the next waiter); does nothing when this guard owns no lock.
    void unlock() noexcept {
      if (mutex_ != nullptr) std::exchange(mutex_, nullptr)->unlock();
    }
    /// Disowns the lock without unlocking: the caller must call the mutex's unlock() later.
    async_mutex* release() noexcept { return std::exchange(mutex_, nullptr); }

    ///@{
    /// True when the guard owns a lock.
    [[nodiscard]] bool owns_lock() const noexcept { return mutex_ != nullptr; }
    explicit operator bool() const noexcept { return owns_lock(); }
    ///@}
    /// The mutex whose lock it owns, or null.
    [[nodiscard]] async_mutex* mutex() const noexcept { return mutex_; }

   private:
    async_mutex* mutex_ = nullptr;
  };

  /// The awaitable returned by lock(); it lives in the awaiting coroutine's frame and is the queue node.
  class [[nodiscard]] lock_awaiter {
   public:
    /// For lock(): a lock of `m`.
    explicit lock_awaiter(async_mutex& m) noexcept : mutex_(m), permit_(m.permit_.acquire()) {}
    ///@{
    /// The awaiter protocol, called by `co_await`. await_resume yields the lock.
    bool await_ready() noexcept { return permit_.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) { permit_.await_suspend(h); }
    scoped_lock await_resume() noexcept {
      permit_.await_resume();
      return scoped_lock(mutex_, std::adopt_lock);
    }
    ///@}

   private:
    async_mutex& mutex_;
    async_semaphore::acquire_awaiter permit_;
  };

  async_mutex() = default;
  async_mutex(const async_mutex&) = delete;
  async_mutex& operator=(const async_mutex&) = delete;
  ~async_mutex() {
    if (is_locked()) {
      std::fprintf(stderr, "uring::async_mutex destroyed while locked (%zu coroutine(s) waiting)\n",
                   permit_.waiting());
      std::terminate();
    }
  }

  /// Awaiting yields a scoped_lock once this coroutine owns the mutex (at once if it is free). Throws
  /// std::logic_error if it has to wait and no executor runs on this thread.
  lock_awaiter lock() noexcept { return lock_awaiter(*this); }

  /// Locks if the mutex is free. Never overtakes a waiter: while any wait, the mutex is not free.
  /// On success, adopt the lock with scoped_lock(m, std::adopt_lock) or call unlock() yourself.
  bool try_lock() noexcept { return permit_.try_acquire(); }

  /// Frees the mutex, or hands it to the first waiter, which resumes on a later turn. Unlocking a mutex
  /// that is not locked is a bug: it prints a message and calls std::terminate.
  void unlock() noexcept {
    if (!is_locked()) {
      std::fputs("uring::async_mutex::unlock: the mutex is not locked\n", stderr);
      std::terminate();
    }
    permit_.release();  // cannot throw: the count is 0 and its maximum 1
  }

  /// True while some coroutine owns the mutex (including one handed it that has not resumed yet).
  [[nodiscard]] bool is_locked() const noexcept { return permit_.available() == 0; }

 private:
  /// A mutex is a semaphore of one permit; this keeps a single implementation of the FIFO hand-off.
  async_semaphore permit_{1, 1};
};

}  // namespace uring
