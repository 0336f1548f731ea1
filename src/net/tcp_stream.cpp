// tcp_stream.cpp — the composite stream operations: connect_to, read_exactly, write_all.
#include "uring/net/tcp_stream.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>

#include "net/limits.hpp"

namespace uring::net {

tcp_stream tcp_stream::open(int family) { return tcp_stream(open_fd(family, SOCK_STREAM)); }

task<tcp_stream> tcp_stream::connect_to(address peer, std::chrono::nanoseconds timeout, std::stop_token stop) {
  tcp_stream s = open(peer.family());
  limits lim(timeout, std::move(stop));
  io_result r = co_await lim.await(s.connect(peer).nothrow());
  if (!r) throw_errno(-r.res, "connect");
  co_return s;
}

task<void> tcp_stream::read_exactly(mutable_buffer buf, std::chrono::nanoseconds timeout,
                                     std::stop_token stop) const {
  limits lim(timeout, std::move(stop));
  auto* p = static_cast<std::byte*>(buf.data());
  std::size_t done = 0;
  while (done < buf.size()) {
    io_result r = co_await lim.await(read_some(mutable_buffer(p + done, buf.size() - done)).nothrow());
    if (!r) throw_errno(-r.res, "read_exactly");
    if (r.res == 0) {
      throw std::system_error(ENODATA, std::system_category(),
                              "read_exactly: end of stream after " + std::to_string(done) + " of " +
                                  std::to_string(buf.size()) + " bytes");
    }
    done += static_cast<std::size_t>(r.res);
  }
}

task<void> tcp_stream::write_all(const_buffer buf, std::chrono::nanoseconds timeout, std::stop_token stop) const {
  limits lim(timeout, std::move(stop));
  const auto* p = static_cast<const std::byte*>(buf.data());
  std::size_t done = 0;
  while (done < buf.size()) {
    io_result r = co_await lim.await(write_some(const_buffer(p + done, buf.size() - done)).nothrow());
    if (!r) throw_errno(-r.res, "write_all");
    done += static_cast<std::size_t>(r.res);
  }
}

void tcp_stream::set_nodelay(bool on) { set_option(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0); }

}  // namespace uring::net
