/// @file
/// uring/event.hpp — an eventfd-backed event: notify from any thread (or process), await on any executor.
///
/// Provides: uring::event, uring::event_mode.
/// Threads: notify() and reset() from any thread, also one with no executor, or from another process that
/// holds native_handle(); `co_await wait()` from coroutines on any number of executors at once.
///
/// Two modes:
///  - auto_reset: a counting event, like a semaphore. notify(n) adds n; each wait() takes exactly one
///    (an EFD_SEMAPHORE eventfd read by the kernel, which hands each count to exactly one reader), so n
///    notifies release n waits, whenever those waits come. A wait cancelled by its timeout or stop token
///    either took its count or left it for another: never both, never neither.
///  - manual_reset: a gate. notify() opens it and every wait() (current and later) completes until
///    reset() closes it (waits poll the eventfd for readability without consuming it).
/// wait() is an ordinary operation: with_timeout, with_stop_token and .nothrow() apply (io.hpp).
/// The event must outlive every wait on it. Minimum kernel 5.6.
#pragma once

#include <cstdint>
#include <utility>

#include "uring/detail/io_awaitable.hpp"

namespace uring {

/// How an event's signals are taken.
enum class event_mode : std::uint8_t {
  auto_reset,   ///< a counting event, like a semaphore: notify(n) adds n, each wait() takes exactly one
  manual_reset  ///< a gate: notify() opens it, every wait() completes until reset() closes it
};

namespace detail {
/// The 8 bytes a wait reads from the eventfd (auto_reset); unused by a manual_reset poll.
struct eventfd_word {
  std::uint64_t value = 0;
  void bind(io_request& r) noexcept { r.addr = &value; }
};
}  // namespace detail

/// An eventfd-backed event: notify from any thread (or process), await on any executor (the file's
/// comment has the two modes). wait() is an ordinary operation: with_timeout, with_stop_token and
/// .nothrow() apply. The event must outlive every wait on it. Minimum kernel 5.6.
///
/// Threads: notify() and reset() from any thread, also one with no executor, or from another process that
/// holds native_handle(); `co_await wait()` from coroutines on any number of executors at once.
class event {
 public:
  /// What wait() returns: an ordinary operation.
  using wait_awaitable = detail::io_awaitable<void, true, detail::eventfd_word>;

  /// A new eventfd, its count (auto_reset) or state (manual_reset, set if initial > 0) set from `initial`.
  explicit event(event_mode mode = event_mode::auto_reset, std::uint64_t initial = 0);
  /// Takes ownership of an eventfd made elsewhere (e.g. inherited from a parent process). auto_reset needs
  /// an EFD_SEMAPHORE eventfd in blocking mode, manual_reset one in non-blocking mode: checked, EINVAL
  /// (std::system_error) otherwise, and the fd is then not taken.
  static event adopt(int fd, event_mode mode);

  ///@{
  /// Moves the eventfd; `o` is left without one (an assigned-to event first closes its own).
  event(event&& o) noexcept : fd_(std::exchange(o.fd_, -1)), mode_(o.mode_) {}
  event& operator=(event&& o) noexcept;
  ///@}
  /// Closes the eventfd, if any.
  ~event();

  /// auto_reset: releases n waits. manual_reset: opens the gate (n is ignored). Throws std::system_error
  /// only if the eventfd refuses the write (a count beyond 2^64 - 2).
  void notify(std::uint64_t n = 1);
  /// manual_reset: closes the gate. std::logic_error for auto_reset, whose counts belong to the waits.
  void reset();
  /// Completes when the event is signalled (see the modes). Must be awaited on an executor.
  [[nodiscard]] wait_awaitable wait() const noexcept;

  /// The eventfd (-1 once moved from), to hand to another process.
  [[nodiscard]] int native_handle() const noexcept { return fd_; }
  /// The event's mode.
  [[nodiscard]] event_mode mode() const noexcept { return mode_; }

 private:
  event(int fd, event_mode mode) noexcept : fd_(fd), mode_(mode) {}
  int fd_ = -1;
  event_mode mode_ = event_mode::auto_reset;
};

}  // namespace uring
