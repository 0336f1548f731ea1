/// @file
/// uring/executor_handle.hpp — a name for an executor that stays safe to use after the executor is gone.
///
/// Provides: uring::executor_handle (from executor::handle()), uring::send / uring::try_send to a handle.
/// (uring::spawn, resume_on and submit_to take a handle too: uring/spawn.hpp, uring/resume_on.hpp.)
/// Threads: any thread may copy, compare and use a handle at any time, also after its executor was
/// destroyed. send/try_send come from code running on an executor, as for an executor&.
///
/// An executor& must not outlive its executor; a handle may. It holds the executor's key in the process's
/// registry of live executors plus a generation number that is never reused, so a handle to an executor
/// that was destroyed names nothing, even after a new executor took over the key. Every use looks the
/// executor up under the registry's lock (one mutex, uncontended in practice), which also keeps it from
/// finishing its destruction while a post or message is being handed over. So nothing is lost silently:
/// a post or send either reaches a live executor (which runs or delivers it, as through an executor&) or
/// fails with ESHUTDOWN, whichever thread destroys the executor and whenever.
/// Cost: the lookup (~20-40 ns) per post or send; code that knows its target outlives it (an
/// executor_group's members) can keep using executor& on the hot path.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/executor.hpp"
#include "uring/message.hpp"

namespace uring {

namespace detail {
/// Out of line (src/message_hub.cpp), each under the registry's lock.
bool handle_alive(std::uint64_t id) noexcept;
/// Hands `node` to the executor `id` names; false (nothing posted) if it is gone or refuses posts.
/// `going_home`: a dropped hop sent back (executor_access::try_post_home).
bool post_to_handle(std::uint64_t id, remote_node& node, bool going_home = false) noexcept;
/// As try_send_message, with ESHUTDOWN for an executor that is gone.
int try_send_to_handle(std::uint64_t id, const message& m) noexcept;
/// As park_sender; false (nothing parked) if the executor is gone.
bool park_sender_at_handle(std::uint64_t id, message_waiter& w);
/// Throws std::system_error(ESHUTDOWN) "<what>: the target executor is gone or no longer accepts work":
/// the one refusal of every call through a handle (post, spawn, resume_on, submit_to).
[[noreturn]] void throw_handle_refused(const char* what);

}  // namespace detail

/// A name for an executor that stays safe to use after the executor is gone (from executor::handle());
/// the file's comment says how. Posts and sends through it reach a live executor or fail with ESHUTDOWN.
///
/// Threads: any thread may copy, compare and use a handle at any time, also after its executor was
/// destroyed. send/try_send come from code running on an executor, as for an executor&.
class executor_handle {
 public:
  executor_handle() noexcept = default;  ///< names no executor: every use fails with ESHUTDOWN

  /// True while the executor exists and accepts work. A snapshot: it may stop right after.
  [[nodiscard]] bool alive() const noexcept { return detail::handle_alive(id_); }

  /// Runs fn() on the executor's thread, as executor::post. Throws std::system_error(ESHUTDOWN) if the
  /// executor is gone or no longer accepts work; fn is then destroyed without running.
  template <class F>
  void post(F&& fn) const {
    auto* node = new detail::posted_fn<std::decay_t<F>>(std::forward<F>(fn));
    if (!detail::post_to_handle(id_, *node)) {
      delete node;
      detail::throw_handle_refused("executor_handle::post");
    }
  }

  /// The executor's key and generation: equal for handles to the same executor, never reused.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// Same executor.
  friend bool operator==(const executor_handle&, const executor_handle&) = default;

 private:
  friend class executor;
  explicit executor_handle(std::uint64_t id) noexcept : id_(id) {}
  std::uint64_t id_ = 0;
};

namespace detail {
/// A target of sends and hops named by a handle (see executor_target, uring/message.hpp).
struct handle_target {
  std::uint64_t id;
  static constexpr bool by_handle = true;
  [[nodiscard]] bool here() const noexcept {
    executor* cur = executor::current();
    return cur != nullptr && cur->handle().id() == id;
  }
  /// The mailbox, under the registry's lock (uring/resume_on.hpp says why not MSG_RING).
  bool hand_off(remote_node& n) const noexcept { return post_to_handle(id, n); }
  int try_send(const message& m) const noexcept { return try_send_to_handle(id, m); }
  bool park(message_waiter& w) const { return park_sender_at_handle(id, w); }
};
}  // namespace detail

///@{
/// uring::send / try_send (uring/message.hpp) to the executor a handle names: the same order, window and
/// errors, plus ESHUTDOWN once that executor is gone.
inline detail::send_awaitable<detail::handle_target> send(const executor_handle& target, std::int32_t value,
                                                          std::uint64_t data) noexcept {
  return {detail::handle_target{target.id()}, message{value, data}};
}
inline io_result try_send(const executor_handle& target, std::int32_t value, std::uint64_t data) noexcept {
  return io_result{-detail::try_send_to_handle(target.id(), message{value, data})};
}
///@}

}  // namespace uring
