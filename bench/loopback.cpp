#include "loopback.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace uring::bench {

std::pair<int, int> tcp_pair() {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
  }
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(l);
  return {s, c};
}

std::thread drain(int fd) {
  return std::thread([fd] {
    std::vector<char> sink(1 << 20);
    while (::recv(fd, sink.data(), sink.size(), 0) > 0) {
    }
    ::close(fd);
  });
}

}  // namespace uring::bench
