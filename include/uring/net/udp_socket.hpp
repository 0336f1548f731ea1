/// @file
/// uring/net/udp_socket.hpp — datagrams: send_to and recv_from over the ring.
///
/// Provides: uring::net::udp_socket, uring::net::datagram.
/// Threads: bind/open from any thread; await its operations from a coroutine on an executor.
///
/// send_to and recv_from are single operations (IORING_OP_SENDMSG / RECVMSG, kernel 5.3) with the usual
/// forms: they throw std::system_error naming the operation, and `.nothrow()`, uring::with_timeout and
/// uring::with_stop_token apply. The destination address is copied into the operation; the buffer must
/// stay valid until the co_await returns. A datagram longer than the buffer is truncated (the rest is lost,
/// as with recvfrom(2)).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>

#include "uring/buffer.hpp"
#include "uring/io.hpp"
#include "uring/net/address.hpp"
#include "uring/net/socket.hpp"

namespace uring::net {

/// What recv_from yields: the datagram's size (as received into the buffer) and its sender.
struct datagram {
  std::size_t size = 0;  ///< the bytes received into the buffer
  address from;          ///< the sender
};

}  // namespace uring::net

namespace uring::detail {

/// A msghdr for one buffer and an address, owned by its operation: the kernel reads it after submission.
struct msg_payload {
  net::address peer;
  ::iovec iov{};
  ::msghdr msg{};
  void bind(io_request& r) noexcept {
    msg = {};
    msg.msg_name = peer.data();
    msg.msg_namelen = r.code == op_code::recvmsg ? net::address::capacity() : peer.size();
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    r.addr = &msg;
  }
};

/// recv_from's: yields the datagram with its sender.
struct recv_from_payload : msg_payload {
  net::datagram value(std::int32_t res) noexcept {
    peer.resize(msg.msg_namelen);
    return {static_cast<std::size_t>(res), peer};
  }
};

}  // namespace uring::detail

namespace uring::net {

/// A datagram socket: send_to and recv_from over the ring (IORING_OP_SENDMSG / RECVMSG, kernel 5.3), which
/// throw std::system_error naming the operation and take `.nothrow()`, uring::with_timeout and
/// uring::with_stop_token. The buffer must stay valid until the co_await returns.
///
/// Threads: bind/open from any thread; await its operations from a coroutine on an executor.
class udp_socket : public socket {
 public:
  using socket::socket;

  /// An unbound datagram socket of `family` (AF_INET, AF_INET6): the kernel picks a port at the first send.
  static udp_socket open(int family);
  /// Bound to `local` (port 0: any free port; local_address() says which). `reuse_port`: SO_REUSEPORT.
  static udp_socket bind(const address& local, bool reuse_port = false);

  /// Sends one datagram to `to`; yields the bytes sent.
  [[nodiscard]] detail::io_awaitable<std::size_t, true, detail::msg_payload> send_to(
      const_buffer buf, const address& to) const {
    detail::msg_payload p{to, {const_cast<void*>(buf.data()), buf.size()}, {}};
    return {
        "send_to", {.code = detail::op_code::sendmsg, .fd = fd(), .op_flags = MSG_NOSIGNAL}, std::move(p)};
  }

  /// Receives one datagram into `buf`; yields its size and sender.
  [[nodiscard]] detail::io_awaitable<datagram, true, detail::recv_from_payload> recv_from(
      mutable_buffer buf) const {
    detail::recv_from_payload p;
    p.iov = {buf.data(), buf.size()};
    return {"recv_from", {.code = detail::op_code::recvmsg, .fd = fd()}, std::move(p)};
  }
};

}  // namespace uring::net
