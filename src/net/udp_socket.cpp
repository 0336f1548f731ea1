// udp_socket.cpp — opening and binding datagram sockets.
#include "uring/net/udp_socket.hpp"

#include <cerrno>
#include <system_error>

namespace uring::net {

udp_socket udp_socket::open(int family) { return udp_socket(open_fd(family, SOCK_DGRAM)); }

udp_socket udp_socket::bind(const address& local, bool reuse_port) {
  udp_socket s = open(local.family());
  if (reuse_port) s.set_option(SOL_SOCKET, SO_REUSEPORT, 1);
  if (::bind(s.fd(), local.data(), local.size()) != 0) {
    throw std::system_error(errno, std::system_category(), "bind " + local.to_string());
  }
  return s;
}

}  // namespace uring::net
