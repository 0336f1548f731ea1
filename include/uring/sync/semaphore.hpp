/// @file
/// uring/sync/semaphore.hpp — a counting semaphore for coroutines on any executor and for plain threads.
///
/// Provides: uring::sync::semaphore.
/// Threads: any. `co_await s.async_acquire()` from a coroutine on any executor (several executors at once);
/// acquire(), try_acquire_for() block a plain thread; try_acquire() and release() from anywhere.
///
/// Permits go to waiters in the order they came (FIFO), coroutines and threads alike: a release while
/// anyone waits hands the permit straight to the first waiter, so no later acquire overtakes it. A
/// coroutine resumes on its own executor on a later turn (never inside release()); a thread is woken through
/// its own futex word. Waiting allocates nothing and never spins.
///
/// Cancellation: async_acquire follows the awaiting task's stop token (with_timeout and with_stop_token
/// on the task, when_any, task_scope), or with_stop_token(s.async_acquire(), token)'s; a stop makes the
/// co_await throw std::system_error(ECANCELED) (`.nothrow()`: io_result{-ECANCELED}) and takes no permit. A
/// stop that comes after the permit was handed over loses: the coroutine gets the permit. try_acquire_for
/// gives up after its time, taking none. A permit is never lost: a waiter granted but never resumed (its
/// executor shut down meanwhile) gives its permit to the next waiter; a coroutine destroyed while it waits
/// (its executor's shutdown frees its frame) leaves the queue.
///
/// Destroying a semaphore that has waiters is a bug: it prints a message and calls std::terminate. A plain
/// thread's acquire() on an executor's thread blocks that executor until a permit comes.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <stop_token>

#include "uring/sync/wait_list.hpp"

namespace uring::sync {

class mutex;

/// A counting semaphore for coroutines on any executor and for plain threads. Permits go to waiters in the
/// order they came (FIFO), coroutines and threads alike; a permit is never lost (the file's comment has
/// the rules for stops and shutdowns).
///
/// Threads: any. `co_await s.async_acquire()` from a coroutine on any executor (several executors at
/// once); acquire(), try_acquire_for() block a plain thread; try_acquire() and release() from anywhere.
class semaphore final : private detail::waitable {
 public:
  /// What async_acquire() returns: awaited, it takes a permit. It follows the awaiting task's stop token, or
  /// with_stop_token's: a stop throws std::system_error(ECANCELED) and takes no permit.
  using acquire_awaitable = detail::wait_awaitable<detail::no_value>;

  /// `initial` permits are free; release() never raises the count above `max` (std::logic_error).
  explicit semaphore(std::uint32_t initial, std::uint32_t max = std::numeric_limits<std::uint32_t>::max());
  ~semaphore();

  /// Awaiting takes a permit, waiting for one if none is free.
  acquire_awaitable async_acquire() noexcept { return {*this, std::stop_token{}, "semaphore acquire", {}}; }
  /// Blocks this thread until it has a permit.
  void acquire() { block(); }
  /// Takes a permit if one is free now and nobody waits.
  bool try_acquire() noexcept;
  /// Blocks at most `d` for a permit; true if it got one.
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> d) {
    return block_for(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  }
  /// Frees `n` permits: waiters first, in order.
  void release(std::uint32_t n = 1);
  using waitable::waiting;  ///< how many coroutines and threads wait now
  /// Free permits now (0 while anyone waits).
  [[nodiscard]] std::uint32_t available() const noexcept;

 private:
  friend class mutex;  ///< a semaphore of one permit
  [[nodiscard]] detail::waitable& waits() noexcept { return *this; }

  bool take_locked() noexcept final;
  void give_back_locked() noexcept final;
  void release_locked(std::uint32_t n) noexcept;

  std::uint32_t count_;
  const std::uint32_t max_;
};

}  // namespace uring::sync
