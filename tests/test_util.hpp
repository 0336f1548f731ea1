// test_util.hpp — small helpers for tests: pipes, temporary files, destructor counters, thread ids.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <uring/owned_fd.hpp>

#include "fd_leak.hpp"

namespace uring::test {

// Counts the frames (or fiber stacks) that were destroyed: their locals' destructors ran.
struct sentinel {
  std::atomic<int>& n;
  ~sentinel() { ++n; }
};

// pthread_self() is declared `const`, so clang may reuse one call's answer across a co_await (or a fiber's
// await), after which the code may run on another thread. The empty asm with a memory clobber makes each
// call count.
[[gnu::noinline]] inline std::thread::id this_id() {
  asm volatile("" ::: "memory");
  return std::this_thread::get_id();
}

// The library's own single-owner fd.
using unique_fd = uring::owned_fd;

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
// A fresh directory under /tmp, removed with everything in it when this goes.
struct temp_dir {
  std::string path;
  explicit temp_dir(const char* name = "uring_test") {
    std::string tmpl = std::string("/tmp/") + name + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::system_error(errno, std::system_category(), "mkdtemp");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

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

// The error `f` throws as a std::system_error (and its what() into `what`), or none.
template <class F>
std::error_code error_of(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const std::system_error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return {};
}

}  // namespace uring::test
