/// @file
/// uring/sync/event.hpp — a resettable event (a gate) that coroutines on any executor and plain threads
/// wait on.
///
/// Provides: uring::sync::event.
/// Threads: any. set() and reset() from anywhere; `co_await e.async_wait()` from a coroutine on any
/// executor; wait() / wait_for() block a plain thread.
///
/// Manual reset: set() opens the event and releases every waiter, and every wait passes at once until
/// reset() closes it again. A waiter released by a set() is released even if reset() follows at once
/// (it was granted under the lock; its resumption is already posted). Each waiting coroutine resumes on
/// its own executor on a later turn; a thread is woken through its own futex word; nothing spins.
/// Cancellation: the awaiting task's stop token, or with_stop_token's, ends async_wait with
/// std::system_error(ECANCELED) (`.nothrow()`: io_result{-ECANCELED}), unless set() released it first.
/// A coroutine destroyed while it waits (its executor's shutdown) leaves the queue. Destroying an event
/// that has waiters is a bug (std::terminate, with a message). (uring::event, uring/event.hpp, is the
/// eventfd-backed event that other processes can signal.)
#pragma once

#include <chrono>
#include <stop_token>

#include "uring/sync/wait_list.hpp"

namespace uring::sync {

/// A resettable event (a gate) that coroutines on any executor and plain threads wait on: set() opens it
/// and releases every waiter, and every wait passes at once until reset() closes it again. Destroying an
/// event that has waiters is a bug (std::terminate, with a message).
///
/// Threads: any. set() and reset() from anywhere; `co_await e.async_wait()` from a coroutine on any
/// executor; wait() / wait_for() block a plain thread.
class event final : private detail::gate {
 public:
  using gate::wait_awaitable;

  /// An event, open if `set`.
  explicit event(bool set = false);
  ~event();

  /// Opens the event: every waiter is released, and later waits pass until reset().
  void set();
  /// Closes it: later waits wait for the next set().
  void reset() noexcept;
  using gate::waiting;  ///< how many coroutines and threads wait now
  [[nodiscard]] bool is_set() const noexcept;

  /// async_wait() (awaiting ends when the event is set), wait() (blocks this thread until then), wait_for(d)
  /// (blocks at most d; true if it came).
  using gate::async_wait;
  using gate::wait;
  using gate::wait_for;
};

}  // namespace uring::sync
