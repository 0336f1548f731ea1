/// @file
/// uring/op_allowlist.hpp — which operations an executor may start (io_uring ring restrictions).
///
/// Provides: uring::op_kind (our operations, by name), uring::op_allowlist.
/// Threads: plain values; any thread.
///
/// An executor built with a non-empty allowlist (executor_options::allowed_ops) starts only the operations
/// the list names. Any other completes at once with EACCES, without reaching the kernel: awaiting it throws
/// std::system_error(EACCES) whose message names the operation and says it is not in the allowlist (the
/// .nothrow() form yields io_result{-EACCES}). Both backends refuse identically, because the check is the
/// executor's own. The native backend also creates its ring disabled, tells the kernel the same list
/// (IORING_REGISTER_RESTRICTIONS) and only then enables it, so the kernel refuses everything else too, and
/// neither the library nor anything holding the ring fd can widen the list afterwards. Minimum kernel 5.10.
///
/// The kernel's list is the user's list plus what the executor needs for itself (docs/restrictions.md):
/// READ (the executor's wake-up read of its eventfd), ASYNC_CANCEL (cancellation, and the shutdown that
/// drains every operation before frames are freed) and LINK_TIMEOUT (with_timeout). Those stay refused to
/// the user's own operations unless the list names them (read, cancel_fd). IORING_OP_MSG_RING, which the
/// library uses for hand-offs between executors, is allowed only by allow_msg_ring(); without it messages
/// to and from the executor take the mailbox (the plan says so), which works the same, one eventfd write
/// per burst slower.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "uring/detail/op_code.hpp"

namespace uring {

/// The kinds of operation the library starts (read, recv, timeout...). Awaitables name theirs in errors.
using op_kind = detail::op_code;
/// The kind's name, as errors and inflight_op's to_string print it ("read", "recv", "timeout", ...).
const char* to_string(op_kind k) noexcept;

/// Which operations an executor may start (executor_options::allowed_ops; natively also registered as
/// io_uring ring restrictions, kernel 5.10). Any other completes at once with EACCES, without reaching the
/// kernel.
/// Threads: a plain value.
class op_allowlist {
 public:
  /// Restricts nothing.
  constexpr op_allowlist() noexcept = default;
  /// Allows exactly `ops` (an empty list restricts nothing).
  constexpr op_allowlist(std::initializer_list<op_kind> ops) noexcept {  // NOLINT: {read, write} reads well
    for (op_kind k : ops) allow(k);
  }

  /// Adds `k` to the list.
  constexpr op_allowlist& allow(op_kind k) noexcept {
    ops_.add(k);
    return *this;
  }
  /// Cross-executor hand-offs (resume_on, submit_to, spawn onto another executor, uring::send) may use
  /// IORING_OP_MSG_RING from this ring. Without it they use the mailbox.
  constexpr op_allowlist& allow_msg_ring() noexcept {
    msg_ring_ = true;
    return *this;
  }

  /// Whether the list restricts anything: it names at least one operation or MSG_RING.
  [[nodiscard]] constexpr bool restricts() const noexcept { return !ops_.empty() || msg_ring_; }
  /// Whether an executor with this list may start `k`.
  [[nodiscard]] constexpr bool allows(op_kind k) const noexcept { return !restricts() || ops_.contains(k); }
  /// Whether hand-offs may use IORING_OP_MSG_RING from this ring.
  [[nodiscard]] constexpr bool allows_msg_ring() const noexcept { return !restricts() || msg_ring_; }
  /// The op_kinds that are refused; empty when nothing is restricted.
  [[nodiscard]] constexpr detail::op_set refused() const noexcept {
    return restricts() ? ops_.complement() : detail::op_set{};
  }

  /// Same operations and MSG_RING permission.
  constexpr bool operator==(const op_allowlist&) const noexcept = default;

 private:
  detail::op_set ops_;
  bool msg_ring_ = false;
};

/// "read,write,timeout,msg_ring" (our names, in op_kind order, msg_ring last), or "unrestricted".
std::string to_string(const op_allowlist& list);

}  // namespace uring
