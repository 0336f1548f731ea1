/// @file
/// uring/io.hpp — the basic asynchronous operations on file descriptors.
///
/// Provides: uring::nop, uring::read, uring::write, uring::readv, uring::writev (at the current
/// position), uring::read_at, uring::write_at, uring::readv_at, uring::writev_at (at an offset),
/// uring::poll, uring::with_timeout, uring::with_stop_token.
/// Threads: await them from a coroutine running on an executor; the operation runs on that executor.
///
/// Each function returns an awaitable that does nothing until it is awaited (no SQE is taken before).
/// Awaiting yields the result or throws std::system_error naming the operation ("read: Bad file
/// descriptor"); `co_await op.nothrow()` yields a uring::io_result instead. Buffers must stay valid until
/// the co_await returns. A cancelled operation fails with ECANCELED, one whose with_timeout expired with
/// ETIMEDOUT. Minimum kernel: 5.6 (IORING_OP_READ/WRITE), 5.19 for cancelling by stop_token reliably.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <type_traits>

#include "uring/buffer.hpp"
#include "uring/detail/io_awaitable.hpp"

namespace uring {

namespace detail {
/// As an offset: use (and advance) the file's current position; what read and write pass.
inline constexpr std::uint64_t current_position = ~std::uint64_t{0};
}  // namespace detail

namespace detail {

/// Linux moves at most this many bytes in one read or write (MAX_RW_COUNT); longer buffers are clamped,
/// which the "up to" contract of read and write allows.
inline std::uint32_t clamp_len(std::size_t n) noexcept {
  constexpr std::size_t kMax = 0x7ffff000;
  return static_cast<std::uint32_t>(n < kMax ? n : kMax);
}

/// A read or write of `size` bytes at `addr` (vectored: `size` iovecs), on a plain fd, or (direct) on a
/// slot of the executor's table of direct descriptors (uring/direct.hpp). A plain read or write goes
/// straight into the SQ.
inline io_awaitable<std::size_t> rw(const char* name, op_code code, bool direct, std::int32_t fd, void* addr,
                                    std::size_t size, std::uint64_t offset) noexcept {
  return {name,
          {.code = code, .direct = direct, .fd = fd, .len = clamp_len(size), .offset = offset, .addr = addr}};
}

}  // namespace detail

/// Completes without doing anything: the cost of one round trip through the ring.
inline detail::io_awaitable<void> nop() noexcept { return {"nop", {.code = detail::op_code::nop}}; }

/// Reads up to buf.size() bytes at the file's current position (advancing it; pipes and sockets have
/// only that). Yields the byte count, 0 at EOF.
inline detail::io_awaitable<std::size_t> read(int fd, mutable_buffer buf) noexcept {
  return detail::rw("read", detail::op_code::read, false, fd, buf.data(), buf.size(),
                    detail::current_position);
}

/// Reads up to buf.size() bytes at `offset` (pread(2): the file's position is neither used nor moved).
/// Yields the byte count, 0 at EOF.
inline detail::io_awaitable<std::size_t> read_at(int fd, mutable_buffer buf, std::uint64_t offset) noexcept {
  return detail::rw("read", detail::op_code::read, false, fd, buf.data(), buf.size(), offset);
}

/// Writes up to buf.size() bytes at the current position. Yields the byte count, which may be short (a
/// pipe or socket that is nearly full): loop if you need all of it written. A string literal writes its
/// characters, without the terminating NUL (uring/buffer.hpp).
inline detail::io_awaitable<std::size_t> write(int fd, const_buffer buf) noexcept {
  return detail::rw("write", detail::op_code::write, false, fd, const_cast<void*>(buf.data()), buf.size(),
                    detail::current_position);
}

/// Writes up to buf.size() bytes at `offset` (pwrite(2)). Yields the byte count, which may be short.
inline detail::io_awaitable<std::size_t> write_at(int fd, const_buffer buf, std::uint64_t offset) noexcept {
  return detail::rw("write", detail::op_code::write, false, fd, const_cast<void*>(buf.data()), buf.size(),
                    offset);
}

/// Reads into the buffers of `bufs` in turn, filling each before the next (readv(2)), at the current
/// position. Yields the byte count, 0 at EOF. The iovec array and the buffers it points at must stay
/// valid until the co_await returns. Minimum kernel 5.1.
inline detail::io_awaitable<std::size_t> readv(int fd, std::span<const ::iovec> bufs) noexcept {
  return detail::rw("readv", detail::op_code::readv, false, fd, const_cast<::iovec*>(bufs.data()),
                    bufs.size(),
                    detail::current_position);  // len: the count of buffers
}
/// The same at `offset` (preadv(2)).
inline detail::io_awaitable<std::size_t> readv_at(int fd, std::span<const ::iovec> bufs,
                                                  std::uint64_t offset) noexcept {
  return detail::rw("readv", detail::op_code::readv, false, fd, const_cast<::iovec*>(bufs.data()),
                    bufs.size(), offset);
}

/// Writes the buffers of `bufs` in turn (writev(2)) at the current position. Yields the byte count,
/// which may be short, as write's. The iovec array and its buffers must stay valid until the co_await
/// returns. Minimum kernel 5.1.
inline detail::io_awaitable<std::size_t> writev(int fd, std::span<const ::iovec> bufs) noexcept {
  return detail::rw("writev", detail::op_code::writev, false, fd, const_cast<::iovec*>(bufs.data()),
                    bufs.size(), detail::current_position);
}
/// The same at `offset` (pwritev(2)).
inline detail::io_awaitable<std::size_t> writev_at(int fd, std::span<const ::iovec> bufs,
                                                   std::uint64_t offset) noexcept {
  return detail::rw("writev", detail::op_code::writev, false, fd, const_cast<::iovec*>(bufs.data()),
                    bufs.size(), offset);
}

/// Waits until `fd` is ready for any of `events` (POLLIN, POLLOUT, ...; <poll.h>) and yields the events
/// that are ready (POLLERR and POLLHUP are always reported). One-shot.
inline detail::io_awaitable<unsigned> poll(int fd, unsigned events) noexcept {
  return {"poll", {.code = detail::op_code::poll, .fd = fd, .op_flags = events}};
}

namespace detail {
template <class Rep, class Period>
timespec64 to_timespec(std::chrono::duration<Rep, Period> d) noexcept {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns < 0) ns = 0;
  return timespec_of_ns(ns);
}
}  // namespace detail

/// The operation, cancelled if it has not completed within `d` (an io_uring linked timeout): it then
/// fails with ETIMEDOUT. Works on every single operation of the library; uring/task_adapters.hpp gives
/// the same spelling for whole tasks.
template <class Result, bool Throw, class Payload, class Rep, class Period>
detail::io_awaitable<Result, Throw, detail::linked_payload<Payload>> with_timeout(
    detail::io_awaitable<Result, Throw, Payload> op, std::chrono::duration<Rep, Period> d) noexcept {
  return std::move(op).linked_to(detail::to_timespec(d));
}

/// The operation, cancelled (ECANCELED) when `token` is stopped, from any thread. Without it an operation
/// follows the stop token of the coroutine that awaits it, if that coroutine has one. Allocates (a token
/// that can be stopped needs a stop callback once the operation starts): std::bad_alloc.
template <class Result, bool Throw, class Payload>
detail::io_awaitable<Result, Throw, Payload> with_stop_token(detail::io_awaitable<Result, Throw, Payload> op,
                                                             std::stop_token token) {
  op.set_stop_token(std::move(token));
  return op;
}

}  // namespace uring
