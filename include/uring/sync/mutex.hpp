/// @file
/// uring/sync/mutex.hpp — mutual exclusion between coroutines on any executors and plain threads.
///
/// Provides: uring::sync::mutex.
/// Threads: any. `auto lock = co_await m.async_lock();` from a coroutine on any executor (it yields a
/// std::unique_lock<sync::mutex> that owns the mutex); lock() / try_lock_for() block a plain thread, and
/// the mutex is Lockable (std::lock_guard, std::unique_lock, std::scoped_lock work on threads).
///
/// A semaphore of one permit (uring/sync/semaphore.hpp): FIFO hand-off, so no later lock overtakes a
/// waiter; a coroutine resumes on its own executor, later; nothing spins. The holder may unlock from any
/// thread or executor (the lock is not tied to a thread). Cancellation as for the semaphore: the awaiting
/// task's stop token, or with_stop_token's, makes async_lock throw std::system_error(ECANCELED) without the
/// lock; `.nothrow()` yields a unique_lock that owns nothing then. A waiter granted the lock but never
/// resumed (its executor shut down) passes it on; one destroyed while it waits leaves the queue.
///
/// Destroying a locked mutex is a bug (std::terminate, with a message), as is unlocking one that is not
/// locked.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <stop_token>

#include "uring/sync/semaphore.hpp"

namespace uring::sync {

/// Mutual exclusion between coroutines on any executors and plain threads: a semaphore of one permit (FIFO
/// hand-off; nothing spins). Lockable, so std::lock_guard, std::unique_lock and std::scoped_lock work on
/// threads. Destroying a locked mutex is a bug (std::terminate, with a message), as is unlocking one that
/// is not locked.
///
/// Threads: any. `auto lock = co_await m.async_lock();` from a coroutine on any executor; lock() /
/// try_lock_for() block a plain thread. The holder may unlock from any thread or executor.
class mutex final {
 public:
  /// What a granted async_lock yields: a std::unique_lock that adopts the lock of `m`.
  struct adopt {
    mutex* m;  ///< the mutex locked
    /// The unique_lock owning `m`.
    std::unique_lock<mutex> operator()() const noexcept { return {*m, std::adopt_lock}; }
  };
  /// What async_lock() returns: awaited, it yields a std::unique_lock<sync::mutex> owning the mutex. A stop
  /// (the awaiting task's token, or with_stop_token's) throws std::system_error(ECANCELED) without the lock.
  using lock_awaitable = detail::wait_awaitable<adopt>;

  /// An unlocked mutex.
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  ~mutex();

  /// Awaiting yields a unique_lock owning the mutex, once this coroutine has it.
  lock_awaitable async_lock() noexcept {
    return {permit_.waits(), std::stop_token{}, "mutex lock", adopt{this}};
  }
  /// Blocks this thread until it holds the mutex.
  void lock() { permit_.acquire(); }
  /// Takes the mutex if it is free now and nobody waits.
  bool try_lock() noexcept { return permit_.try_acquire(); }
  /// Blocks at most `d` for the mutex; true if it got it.
  template <class Rep, class Period>
  bool try_lock_for(std::chrono::duration<Rep, Period> d) {
    return permit_.try_acquire_for(d);
  }
  /// Frees the mutex, or hands it to the first waiter.
  void unlock();
  /// How many coroutines and threads wait now.
  [[nodiscard]] std::size_t waiting() const noexcept { return permit_.waiting(); }
  /// True while it is held (also by a waiter it was handed to that has not resumed yet).
  [[nodiscard]] bool is_locked() const noexcept { return permit_.available() == 0; }

 private:
  semaphore permit_{1, 1};
};

}  // namespace uring::sync
