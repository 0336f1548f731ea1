// samples/http/link.cpp — a connection's bytes over plain TCP or over uring::tls.
#include "link.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

#ifdef URING_WITH_TLS
#include <uring/tls/tls.hpp>
#endif

namespace sample {

namespace {

constexpr std::size_t file_piece = 256 * 1024;  // send_file's piece: each must go out within the timeout
constexpr std::size_t tls_piece = 64 * 1024;    // with TLS, the buffer a file is read into and encrypted from

}  // namespace

#ifdef URING_WITH_TLS
link::link(uring::tls::tls_stream& t) noexcept : socket_(&t.next_layer()), tls_(&t) {}
#else
link::link(uring::tls::tls_stream&) noexcept : socket_(nullptr) {}
#endif

namespace {

// The read read_plain waits in, made in a plain function: read_some's awaitable and its nothrow() form
// are each a temporary that in the coroutine's own expression would take a slot in its frame.
auto plain_read(uring::net::tcp_stream& s, std::span<char> buf) { return s.read_some(buf).nothrow(); }

// link::read_some's two ways, a coroutine each: a connection waiting in a read holds the frame of its own
// way only, not one sized for both.
uring::task<std::int32_t> read_plain(uring::net::tcp_stream& s, std::span<char> buf) {
  co_return (co_await plain_read(s, buf)).res;
}

#ifdef URING_WITH_TLS
uring::task<std::int32_t> read_tls(uring::tls::tls_stream& t, std::span<char> buf) {
  uring::result<std::size_t> r = co_await t.read_some(buf).nothrow();
  if (r) co_return static_cast<std::int32_t>(r.value());
  co_return r.error().category() == std::system_category() ? -r.error().value() : -EPROTO;
}
#endif

}  // namespace

uring::task<std::int32_t> link::read_some(std::span<char> buf) const {
#ifdef URING_WITH_TLS
  if (tls_ != nullptr) return read_tls(*tls_, buf);
#endif
  return read_plain(socket(), buf);
}

// The stream's own write, returned rather than awaited here: a frame less per answer.
uring::task<void> link::write_all(std::string_view bytes) const {
#ifdef URING_WITH_TLS
  if (tls_ != nullptr) return tls_->write_all(std::span(bytes.data(), bytes.size()));
#endif
  return socket().write_all(std::span(bytes.data(), bytes.size()));
}

uring::task<bool> link::send_file(int fd, std::uint64_t size, std::chrono::milliseconds timeout,
                                  std::stop_token abort) const {
  if (tls_ == nullptr) {
    // A piece in flight inside the kernel ends at once when the socket is shut down.
    std::stop_callback on_abort(abort, [s = socket().fd()] { ::shutdown(s, SHUT_RDWR); });
    for (std::uint64_t done = 0; done < size;) {
      const std::size_t want = size - done < file_piece ? static_cast<std::size_t>(size - done) : file_piece;
      const std::size_t sent = co_await uring::with_timeout(socket().send_file(fd, done, want), timeout);
      if (sent < want) co_return false;
      done += sent;
    }
    co_return true;
  }
  std::vector<char> piece(static_cast<std::size_t>(std::min<std::uint64_t>(size, tls_piece)));
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t want = std::min<std::uint64_t>(size - done, piece.size());
    const std::size_t got = co_await uring::read_at(fd, std::span(piece.data(), want), done);
    if (got == 0) co_return false;
    co_await uring::with_stop_token(uring::with_timeout(write_all({piece.data(), got}), timeout), abort);
    done += got;
  }
  co_return true;
}

uring::task<void> link::close_write() const {
#ifdef URING_WITH_TLS
  if (tls_ != nullptr) {
    co_await tls_->shutdown().nothrow();
    co_return;
  }
#endif
  co_await socket().shutdown().nothrow();
}

}  // namespace sample
