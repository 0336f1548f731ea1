// samples/http/link.hpp — one uring-http connection's bytes: the TCP stream itself, or TLS over it (the
// HTTPS port), so that the request loop is written once for both.
//
// Provides: sample::link.
// Threads: a link belongs to its connection's coroutine, on its worker's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string_view>

#include <uring/net/tcp_stream.hpp>
#include <uring/task.hpp>

namespace uring::tls {
class tls_stream;
}

namespace sample {

// A view of the connection's bytes, copied freely: the stream (or the TLS stream) outlives it.
class link {
 public:
  // Plain TCP over `s`.
  explicit link(uring::net::tcp_stream& s) noexcept : socket_(&s) {}
  // TLS over `t`.
  explicit link(uring::tls::tls_stream& t) noexcept;

  [[nodiscard]] uring::net::tcp_stream& socket() const noexcept { return *socket_; }
  [[nodiscard]] bool secure() const noexcept { return tls_ != nullptr; }

  // Up to buf.size() bytes: the count, 0 at end of stream (with TLS: the peer's close_notify), or -errno
  // (a TLS failure is -EPROTO). The awaiting task's deadline and stop token end it.
  [[nodiscard]] uring::task<std::int32_t> read_some(std::span<char> buf) const;
  // All of `bytes`, or std::system_error.
  [[nodiscard]] uring::task<void> write_all(std::string_view bytes) const;
  // `size` bytes of the file `fd` from its start, a piece at a time (send_file on plain TCP; read and
  // encrypted through a 64 KiB buffer with TLS), each piece within `timeout`, all of it ended by `abort`
  // (std::system_error). False if the file ended early: it shrank while being sent, so the promised
  // Content-Length cannot be met and the connection must close.
  [[nodiscard]] uring::task<bool> send_file(int fd, std::uint64_t size, std::chrono::milliseconds timeout,
                                            std::stop_token abort) const;
  // Ends our sending side: a FIN, or with TLS a close_notify. Never throws.
  [[nodiscard]] uring::task<void> close_write() const;

 private:
  uring::net::tcp_stream* socket_;  // the stream itself, or the one under TLS
  uring::tls::tls_stream* tls_ = nullptr;
};

}  // namespace sample
