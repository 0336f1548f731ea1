// test_util.hpp — small RAII helpers for tests: pipes and temporary files.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace uring::test {

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct pipe_pair {
  unique_fd read_end, write_end;
  pipe_pair() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "pipe2");
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
  }
};

// An unlinked temporary file, open for reading and writing.
inline unique_fd temp_file() {
  int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "open(O_TMPFILE)");
  return unique_fd(fd);
}

// Soak sizes shrink under sanitizers: URING_TEST_SCALE=0.1 runs a tenth of the iterations.
inline long scaled(long n) {
  const char* s = std::getenv("URING_TEST_SCALE");
  double f = s ? std::atof(s) : 1.0;
  long v = static_cast<long>(static_cast<double>(n) * f);
  return v > 0 ? v : 1;
}

}  // namespace uring::test
