// blocking_socket.hpp — the few socket calls uring-fiber-echo needs, in blocking style on a fiber.
//
// Provides: echo::socket (an owned fd), echo::listen_tcp, echo::accept, echo::read_some, echo::write_all.
// Threads: call them from a fiber (they use uring::this_fiber::await); `listen_tcp` from anywhere.
//
// There is no networking layer yet (uring::net is being built): these wrap raw non-blocking sockets with
// uring::poll / uring::read / uring::write, so that switching the sample to uring::net later touches only
// this file. Each call waits for readiness, then makes the non-blocking call (io_uring hands a socket
// opened O_NONBLOCK back with EAGAIN rather than waiting itself).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <span>
#include <system_error>
#include <utility>

#include <uring/fiber.hpp>
#include <uring/io.hpp>

namespace echo {

class socket {
 public:
  socket() = default;
  explicit socket(int fd) noexcept : fd_(fd) {}
  socket(socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  socket& operator=(socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

[[noreturn]] inline void fail(const char* what) {
  throw std::system_error(errno, std::system_category(), what);
}

// A listening TCP socket on 127.0.0.1:port (0: any free port); `bound_port` receives the port it got.
inline socket listen_tcp(std::uint16_t port, std::uint16_t& bound_port) {
  socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd() < 0) fail("socket");
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
  if (::listen(s.fd(), SOMAXCONN) != 0) fail("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
  bound_port = ntohs(addr.sin_port);
  return s;
}

// The next connection (blocks this fiber only).
inline socket accept(const socket& listener) {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return socket(fd);
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) fail("accept4");
    uring::this_fiber::await(uring::poll(listener.fd(), POLLIN));
  }
}

// Up to buf.size() bytes; 0 when the peer has closed.
inline std::size_t read_some(const socket& s, std::span<char> buf) {
  for (;;) {
    uring::io_result r = uring::this_fiber::await(uring::read(s.fd(), buf).nothrow());
    if (r.res >= 0) return static_cast<std::size_t>(r.res);
    if (r.res != -EAGAIN) throw std::system_error(-r.res, std::system_category(), "read");
    uring::this_fiber::await(uring::poll(s.fd(), POLLIN));
  }
}

inline void write_all(const socket& s, std::span<const char> data) {
  while (!data.empty()) {
    uring::io_result r = uring::this_fiber::await(uring::write(s.fd(), data).nothrow());
    if (r.res >= 0) {
      data = data.subspan(static_cast<std::size_t>(r.res));
    } else if (r.res == -EAGAIN) {
      uring::this_fiber::await(uring::poll(s.fd(), POLLOUT));
    } else {
      throw std::system_error(-r.res, std::system_category(), "write");
    }
  }
}

}  // namespace echo
