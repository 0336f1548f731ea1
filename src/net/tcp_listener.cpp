// tcp_listener.cpp — binding a listening socket, with errors that name the call and the address.
#include "uring/net/tcp_listener.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace uring::net {

tcp_listener tcp_listener::bind(const address& local, const listen_options& opts) {
  tcp_listener l(open_fd(local.family(), SOCK_STREAM));
  if (local.is_ip()) {
    if (opts.reuse_address) l.set_option(SOL_SOCKET, SO_REUSEADDR, 1);
    if (opts.reuse_port) l.set_option(SOL_SOCKET, SO_REUSEPORT, 1);
  }
  if (::bind(l.fd(), local.data(), local.size()) != 0) {
    throw std::system_error(errno, std::system_category(), "bind " + local.to_string());
  }
  if (::listen(l.fd(), opts.backlog) != 0) {
    throw std::system_error(errno, std::system_category(), "listen " + local.to_string());
  }
  return l;
}

}  // namespace uring::net
