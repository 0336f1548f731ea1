/// @file
/// uring/net/tcp_stream.hpp — a connected stream socket: TCP, or unix-domain (unix_stream).
///
/// Provides: uring::net::tcp_stream, uring::net::unix_stream.
/// Threads: await its operations from a coroutine on an executor; see uring/net/socket.hpp for the rest.
///
/// The single operations (connect, read_some, write_some, shutdown) are the library's ordinary
/// awaitables: they throw std::system_error naming the operation ("connect: Connection refused"), and
/// `.nothrow()`, uring::with_timeout and uring::with_stop_token apply to them. The composite ones
/// (connect_to, read_exactly, write_all) are tasks, to which the same adapters apply: with_timeout bounds
/// the whole call, and each step follows the awaiting task's stop token (or with_stop_token's). A timeout
/// fails with ETIMEDOUT, a stop with ECANCELED. Buffers must stay valid until the co_await returns. Sends
/// never raise SIGPIPE (MSG_NOSIGNAL): a peer that has gone is EPIPE or ECONNRESET. Minimum kernel: 5.6
/// (IORING_OP_CONNECT/SEND/RECV), 5.11 for shutdown.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <stop_token>

#include "uring/buffer.hpp"
#include "uring/detail/send_zc.hpp"
#include "uring/io.hpp"
#include "uring/net/address.hpp"
#include "uring/net/buffer_pool.hpp"
#include "uring/net/leased_recv.hpp"
#include "uring/net/socket.hpp"
#include "uring/task.hpp"

namespace uring::detail {
/// The peer address of a connect, owned by its operation (the kernel reads it after submission).
struct connect_payload {
  net::address peer;
  void bind(io_request& r) noexcept {
    r.addr = peer.data();
    r.len = peer.size();
  }
};
}  // namespace uring::detail

namespace uring::net {

/// A connected stream socket: TCP, or unix-domain (unix_stream). The single operations (connect,
/// read_some, write_some, shutdown) throw std::system_error naming the operation and take `.nothrow()`,
/// uring::with_timeout and uring::with_stop_token; the composite ones (connect_to, read_exactly, write_all)
/// are tasks, to which the same adapters apply.
///
/// Threads: await its operations from a coroutine on an executor; the socket itself is a plain RAII value
/// (uring::net::socket).
class tcp_stream : public socket {
 public:
  using socket::socket;

  /// A new, unconnected stream socket of `family` (AF_INET, AF_INET6, AF_UNIX).
  static tcp_stream open(int family);
  /// Opens a socket for `peer`'s family and connects it. Bound it with uring::with_timeout.
  static task<tcp_stream> connect_to(address peer);

  /// Connects this (opened, unconnected) socket to `peer`.
  [[nodiscard]] detail::io_awaitable<void, true, detail::connect_payload> connect(const address& peer) const {
    return {"connect", {.code = detail::op_code::connect, .fd = fd()}, detail::connect_payload{peer}};
  }

  /// Receives up to buf.size() bytes; yields the count, 0 when the peer has shut its side down.
  [[nodiscard]] detail::io_awaitable<std::size_t> read_some(mutable_buffer buf) const noexcept {
    return {"read_some",
            {.code = detail::op_code::recv,
             .fd = fd(),
             .len = detail::clamp_len(buf.size()),
             .addr = buf.data()}};
  }

  /// The next received chunk, in a buffer leased from `pool` (uring/net/buffer_pool.hpp): empty at end of
  /// stream (and at every call after it). Throws std::system_error("recv: ...") for an error, ECANCELED
  /// on a stop request (the awaiting task's token, or with_stop_token's), ETIMEDOUT when with_timeout's time
  /// passes first; `.nothrow()` yields a recv_result instead. An interrupted receive takes no bytes (they
  /// wait for the next one; see uring/net/leased_recv.hpp). The first call binds the stream to `pool` and to
  /// the running executor, which must be the pool's; natively it keeps a recv armed, one chunk ahead, while
  /// the stream holds fewer than the pool's max_per_stream buffers (queued chunks and leases not yet
  /// returned); at the limit the receive waits for one of them to be returned. Not to be mixed with
  /// read_some while chunks may be waiting in the stream.
  [[nodiscard]] recv_awaitable recv(buffer_pool& pool) {
    return receiver_.recv(fd(), pool, std::stop_token{});
  }

