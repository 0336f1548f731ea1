/// @file
/// uring/tls/stream.hpp — a TLS connection over a connected uring::net::tcp_stream.
///
/// Provides: uring::tls::tls_stream.
/// Threads: await its operations from coroutines on one executor. After the handshake one read
/// (read_some, read_exactly) and one write (write_all, shutdown) may be in flight together, from two
/// coroutines; a second of the same kind, or anything alongside the handshake, throws std::logic_error.
/// Only one of them sends at a time: a write needing room while a read sends (TLS output of its own, such
/// as a key update's answer) waits for that send, within the read's limits.
///
/// OpenSSL runs over a BIO pair in memory: every ciphertext byte is moved by the executor's own recv and
/// send on the socket, never by a syscall inside OpenSSL. Each direction stages at most one TLS record
/// (16 KiB + 2 KiB of overhead + its header) in that pair; a stream holds about 37 KiB besides OpenSSL's
/// own record buffers, which it frees while idle (SSL_MODE_RELEASE_BUFFERS).
///
/// Every operation is a task: uring::with_timeout(s.read_exactly(buf), d) bounds the whole call
/// (ETIMEDOUT, std::system_category), and the awaiting task's stop token (or with_stop_token's) cancels it
/// (ECANCELED); both reach each receive and send it issues. A handshake has no deadline of its own: give
/// it one, or a peer that never finishes it holds the stream forever.
/// TLS errors are std::system_error in tls_category() (uring/tls/error.hpp); the peer's close_notify reads
/// as end of stream (0 bytes), a close without it fails with tls_errc::truncated.
/// After a failure the stream can only be closed (destroyed), with one exception: a read that timed out or
/// was stopped while waiting for the peer can be retried, or followed by a write (bytes already received
/// stay staged); a write, handshake or shutdown cut short may have left part of a record on the wire.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "uring/buffer.hpp"
#include "uring/net/tcp_stream.hpp"
#include "uring/task.hpp"
#include "uring/tls/context.hpp"

namespace uring::tls {

/// A TLS connection over a connected uring::net::tcp_stream, OpenSSL over a BIO pair in memory: every
/// ciphertext byte moves by the executor's own recv and send. Every operation is a task: with_timeout and
/// stop tokens apply. TLS errors are std::system_error in tls_category(); after a failure the stream can
/// only be closed, except a read that timed out or was stopped (the file's comment has the details).
///
/// Threads: await its operations from coroutines on one executor. After the handshake one read
/// (read_some, read_exactly) and one write (write_all, shutdown) may be in flight together, from two
/// coroutines; a second of the same kind, or anything alongside the handshake, throws std::logic_error.
class tls_stream {
 public:
  /// The client end of `s`. `host` is sent as SNI (unless it is an IP address) and, when the context
  /// verifies, is the name (or IP address) the server's certificate must carry; it also keys the context's
  /// session cache, so a later connection to the same host resumes.
  static tls_stream client(const tls_context& ctx, net::tcp_stream s, std::string host);
  /// The server end of `s`; `ctx` must be a server context.
  static tls_stream server(const tls_context& ctx, net::tcp_stream s);

  ///@{
  /// Moves the connection.
  tls_stream(tls_stream&&) noexcept;
  tls_stream& operator=(tls_stream&&) noexcept;
  ///@}
  /// Frees the connection and closes its socket (shutdown() is what sends close_notify).
  ~tls_stream();

  /// Runs the handshake. Throws tls_errc::verify_failed ("handshake: certificate verify failed: ..."),
  /// tls_errc::protocol (an alert, no shared protocol), tls_errc::truncated, or a socket error.
  task<void> handshake();

  /// Up to buf.size() bytes of plaintext; 0 once the peer has sent close_notify (and at every call after).
  task<std::size_t> read_some(mutable_buffer buf);
  /// Fills `buf`; close_notify first fails with ENODATA ("read_exactly: end of stream after N of M bytes").
  task<void> read_exactly(mutable_buffer buf);
  /// Sends all of `buf` as records of up to 16 KiB.
  task<void> write_all(const_buffer buf);
  /// Sends close_notify, then ends the socket's sending side (SHUT_WR). Does not wait for the peer's.
  task<void> shutdown();

  ///@{
  /// After the handshake: the ALPN protocol agreed on (empty: none), the server name the client asked for
  /// by SNI (empty: none), whether the session was resumed, the protocol version ("TLSv1.3").
  [[nodiscard]] std::string_view alpn() const noexcept;
  [[nodiscard]] std::string_view server_name() const noexcept;
  [[nodiscard]] bool resumed() const noexcept;
  [[nodiscard]] std::string_view version() const noexcept;
  ///@}
  /// After the handshake: the subject of the certificate the peer presented and the handshake verified,
  /// one line as RFC 2253 writes it ("CN=client,O=Example"); empty when the peer sent none (a server whose
  /// context did not ask for client certificates always sees none).
  [[nodiscard]] std::string peer_subject() const;

  /// The socket underneath (for its address, options, or close()).
  [[nodiscard]] net::tcp_stream& next_layer() noexcept;

  struct state;  ///< the SSL object, its BIO pair and the socket (tls/src/stream.cpp)

 private:
  explicit tls_stream(std::unique_ptr<state> s) noexcept;
  std::unique_ptr<state> state_;
};

}  // namespace uring::tls
