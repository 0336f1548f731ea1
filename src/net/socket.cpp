// socket.cpp — the RAII fd shared by every socket type.
#include "uring/net/socket.hpp"

#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "uring/error.hpp"

namespace uring::net {

socket& socket::operator=(socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

socket::~socket() {
  if (fd_ >= 0) ::close(fd_);
}

task<void> socket::close() {
  // Owned by the frame from here on: the fd is closed on every path, also if the frame is destroyed
  // while it waits (an executor shutting down).
  socket owned(std::exchange(fd_, -1));
  if (!owned) co_return;
  // Operations parked on the socket would otherwise keep it open inside io_uring (and its peer waiting).
  co_await cancel_fd(owned.fd()).nothrow();
  // close(2) of a socket does not wait (without SO_LINGER), so it needs no trip through the ring.
  if (::close(owned.release()) != 0 && errno != EINTR) throw_errno(errno, "close");
}

namespace {
// getsockname(2) or getpeername(2), which share a signature.
address name_of(int fd, int (*call)(int, sockaddr*, socklen_t*), const char* what) {
  address a;
  socklen_t len = address::capacity();
  if (call(fd, a.data(), &len) != 0) throw std::system_error(errno, std::system_category(), what);
  a.resize(len);
  return a;
}
}  // namespace

address socket::local_address() const { return name_of(fd_, ::getsockname, "getsockname"); }

address socket::peer_address() const { return name_of(fd_, ::getpeername, "getpeername"); }

void socket::set_option(int level, int name, int value) {
  if (::setsockopt(fd_, level, name, &value, sizeof value) != 0) {
    throw std::system_error(errno, std::system_category(),
                            "setsockopt(" + std::to_string(level) + ", " + std::to_string(name) + ")");
  }
}

int socket::open_fd(int family, int type) {
  int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "socket");
  return fd;
}

}  // namespace uring::net
