// uring/detail/operation.hpp — the completion record every asynchronous operation is built on.
//
// Provides: detail::op_code, detail::io_request, detail::operation.
// Threads: an operation belongs to the executor it was submitted to and is touched only on that thread.
//
// An operation describes *what* to do in a backend-neutral io_request (so public headers need no liburing,
// and the emulated backend can interpret the same description), and *how to finish* through one function
// pointer. The backend uses the operation's address as the CQE's user_data, so the record must stay put
// from submission until its completion has been delivered: awaitables keep it in the coroutine frame.
#pragma once

#include <cstdint>

namespace uring::detail {

// What an operation asks the backend to do. Values are ours, not the kernel's IORING_OP_* numbers.
enum class op_code : std::uint8_t {
  nop,
  read,   // fd, addr, len, offset (current_position = the file's position, as for pipes)
  write,  // fd, addr, len, offset
};

struct io_request {
  op_code code = op_code::nop;
  std::int32_t fd = -1;
  std::uint32_t len = 0;
  std::uint32_t op_flags = 0;
  std::uint64_t offset = 0;
  void* addr = nullptr;
};

struct operation {
  // Called on the owner thread once the operation's completion is reaped. `res` is a byte count or
  // other non-negative result, or -errno; `flags` are the CQE flags.
  using complete_fn = void (*)(operation* self, std::int32_t res, std::uint32_t flags) noexcept;

  complete_fn complete = nullptr;
  io_request request;
};

}  // namespace uring::detail
