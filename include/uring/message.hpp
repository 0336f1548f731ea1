/// @file
/// uring/message.hpp — raw messages between executors: 96 bits each, FIFO per pair, with back-pressure.
///
/// Provides: uring::message, uring::send, uring::try_send, uring::inbox.
/// Threads: send/try_send from a coroutine (or code) running on an executor, to any executor, itself
/// included; inbox::receive/try_receive on the inbox's own executor only.
///
/// A message is an int32 `value` and a uint64 `data`, all 96 bits the user's. Between two native
/// executors it is one IORING_OP_MSG_RING: the kernel posts it as a CQE on the target's ring, marked as
/// ours by CQE flags the sender sets (IORING_MSG_RING_FLAGS_PASS, kernel 6.3+), and a successful send costs
/// the sender no CQE (IOSQE_CQE_SKIP_SUCCESS) and no syscall of its own: it leaves with the turn's enter,
/// or with the next 63 of a longer burst (the kernel takes a stream of them fastest in batches of 64).
/// Elsewhere (emulated backend, MSG_RING disabled or too old) it travels through the target's mailbox,
/// with the same order and limits.
///
/// Order: the messages of one sender executor to one target arrive in the order they were sent.
/// Back-pressure: per sender→target pair at most the target's executor_options::message_window messages
/// are in flight (sent but not yet received); a send beyond that suspends until the receiver takes some
/// (try_send returns EAGAIN instead). Senders blocked on one pair resume in the order they blocked.
/// Errors: a target that no longer accepts work makes send throw (try_send return) ESHUTDOWN; a message
/// the kernel refused after the send completed (the target ring went away) is counted in
/// executor_stats::messages_failed and makes the next send to that target throw EPIPE: none vanishes
/// unreported. The target must stay alive while messages may reach it (as for resume_on).
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <system_error>

#include "uring/error.hpp"
#include "uring/executor.hpp"

namespace uring {

/// A raw message: an int32 `value` and a uint64 `data`, all 96 bits the user's. Threads: a plain value.
struct message {
  std::int32_t value = 0;  ///< the user's
  std::uint64_t data = 0;  ///< the user's
  /// Same value and data.
  friend bool operator==(const message&, const message&) = default;
};

namespace detail {

/// A sender waiting for credit, or a receiver waiting for a message: intrusive FIFO links.
struct message_waiter {
  message_waiter* next = nullptr;
  std::coroutine_handle<> handle;
  std::error_code error;
  message msg;
};

/// Out of line (src/message_hub.cpp): what the awaitables below ask of the executors.
/// Sends now if the pair has credit and nobody waits before us: 0, or EAGAIN (window full or earlier
/// sends wait), ESHUTDOWN, EPIPE, EPERM (no executor on this thread). An errno, not an error_code, so that
/// a send that succeeds builds no error_code (each costs a call into libstdc++ for its category).
int try_send_message(executor& target, const message& m) noexcept;
/// try_send_message's answer as uring::try_send reports it: ESHUTDOWN in the system category (std::errc
/// has no such code), the others as their std::errc.
inline std::error_code message_error(int e) noexcept {
  return e == 0 ? std::error_code() : std::error_code(e, std::system_category());
}
/// Queues `w` behind the pair's blocked senders; it is sent (or fails) and resumed in turn.
void park_sender(executor& target, message_waiter& w);
/// std::logic_error off the owner's thread.
bool try_receive_message(executor& owner, message& out);
/// The next message into w.msg (false), or w parked until one comes (true). std::logic_error off the
/// owner's thread.
bool receive_or_park(executor& owner, message_waiter& w);
[[noreturn]] void throw_message_error(std::error_code e, const char* what);

/// A target of sends and hops (send_awaitable here, hop_awaitable in uring/resume_on.hpp) named by an
/// executor; handle_target (uring/executor_handle.hpp) names one by an executor_handle's id.
struct executor_target {
  executor* ex;
  static constexpr bool by_handle = false;
  [[nodiscard]] bool here() const noexcept { return executor::current() == ex; }
  /// MSG_RING where both ends can, else the mailbox.
  bool hand_off(remote_node& n) const noexcept { return executor_access::send(*ex, n); }
  /// As try_send_message.
  int try_send(const message& m) const noexcept { return try_send_message(*ex, m); }
  /// Queues the waiter as park_sender; false (nothing parked) if the target is gone.
  bool park(message_waiter& w) const {
    park_sender(*ex, w);
    return true;
  }
};

template <class Target>
class [[nodiscard]] send_awaitable {
 public:
  send_awaitable(Target target, message m) noexcept : target_(target) { waiter_.msg = m; }
  bool await_ready() {
    const int e = target_.try_send(waiter_.msg);
    if (e == 0) [[likely]]
      return true;
    if (e == EAGAIN) return false;
    throw_message_error(message_error(e), "uring::send");
  }
  bool await_suspend(std::coroutine_handle<> h) {
    waiter_.handle = h;
    if (target_.park(waiter_)) return true;
    waiter_.error = std::error_code(ESHUTDOWN, std::system_category());  // gone since await_ready
    return false;
  }
  void await_resume() const {
    if (waiter_.error) throw_message_error(waiter_.error, "uring::send");
  }

 private:
  Target target_;
  message_waiter waiter_;
};

class [[nodiscard]] receive_awaitable {
 public:
  explicit receive_awaitable(executor& owner) noexcept : owner_(owner) {}
  /// One call per message, whether it waits in the inbox or is still to come (not a try, then a park).
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    waiter_.handle = h;
    return receive_or_park(owner_, waiter_);
  }
  message await_resume() const noexcept { return waiter_.msg; }

 private:
  executor& owner_;
  message_waiter waiter_;
};

}  // namespace detail

/// Sends {value, data} to `target`'s inbox; suspends only while the pair's window is full. Throws
/// std::system_error (ESHUTDOWN, EPIPE); std::logic_error if no executor runs on this thread.
inline detail::send_awaitable<detail::executor_target> send(executor& target, std::int32_t value,
                                                            std::uint64_t data) noexcept {
  return {detail::executor_target{&target}, message{value, data}};
}

/// The same without suspending, yielding what every try_ form yields (uring::io_result, as .nothrow()):
/// true when sent; else -EAGAIN when the window is full or earlier sends wait, -ESHUTDOWN, -EPIPE, and
/// -EPERM if no executor runs on this thread.
inline io_result try_send(executor& target, std::int32_t value, std::uint64_t data) noexcept {
  return io_result{-detail::try_send_message(target, message{value, data})};
}

/// An executor's inbox: the messages sent to it, in arrival order.
class inbox {
 public:
  /// The inbox of `owner`; receive on that executor's thread only.
  explicit inbox(executor& owner) noexcept : owner_(owner) {}
  /// The next message, suspending until one arrives. Receivers waiting together are served in order.
  detail::receive_awaitable receive() const noexcept { return detail::receive_awaitable(owner_); }
  /// The next message if one has arrived, without suspending; std::nullopt otherwise.
  std::optional<message> try_receive() const {
    message m;
    if (detail::try_receive_message(owner_, m)) return m;
    return std::nullopt;
  }

 private:
  executor& owner_;
};

}  // namespace uring
