// tcp_pair.hpp — a connected loopback TCP pair made with plain syscalls, for tests that hand one end to
// an executor and read or fill the other themselves.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

#include "test_util.hpp"

namespace uring::test {

// The sender (for the executor) and the peer, both blocking.
struct tcp_pair {
  unique_fd sender, peer;
  tcp_pair() {
    unique_fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener.get(), 1) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::system_error(errno, std::system_category(), "listen");
    }
    sender.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(sender.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::system_error(errno, std::system_category(), "connect");
    }
    peer.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!peer) throw std::system_error(errno, std::system_category(), "accept");
  }
};

}  // namespace uring::test
