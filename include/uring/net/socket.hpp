/// @file
/// uring/net/socket.hpp — the file descriptor every socket type owns, and what all of them can do.
///
/// Provides: uring::net::socket, uring::net::cancel_fd.
/// Threads: a socket is a plain RAII value; its operations are awaited from a coroutine on an executor.
/// Moving or destroying it while another thread uses it is a data race, as for any object.
///
/// Sockets are plain fds (fd(), release()), created blocking and close-on-exec: io_uring waits for them
/// itself, and the emulated backend uses MSG_DONTWAIT per call, so no fd flag is needed. The destructor
/// closes the fd at once (close(2)). An operation still in flight on it then keeps running on io_uring,
/// which holds its own reference to the file, until the peer answers: when operations may be in flight,
/// `co_await s.close()` instead, which cancels them (they fail with ECANCELED) before it closes.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <utility>

#include "uring/detail/io_awaitable.hpp"
#include "uring/net/address.hpp"
#include "uring/task.hpp"

namespace uring::net {

/// Cancels every operation in flight on `fd` on this executor (IORING_ASYNC_CANCEL_FD|ALL, kernel 5.19):
/// they complete with ECANCELED. Yields how many were cancelled; the nothrow form says ENOENT for none.
inline detail::io_awaitable<unsigned> cancel_fd(int fd) noexcept {
  return {"cancel_fd", {.code = detail::op_code::cancel_fd, .fd = fd}};
}

/// The file descriptor every socket type owns, and what all of them can do. A plain fd (fd(), release()),
/// blocking and close-on-exec; the destructor closes it at once: when operations may be in flight,
/// `co_await s.close()` instead, which cancels them (ECANCELED) before it closes.
///
/// Threads: a plain RAII value; its operations are awaited from a coroutine on an executor. Moving or
/// destroying it while another thread uses it is a data race, as for any object.
class socket {
 public:
  /// An empty socket (no fd).
  socket() noexcept = default;
  /// Takes ownership of `fd`.
  explicit socket(int fd) noexcept : fd_(fd) {}
  ///@{
  /// Moves the fd; `o` is left empty (an assigned-to socket first closes its own).
  socket(socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  socket& operator=(socket&& o) noexcept;
  ///@}
  /// Closes the fd (close(2)), if any.
  ~socket();

  /// The fd, -1 when empty.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  ///@{
  /// True when the socket holds an fd.
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return is_open(); }
  ///@}
  /// Gives up ownership: the caller closes the fd.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  /// Cancels the operations in flight on this socket on the running executor, then closes it through the
  /// kernel. The socket is empty once the call starts. Throws std::system_error("close: ...").
  task<void> close();

  ///@{
  /// getsockname(2) / getpeername(2); std::system_error naming the call on failure.
  [[nodiscard]] address local_address() const;
  [[nodiscard]] address peer_address() const;
  ///@}

  /// setsockopt(2) with an int value; std::system_error("setsockopt ...") on failure.
  void set_option(int level, int name, int value);

 protected:
  /// socket(2) with SOCK_CLOEXEC; throws std::system_error("socket: ...").
  static int open_fd(int family, int type);

 private:
  int fd_ = -1;
};

}  // namespace uring::net
