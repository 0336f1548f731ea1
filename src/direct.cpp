// direct.cpp — installing and closing direct descriptors (uring/direct.hpp).
#include "uring/direct.hpp"

#include <cerrno>
#include <string>
#include <system_error>

namespace uring {

namespace {
// The table's own errors say what to change; the rest are the kernel's words.
[[noreturn]] void direct_error(int err, const char* call, long arg) {
  std::string what = std::string("uring::") + call + "(" + std::to_string(arg) + ")";
  if (err == ENXIO) what += ": the executor has no table of direct descriptors (executor_options::direct_files is 0)";
  if (err == ENFILE) what += ": the executor's table of direct descriptors is full (executor_options::direct_files)";
  if (err == EBADF) what += call[0] == 'c' ? ": the slot is empty" : ": not an open file descriptor";
  throw std::system_error(err, std::system_category(), what);
}
}  // namespace

task<direct_fd> install_direct(int fd) {
  int slot = fd;  // the kernel writes the slot it chose over the fd
  const io_result r = co_await detail::io_awaitable<int, false>(
      "install_direct", {.code = detail::op_code::install_direct, .addr = &slot});
  if (r.res < 0) direct_error(-r.res, "install_direct", fd);
  co_return direct_fd{static_cast<std::uint32_t>(slot)};
}

task<void> close_direct(direct_fd f) {
  const io_result r = co_await detail::io_awaitable<void, false, detail::direct_payload>(
      "close_direct", {.code = detail::op_code::close, .fd = static_cast<std::int32_t>(f.index)}, {});
  if (r.res < 0) direct_error(-r.res, "close_direct", f.index);
}

}  // namespace uring
