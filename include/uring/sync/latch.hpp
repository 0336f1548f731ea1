/// @file
/// uring/sync/latch.hpp — a single-use countdown that coroutines on any executor and plain threads wait on.
///
/// Provides: uring::sync::latch.
/// Threads: any. count_down() from anywhere; `co_await l.async_wait()` from a coroutine on any executor;
/// wait() / wait_for() / arrive_and_wait() block a plain thread.
///
/// As std::latch: the count starts at `count` and only goes down; the waits end when it reaches zero, and
/// every wait after that passes at once (it never resets). Each waiting coroutine resumes on its own
/// executor on a later turn; a thread is woken through its own futex word; nothing spins. Cancellation: the
/// awaiting task's stop token, or with_stop_token's, ends async_wait with std::system_error(ECANCELED)
/// (`.nothrow()`: io_result{-ECANCELED}); it changes nothing else. A coroutine destroyed while it waits (its
/// executor's shutdown) leaves the queue. count_down(n) beyond what remains is std::logic_error, nothing
/// counted. Destroying a latch that has waiters is a bug (std::terminate, with a message).
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>

#include "uring/sync/wait_list.hpp"

namespace uring::sync {

/// A single-use countdown that coroutines on any executor and plain threads wait on, as std::latch: the
/// count starts at `count` and only goes down; the waits end when it reaches zero. count_down(n) beyond
/// what remains is std::logic_error. Destroying a latch that has waiters is a bug (std::terminate).
///
/// Threads: any. count_down() from anywhere; `co_await l.async_wait()` from a coroutine on any executor;
/// wait() / wait_for() / arrive_and_wait() block a plain thread.
class latch final : private detail::gate {
 public:
  using gate::wait_awaitable;

  /// A latch whose count starts at `count`.
  explicit latch(std::uint32_t count);
  ~latch();

  /// Takes `n` off the count; at zero, every waiter is released.
  void count_down(std::uint32_t n = 1);
  /// True once the count is zero.
  [[nodiscard]] bool try_wait() const noexcept;
  /// async_wait() (awaiting ends when the count is zero), wait() (blocks this thread until then), wait_for(d)
  /// (blocks at most d; true if it came).
  using gate::async_wait;
  using gate::wait;
  using gate::wait_for;
  /// count_down(n), then wait().
  void arrive_and_wait(std::uint32_t n = 1) {
    count_down(n);
    wait();
  }
  using gate::waiting;  ///< how many coroutines and threads wait now
  /// What remains of the count.
  [[nodiscard]] std::uint32_t remaining() const noexcept;

 private:
  std::uint32_t count_;
};

}  // namespace uring::sync
