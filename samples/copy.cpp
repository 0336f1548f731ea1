// uring-copy: the smallest program (docs/samples/copy.md): copies up to 4 KiB from stdin to stdout.
#include <array>
#include <span>

#include <uring/uring.hpp>

uring::task<std::size_t> copy_some(int in, int out) {
  std::array<char, 4096> buf;
  std::size_t n = co_await uring::read(in, buf);  // throws std::system_error("read: ...")
  co_return co_await uring::write(out, std::span(buf.data(), n));
}

int main() {
  uring::executor ex;  // bound to this thread; ring fd registered
  return ex.run(copy_some(0, 1)) > 0 ? 0 : 1;
}
