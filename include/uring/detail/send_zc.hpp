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
//
// Shutdown: an executor cannot cancel a notification, which comes only when the kernel frees the pages
// (over TCP, once the peer has read the data). Every zero-copy send is therefore listed (zc_watch) from
// its submission to its last completion, so that a shutdown that waited long enough for them can reset
// their connections, and, as the last resort, close its ring without them (src/net/zc_shutdown.hpp).
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

// A zero-copy send whose last completion has not come: listed per thread (an executor's operations
// live on its owner thread) while it is in flight.
struct zc_watch {
  zc_watch* prev = nullptr;
  zc_watch* next = nullptr;
  executor* ex = nullptr;
  operation* op = nullptr;  // the send
  std::uint64_t inode = 0;  // its socket's, when it was listed: the fd may be closed and reused since
  bool listed = false;
  // The executor closed its ring without the last completion: the send lets go of what it holds.
  void (*orphan)(operation* op) noexcept = nullptr;

  zc_watch() noexcept = default;
  zc_watch(const zc_watch&) = delete;
  zc_watch& operator=(const zc_watch&) = delete;
  ~zc_watch() { unlist(); }
  void list(executor& e, operation& send) noexcept;
  void unlist() noexcept;
};

class [[nodiscard]] send_zc_awaitable : private operation {
 public:
  send_zc_awaitable(int fd, const_buffer buf, std::uint32_t msg_flags) noexcept;
  // From registered buffer `buf_index` (uring/fixed_buffers.hpp): send_zc_fixed, or send_fixed where the
  // executor has no zero-copy send.
  send_zc_awaitable(int fd, const_buffer buf, std::uint32_t msg_flags, std::uint32_t buf_index) noexcept
      : send_zc_awaitable(fd, buf, msg_flags) {
    request.code = op_code::send_zc_fixed;
    request.aux = buf_index;
  }
  // Movable until it is awaited (g++ may move it into the coroutine frame).
  send_zc_awaitable(send_zc_awaitable&& o) noexcept : operation(o), ex_(o.ex_), sent_(o.sent_) {
    watch_.orphan = o.watch_.orphan;
  }
  send_zc_awaitable& operator=(send_zc_awaitable&&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h);
  // The bytes sent (maybe short); throws std::system_error("send_zc: ...").
  std::size_t await_resume();

 private:
  static void on_complete(operation* self) noexcept;
  executor* ex_ = nullptr;
  std::int32_t sent_ = 0;  // the first completion's result, once the notification is still to come
  zc_watch watch_;
};

}  // namespace uring::detail