  /// Sends up to buf.size() bytes; yields the count, which may be short.
  [[nodiscard]] detail::io_awaitable<std::size_t> write_some(const_buffer buf) const noexcept {
    return {"write_some",
            {.code = detail::op_code::send,
             .fd = fd(),
             .len = detail::clamp_len(buf.size()),
             .op_flags = MSG_NOSIGNAL,
             .addr = const_cast<void*>(buf.data())}};
  }

  /// Sends up to buf.size() bytes without copying them (IORING_OP_SEND_ZC, kernel 6.0; elsewhere, and with
  /// URING_DISABLE=send_zc, a plain send); yields the count, which may be short. Completes only once the
  /// kernel no longer reads `buf`, so the buffer is the caller's again when the co_await returns. Pays off
  /// for large sends (tens of KiB and up) to a real network; loopback copies anyway. Cannot be cancelled;
  /// an executor shut down while the peer does not read resets the connection after a grace (executor.hpp).
  [[nodiscard]] detail::send_zc_awaitable send_zc(const_buffer buf) const noexcept {
    return {fd(), buf, MSG_NOSIGNAL};
  }
  /// Sends all of `buf` by send_zc, looping on short sends. Throws std::system_error("send_zc: ...").
  task<void> write_all_zc(const_buffer buf) const;

  /// Sends `len` bytes of the file `file_fd` from `offset` (its own position is not used or moved), as
  /// sendfile(2) would, through a pipe by IORING_OP_SPLICE: file -> pipe -> socket, the bytes never copied
  /// to user space (emulated: splice(2) on the same path). Yields the bytes sent: fewer than `len` only if
  /// the file ends first. Throws std::system_error("send_file: ...").
  task<std::size_t> send_file(int file_fd, std::uint64_t offset, std::size_t len) const;

  /// Shuts down one or both directions: SHUT_WR (the peer reads end of stream), SHUT_RD, SHUT_RDWR.
  [[nodiscard]] detail::io_awaitable<void> shutdown(int how = SHUT_WR) const noexcept {
    return {"shutdown",
            {.code = detail::op_code::shutdown, .fd = fd(), .len = static_cast<std::uint32_t>(how)}};
  }

  /// Fills `buf` completely. If the peer ends the stream first, throws std::system_error(ENODATA,
  /// "read_exactly: end of stream after N of M bytes"); the bytes read so far are in buf.
  task<void> read_exactly(mutable_buffer buf) const;
  /// Sends all of `buf`, looping on short writes. A buffer of 64 KiB or more goes by zero-copy sends where
  /// the executor has them (natively, kernel 6.0+; measured in bench/README.md), a smaller one by copying
  /// sends; either way the buffer is the caller's again when the co_await returns. A zero-copy write that
  /// times out or is stopped after the kernel took pages of the buffer can only get them back by resetting
  /// the connection (a peer that does not read never acknowledges them): it does so, and fails with
  /// ETIMEDOUT or ECANCELED as any write_all; the stream is then reset (ECONNRESET for the peer).
  /// Under a time limit or a stop token, a copying write_all first sends what the socket has room for
  /// with a send that cannot wait (MSG_DONTWAIT), which needs no linked timeout or cancel; only the rest
  /// waits within the limits. Limits that have passed before it starts fail it with nothing sent.
  task<void> write_all(const_buffer buf) const;

  /// TCP_NODELAY (TCP only).
  void set_nodelay(bool on);

  /// Bytes written and not yet acknowledged by the peer (SIOCOUTQ), 0 when the kernel cannot say: they
  /// pile up when the peer stops reading, so a server can tell that a write may wait on it (one syscall).
  [[nodiscard]] std::size_t unacknowledged() const noexcept;

 private:
  leased_receiver receiver_;  ///< recv(pool)'s state, made by its first call
};

/// A unix-domain stream socket is the same type: every operation above applies (set_nodelay does not).
using unix_stream = tcp_stream;

}  // namespace uring::net
