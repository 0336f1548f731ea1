// uring/direct.hpp — direct descriptors: files held in the executor's own table (io_uring's registered
// files), so that an operation on one skips the kernel's lookup of an fd in the process's file table
// (an fdget/fdput per operation, which threads sharing that table make costly).
//
// Provides: uring::direct_fd, uring::install_direct, uring::close_direct, and uring::read / uring::write
// on a direct_fd.
// Threads: a direct_fd is a slot of one executor's table: use it only from coroutines on that executor.
//
// The table has executor_options::direct_files slots (0 by default: no table), empty at start-up; what
// it still holds when the executor goes is closed with it. install_direct(fd) puts a reference to fd's
// file in a free slot. The fd itself stays the caller's, to close whenever it likes: the slot keeps the
// file open until close_direct. An operation in flight keeps its file even if its slot is emptied
// meanwhile. Errors, as std::system_error naming the call: ENXIO (the executor has no table), ENFILE (the
// table is full), EBADF (not an open fd; for an operation or close_direct: an empty slot).
// Natively the table is the ring's registered files (IORING_REGISTER_FILES2, 5.19; slots chosen by the
// kernel, IORING_FILE_INDEX_ALLOC); emulated, each slot holds a dup() of the fd, one more fd per slot.
#pragma once

#include <cstdint>

#include "uring/buffer.hpp"
#include "uring/detail/io_awaitable.hpp"
#include "uring/io.hpp"
#include "uring/task.hpp"

namespace uring {

// A slot of the running executor's table of direct descriptors.
struct direct_fd {
  std::uint32_t index = 0;
  friend bool operator==(direct_fd, direct_fd) = default;
};

namespace detail {
// Marks the request's fd as a slot. (A payload, so the operation takes the submit list, which knows the
// flag, rather than the inline path for plain fds.)
struct direct_payload {
  void bind(io_request& r) noexcept { r.direct = true; }
};
}  // namespace detail

// Installs a reference to `fd`'s file in a free slot of the running executor's table; yields the slot.
task<direct_fd> install_direct(int fd);
// Empties the slot (its file closes once no operation holds it).
task<void> close_direct(direct_fd f);

// As read and write on a plain fd (uring/io.hpp), on the file in slot `f`.
inline detail::io_awaitable<std::size_t, true, detail::direct_payload> read(
    direct_fd f, mutable_buffer buf, std::uint64_t offset = current_position) noexcept {
  return {"read",
          {.code = detail::op_code::read,
           .fd = static_cast<std::int32_t>(f.index),
           .len = detail::clamp_len(buf.size()),
           .offset = offset,
           .addr = buf.data()},
          {}};
}
inline detail::io_awaitable<std::size_t, true, detail::direct_payload> write(
    direct_fd f, const_buffer buf, std::uint64_t offset = current_position) noexcept {
  return {"write",
          {.code = detail::op_code::write,
           .fd = static_cast<std::int32_t>(f.index),
           .len = detail::clamp_len(buf.size()),
           .offset = offset,
           .addr = const_cast<void*>(buf.data())},
          {}};
}

}  // namespace uring
