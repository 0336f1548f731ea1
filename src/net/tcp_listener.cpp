// tcp_listener.cpp — binding a listening socket, with errors that name the call and the address.
#include "uring/net/tcp_listener.hpp"
#include "executor/executor_state.hpp"

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

task<direct_fd> tcp_listener::accept_direct() const {
  // Checked here: the kernel answers a missing table as a full one (ENFILE).
  if (detail::executor_core::direct_files(detail::executor_access::current("accept_direct")) == 0) {
    detail::throw_direct_error(ENXIO, "accept_direct", fd(), nullptr);
  }
  const io_result r = co_await detail::io_awaitable<int, false>(
      "accept_direct", {.code = detail::op_code::accept_direct, .fd = fd(), .op_flags = SOCK_CLOEXEC});
  if (r.res < 0) detail::throw_direct_error(-r.res, "accept_direct", fd(), nullptr);  // ENFILE: it was closed
  co_return direct_fd{static_cast<std::uint32_t>(r.res)};
}

}  // namespace uring::net
