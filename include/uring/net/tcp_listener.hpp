/// @file
/// uring/net/tcp_listener.hpp — a listening stream socket: TCP, or unix-domain (unix_listener).
///
/// Provides: uring::net::tcp_listener, uring::net::unix_listener, uring::net::listen_options.
/// Threads: bind() from any thread; await accept() / accept_all() from a coroutine on an executor.
///
/// bind() is synchronous (socket, setsockopt, bind, listen: none of them waits) and throws
/// std::system_error naming the call and the address ("bind 127.0.0.1:80: Permission denied"). Binding
/// port 0 picks a free port: local_address() says which. With listen_options::reuse_port, several
/// listeners (one per executor, thread-per-core) bind the same port and the kernel spreads connections
/// among them. A unix-domain listener does not remove its path when it closes (as with bind(2)).
#pragma once

#include "uring/direct.hpp"
#include "uring/net/accept_stream.hpp"
#include "uring/net/address.hpp"
#include "uring/net/socket.hpp"
#include "uring/net/tcp_stream.hpp"

namespace uring::net {

/// How tcp_listener::bind sets the socket up. Threads: a plain value.
struct listen_options {
  int backlog = 4096;         ///< capped by net.core.somaxconn
  bool reuse_address = true;  ///< SO_REUSEADDR (IP only): rebind at once after a restart
  bool reuse_port = false;    ///< SO_REUSEPORT (IP only): one listener per executor on the same port
};

/// A listening stream socket: TCP, or unix-domain (unix_listener).
///
/// Threads: bind() from any thread; await accept() / accept_all() from a coroutine on an executor.
class tcp_listener : public socket {
 public:
  using socket::socket;

  /// A socket bound to `local` and listening, synchronously (socket, setsockopt, bind, listen: none of them
  /// waits). Port 0 picks a free port: local_address() says which. Throws std::system_error naming the call
  /// and the address ("bind 127.0.0.1:80: Permission denied").
  static tcp_listener bind(const address& local, const listen_options& opts = {});

  /// One connection (IORING_OP_ACCEPT). The new socket is blocking and close-on-exec. The nothrow form
  /// yields the new fd in io_result::res: wrap it in a tcp_stream to own it.
  [[nodiscard]] detail::io_awaitable<tcp_stream> accept() const noexcept {
    return {"accept", {.code = detail::op_code::accept, .fd = fd(), .op_flags = SOCK_CLOEXEC}};
  }

  /// One connection as a direct descriptor (uring/direct.hpp): the new socket goes into a free slot of
  /// the running executor's table (IORING_OP_ACCEPT with IORING_FILE_INDEX_ALLOC, 5.19), never into the
  /// process's file table. Read and write it through the slot; close_direct closes it. Throws
  /// std::system_error: ENXIO (no table: executor_options::direct_files), ENFILE (the table is full: the
  /// connection is closed), or accept's own errors.
  [[nodiscard]] task<direct_fd> accept_direct() const;

  /// Every connection, from one multishot accept (see uring/net/accept_stream.hpp). The listener must
  /// outlive the stream.
  [[nodiscard]] accept_stream accept_all() const { return accept_stream(fd()); }
  /// The same, each connection in a free slot of the running executor's table of direct descriptors
  /// (uring/direct.hpp): next() yields the slot. ENXIO without a table; a full table ends the request
  /// with ENFILE (that connection is closed).
  [[nodiscard]] accept_direct_stream accept_all_direct() const { return accept_direct_stream(fd()); }
};

/// A unix-domain listener is the same type, bound to a unix address.
using unix_listener = tcp_listener;

}  // namespace uring::net
