// net_util.hpp — helpers shared by the socket tests: a byte pattern, and sending / reading a whole stream
// (the fd count is fd_leak.hpp's, included here).
#pragma once

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
#include <system_error>

#include <uring/net/tcp_stream.hpp>
#include <uring/task.hpp>

#include "fd_leak.hpp"
#include "test_util.hpp"

namespace uring::test {

// A connected unix stream pair: ours (for the executor) and the peer's plain fd (for a thread).
struct stream_pair {
  net::tcp_stream ours;
  unique_fd peer;
  stream_pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::system_error(errno, std::system_category(), "socketpair");
    }
    ours = net::tcp_stream(fds[0]);
    peer.reset(fds[1]);
  }
};

// `n` bytes of a pattern that depends on `seed`, so that misplaced bytes show.
inline std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return s;
}

// Sends all of `payload`, then ends this side of the stream.
inline task<void> send_and_end(const net::tcp_stream* s, const std::string* payload) {
  co_await s->write_all(*payload);
  co_await s->shutdown(SHUT_WR);
}

// Everything the peer sends until it ends its side.
inline task<std::string> read_to_end(const net::tcp_stream* s) {
  std::string back;
  std::array<char, 4096> buf;
  for (;;) {
    std::size_t n = co_await s->read_some(buf);
    if (n == 0) break;
    back.append(buf.data(), n);
  }
  co_return back;
}

}  // namespace uring::test
