// uring/io.hpp — the basic asynchronous operations on file descriptors.
//
// Provides: uring::nop, uring::read, uring::write, uring::current_position.
// Threads: await them from a coroutine running on an executor; the operation runs on that executor.
//
// Each function returns an awaitable that does nothing until it is awaited (no SQE is taken before).
// Awaiting yields the result or throws std::system_error naming the operation ("read: Bad file
// descriptor"); `co_await op.nothrow()` yields a uring::io_result instead. Buffers must stay valid until
// the co_await returns. Minimum kernel: 5.6 (IORING_OP_READ/WRITE).
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "uring/buffer.hpp"
#include "uring/detail/operation.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"

namespace uring {

// As an offset: use (and advance) the file's current position; required for pipes and sockets.
inline constexpr std::uint64_t current_position = ~std::uint64_t{0};

namespace detail {

// An awaitable wrapping one io_request. `Result` is what a successful await yields (void or a byte
// count); with Throw = false the await yields io_result and never throws for the operation's errors.
template <class Result, bool Throw = true>
class [[nodiscard]] io_awaitable : private operation {
 public:
  io_awaitable(const char* name, const io_request& req) noexcept : name_(name) { request = req; }
  io_awaitable(const io_awaitable&) = delete;
  io_awaitable& operator=(const io_awaitable&) = delete;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    waiter = h;
    executor_access::submit(executor_access::current(name_), *this);
  }
  auto await_resume() {
    if constexpr (!Throw) {
      return io_result{res};
    } else {
      if (res < 0) throw_errno(-res, name_);
      if constexpr (!std::is_void_v<Result>) return static_cast<Result>(res);
    }
  }

  // The same operation, awaited without exceptions: yields io_result.
  io_awaitable<Result, false> nothrow() && noexcept
    requires Throw
  {
    return io_awaitable<Result, false>(name_, request);
  }

 private:
  const char* name_;
};

// Linux moves at most this many bytes in one read or write (MAX_RW_COUNT); longer buffers are clamped,
// which the "up to" contract of read and write allows.
inline std::uint32_t clamp_len(std::size_t n) noexcept {
  constexpr std::size_t kMax = 0x7ffff000;
  return static_cast<std::uint32_t>(n < kMax ? n : kMax);
}

}  // namespace detail

// Completes without doing anything: the cost of one round trip through the ring.
inline detail::io_awaitable<void> nop() noexcept { return {"nop", {.code = detail::op_code::nop}}; }

// Reads up to buf.size() bytes at `offset` (or at the current position). Yields the byte count, 0 at EOF.
inline detail::io_awaitable<std::size_t> read(int fd, mutable_buffer buf,
                                               std::uint64_t offset = current_position) noexcept {
  return {"read",
          {.code = detail::op_code::read,
           .fd = fd,
           .len = detail::clamp_len(buf.size()),
           .offset = offset,
           .addr = buf.data()}};
}

// Writes up to buf.size() bytes at `offset` (or at the current position). Yields the byte count, which
// may be short (a pipe or socket that is nearly full): loop if you need all of it written.
inline detail::io_awaitable<std::size_t> write(int fd, const_buffer buf,
                                                std::uint64_t offset = current_position) noexcept {
  return {"write",
          {.code = detail::op_code::write,
           .fd = fd,
           .len = detail::clamp_len(buf.size()),
           .offset = offset,
           .addr = const_cast<void*>(buf.data())}};
}

}  // namespace uring
