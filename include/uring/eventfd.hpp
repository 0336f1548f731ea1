/// @file
/// uring/eventfd.hpp — an eventfd registered with an executor's ring, as an RAII handle.
///
/// Provides: uring::eventfd_registration (made by executor::register_eventfd), uring::eventfd_options.
/// Threads: the handle may be used and destroyed from any thread or coroutine; the registration itself
/// always changes on the executor's own thread (IORING_SETUP_SINGLE_ISSUER requires it).
///
/// A ring has one eventfd slot. While registered, the kernel signals the eventfd whenever it posts
/// completions on the ring (with eventfd_options::async_only, only for those completed in an io-wq worker);
/// the emulated backend signals it once per loop turn that posted completions (docs/emulation.md).
/// Destroying the handle unregisters: at once on the executor's thread, else by a post to it (dropped if
/// that executor no longer accepts work, as its ring is then going away). The handle must not outlive its
/// executor.
#pragma once

#include <cstdint>
#include <utility>

#include "uring/detail/owner_call.hpp"
#include "uring/executor.hpp"

namespace uring {

class eventfd_registration;

namespace detail {
/// The calls that run on the ring's owner (owner_call), one small function object each.
struct register_eventfd_fn {
  executor* ex;
  int fd;
  eventfd_options opts;
  eventfd_registration operator()() const;
};
struct unregister_eventfd_fn {
  eventfd_registration* self;
  void operator()() const;
};
struct enable_eventfd_fn {
  executor* ex;  ///< null: not registered (ENXIO)
  std::uint64_t id;
  bool on;
  void operator()() const;
};
}  // namespace detail

/// An eventfd registered in an executor's ring (made by executor::register_eventfd): while registered, the
/// kernel signals the eventfd whenever it posts completions on the ring. Destroying the handle
/// unregisters: at once on the executor's thread, else by a post to it. It must not outlive its executor.
///
/// Threads: the handle may be used and destroyed from any thread or coroutine; the registration itself
/// always changes on the executor's own thread (IORING_SETUP_SINGLE_ISSUER requires it).
class eventfd_registration {
 public:
  eventfd_registration() noexcept = default;  ///< registers nothing
  ///@{
  /// Moves the registration; `o` is left inactive (an assigned-to handle first unregisters its own).
  eventfd_registration(eventfd_registration&& o) noexcept;
  eventfd_registration& operator=(eventfd_registration&& o) noexcept;
  ///@}
  /// Unregisters, if active.
  ~eventfd_registration();

  /// True while the handle holds a registration.
  [[nodiscard]] bool active() const noexcept { return ex_ != nullptr; }
  /// The registered eventfd (not owned).
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// eventfd_options::async_only, as registered.
  [[nodiscard]] bool async_only() const noexcept { return async_only_; }
  /// The executor whose ring holds the registration; null when inactive.
  [[nodiscard]] executor* owner() const noexcept { return ex_; }

  /// Unregisters when awaited, from a coroutine on any executor; the handle is inactive once the co_await
  /// returns. Does nothing if it already was. Not awaited, it does nothing (the handle still unregisters
  /// when destroyed).
  detail::owner_call<detail::unregister_eventfd_fn> unregister() noexcept { return {ex_, {this}}; }
  /// Pauses (false) or resumes (true) the signals without giving up the slot (io_uring_cq_eventfd_toggle,
  /// kernel 5.8). From a coroutine on any executor. Throws std::system_error(ENXIO) if not registered.
  detail::owner_call<detail::enable_eventfd_fn> enable(bool on) const noexcept {
    return {ex_, {ex_, id_, on}};
  }

 private:
  friend struct detail::register_eventfd_fn;
  friend struct detail::unregister_eventfd_fn;
  eventfd_registration(executor& ex, std::uint64_t id, int fd, bool async_only) noexcept
      : ex_(&ex), id_(id), fd_(fd), async_only_(async_only) {}
  void release() noexcept;

  executor* ex_ = nullptr;
  std::uint64_t id_ = 0;  ///< the executor's name for this registration; a stale one changes nothing
  int fd_ = -1;
  bool async_only_ = false;
};

}  // namespace uring
