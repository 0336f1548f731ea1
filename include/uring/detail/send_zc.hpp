// uring/detail/send_zc.hpp — the awaitable behind tcp_stream::send_zc: a zero-copy send, done only once
// the kernel has let go of the buffer.
//
// Provides: detail::send_zc_awaitable.
// Threads: await from a coroutine on an executor.
//
// IORING_OP_SEND_ZC (kernel 6.0) completes twice: the byte count (flagged IORING_CQE_F_MORE), then a
// notification (IORING_CQE_F_NOTIF) when the kernel no longer reads the pages. The caller's buffer must
// stay untouched until then, so the awaitable resumes only on the notification, yielding the first
// completion's count. Where the executor cannot (emulated, older kernels, URING_DISABLE=send_zc) it is a
// plain send: one completion, the same result; so it is on a socket that refuses zero-copy (unix-domain:
// EOPNOTSUPP), where the send is retried as a copy. No cancellation: a send in progress is not torn.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>

#include "uring/buffer.hpp"
#include "uring/detail/operation.hpp"

namespace uring {
class executor;
}

namespace uring::detail {

class [[nodiscard]] send_zc_awaitable : private operation {
 public:
  send_zc_awaitable(int fd, const_buffer buf, std::uint32_t msg_flags) noexcept;
  // Movable until it is awaited (g++ may move it into the coroutine frame).
  send_zc_awaitable(send_zc_awaitable&& o) noexcept : operation(o), ex_(o.ex_), sent_(o.sent_) {}
  send_zc_awaitable& operator=(send_zc_awaitable&&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h);
  // The bytes sent (maybe short); throws std::system_error("send_zc: ...").
  std::size_t await_resume();

 private:
  static void on_complete(operation* self) noexcept;
  executor* ex_ = nullptr;
  std::int32_t sent_ = 0;  // the first completion's result, once the notification is still to come
};

}  // namespace uring::detail
