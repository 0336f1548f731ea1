// process/pipes.cpp — writing a whole buffer to a pipe and reading one to its end, bounded.
#include <cerrno>
#include <string>

#include "uring/io.hpp"
#include "uring/process.hpp"

namespace uring {

task<void> write_all(int fd, const_buffer buf) {
  const auto* at = static_cast<const char*>(buf.data());
  std::size_t left = buf.size();
  while (left > 0) {
    const std::size_t n = co_await uring::write(fd, const_buffer(at, left));
    at += n;
    left -= n;
  }
}

task<std::string> read_all(int fd, std::size_t limit) {
  constexpr std::size_t kChunk = 64 * 1024;
  std::string out;
  for (;;) {
    const std::size_t had = out.size();
    out.resize(had + kChunk);
    const std::size_t n = co_await uring::read(fd, mutable_buffer(out.data() + had, kChunk));
    out.resize(had + n);
    if (n == 0) co_return out;
    if (out.size() > limit) throw_errno(EFBIG, "read_all");
  }
}

}  // namespace uring
