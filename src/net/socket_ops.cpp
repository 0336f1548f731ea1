// socket_ops.cpp — a socket made straight into a slot of the table of direct descriptors.
#include "uring/net/socket_ops.hpp"
#include "executor/executor_state.hpp"

namespace uring::net {

task<direct_fd> open_socket_direct(int domain, int type, int protocol) {
  // Checked here: the kernel answers a missing table as a full one (ENFILE).
  if (detail::executor_core::direct_files(detail::executor_access::current("socket_direct")) == 0) {
    detail::throw_direct_error(ENXIO, "socket_direct", domain, nullptr);
  }
  // SOCK_CLOEXEC: for the emulation's fd in the slot (the native preparation drops it).
  const io_result r = co_await detail::io_awaitable<int, false>(
      "socket_direct", {.code = detail::op_code::socket_direct,
                        .fd = domain,
                        .len = static_cast<std::uint32_t>(protocol),
                        .op_flags = static_cast<std::uint32_t>(type | SOCK_CLOEXEC)});
  if (r.res < 0) detail::throw_direct_error(-r.res, "socket_direct", domain, nullptr);
  co_return direct_fd{static_cast<std::uint32_t>(r.res)};
}

}  // namespace uring::net
