/// @file
/// uring/net/socket_ops.hpp — making a socket, binding and listening as operations on the ring.
///
/// Provides: uring::net::open_socket, uring::net::open_socket_direct, uring::net::bind, uring::net::listen
/// (on a plain fd or a direct_fd).
/// Threads: await them from a coroutine running on an executor; the operation runs on that executor.
///
/// The ring's socket(2), bind(2) and listen(2): awaiting yields the result or throws std::system_error
/// naming the call ("bind: Address already in use"); `.nothrow()` yields a uring::io_result instead, and
/// with_timeout / with_stop_token apply. The address is copied into the awaitable. Natively they need
/// kernel 5.19 (socket) or 6.11 (bind, listen): an older kernel fails them with EINVAL. The emulation
/// runs the syscall of the same name at submission, on the executor's thread; none of them waits.
/// tcp_listener::bind does the same synchronously, from any thread, with the usual socket options.
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "uring/direct.hpp"
#include "uring/io.hpp"
#include "uring/net/address.hpp"
#include "uring/net/tcp_stream.hpp"
#include "uring/task.hpp"

namespace uring::net {

/// A new socket of `domain` (AF_INET, AF_INET6, AF_UNIX), `type` (SOCK_STREAM, SOCK_DGRAM, ..., may add
/// SOCK_NONBLOCK) and `protocol` (0: the domain's usual one), as socket(2), always close-on-exec. Yields
/// the fd, the caller's to close.
inline detail::io_awaitable<int> open_socket(int domain, int type, int protocol = 0) noexcept {
  return {"socket",
          {.code = detail::op_code::socket,
           .fd = domain,
           .len = static_cast<std::uint32_t>(protocol),
           .op_flags = static_cast<std::uint32_t>(type | SOCK_CLOEXEC)}};
}

/// As open_socket, the new socket put straight into a free slot of the running executor's table of
/// direct descriptors (uring/direct.hpp); no plain fd is made. Throws std::system_error
/// ("uring::socket_direct(<domain>): ...") with ENXIO (the executor has no table), ENFILE (the table is
/// full), or socket(2)'s own errors.
task<direct_fd> open_socket_direct(int domain, int type, int protocol = 0);

///@{
/// Gives the socket `fd` the local address `local`, as bind(2) (port 0: the kernel picks a free one).
/// Or the socket in slot `f` of the executor's table of direct descriptors. IORING_OP_BIND: kernel 6.11
/// (EINVAL on an older one).
inline detail::io_awaitable<void, true, detail::connect_payload> bind(int fd, const address& local) {
  return {"bind", {.code = detail::op_code::bind, .fd = fd}, detail::connect_payload{local}};
}
inline detail::io_awaitable<void, true, detail::connect_payload> bind(direct_fd f, const address& local) {
  return {"bind",
          {.code = detail::op_code::bind, .direct = true, .fd = static_cast<std::int32_t>(f.index)},
          detail::connect_payload{local}};
}
///@}

///@{
/// Makes the bound stream socket `fd` accept connections, at most `backlog` waiting (capped by
/// net.core.somaxconn), as listen(2).
/// Or the socket in slot `f` of the executor's table of direct descriptors. IORING_OP_LISTEN: kernel 6.11
/// (EINVAL on an older one).
inline detail::io_awaitable<void> listen(int fd, int backlog = SOMAXCONN) noexcept {
  return {"listen", {.code = detail::op_code::listen, .fd = fd, .len = static_cast<std::uint32_t>(backlog)}};
}
inline detail::io_awaitable<void> listen(direct_fd f, int backlog = SOMAXCONN) noexcept {
  return {"listen",
          {.code = detail::op_code::listen,
           .direct = true,
           .fd = static_cast<std::int32_t>(f.index),
           .len = static_cast<std::uint32_t>(backlog)}};
}
///@}

}  // namespace uring::net
