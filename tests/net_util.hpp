// net_util.hpp — helpers shared by the socket tests: a byte pattern, pseudo-random bytes, sending / reading a
// whole stream, and writing all of a string to a plain fd (the fd count is fd_leak.hpp's, included here).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Bytes from a pseudo-random sequence: no period, so a lost, repeated or reordered chunk always shows.
inline std::string noise(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  for (auto& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
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

// Writes all of `data` to a plain fd (a test thread's side of a stream).
inline void write_fully(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << std::strerror(errno);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace uring::test
