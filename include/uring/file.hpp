/// @file
/// uring/file.hpp — opening, closing, syncing and inspecting files on the ring.
///
/// Provides: uring::open, uring::open_at, uring::close, uring::fsync, uring::fdatasync, uring::fallocate,
/// uring::ftruncate, uring::statx, uring::stat, uring::fstat.
/// Threads: await them from a coroutine running on an executor; the operation runs on that executor.
///
/// Like the operations of uring/io.hpp: nothing happens until the awaitable is awaited; awaiting yields the
/// result or throws std::system_error naming the operation ("open: No such file or directory"),
/// `.nothrow()` yields a uring::io_result instead, and with_timeout / with_stop_token apply.
/// Paths are copied into the awaitable, so a temporary string is fine; the struct statx given to
/// uring::statx must stay valid until the co_await returns. Minimum kernel: 5.6 (IORING_OP_OPENAT,
/// IORING_OP_CLOSE, IORING_OP_STATX), 5.1 for fsync and fdatasync (IORING_OP_FSYNC).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "uring/io.hpp"

namespace uring {

namespace detail {

/// A path owned by its operation: openat, and statx into the caller's struct.
struct owned_path {
  std::string path;
  void bind(io_request& r) noexcept { r.addr = path.data(); }
};

/// A path and the struct statx the kernel fills, yielded by stat and fstat.
struct owned_stat {
  std::string path;
  struct ::statx out {};
  void bind(io_request& r) noexcept {
    r.addr = path.data();
    r.aux = reinterpret_cast<std::uintptr_t>(&out);
  }
  struct ::statx value() const noexcept {
    return out;
  }
};

inline constexpr std::uint32_t kFsyncDatasync = 1;  ///< IORING_FSYNC_DATASYNC

}  // namespace detail

/// Opens `path` relative to the directory `dirfd` (AT_FDCWD: the working directory), as openat(2) does,
/// and yields the new fd. `flags` are open(2)'s (O_RDWR | O_CREAT | O_CLOEXEC ...); `mode` applies with
/// O_CREAT or O_TMPFILE.
/// Unlike open(2), and as io_uring does, an open without O_CREAT, O_TRUNC or O_TMPFILE does not wait for
/// a FIFO's other end: it opens at once for reading and fails with ENXIO for writing when nobody reads.
/// The new fd is blocking unless `flags` has O_NONBLOCK.
inline detail::io_awaitable<int, true, detail::owned_path> open_at(int dirfd, std::string path, int flags,
                                                                   mode_t mode = 0) {
  return {"open",
          {.code = detail::op_code::openat,
           .fd = dirfd,
           .len = static_cast<std::uint32_t>(mode),
           .op_flags = static_cast<std::uint32_t>(flags)},
          detail::owned_path{std::move(path)}};
}

/// Opens `path` (relative paths from the working directory) and yields the new fd.
inline detail::io_awaitable<int, true, detail::owned_path> open(std::string path, int flags,
                                                                mode_t mode = 0) {
  return open_at(AT_FDCWD, std::move(path), flags, mode);
}

/// Closes `fd`. The fd is released even when this fails, except with EBADF (it was not open).
inline detail::io_awaitable<void> close(int fd) noexcept {
  return {"close", {.code = detail::op_code::close, .fd = fd}};
}

/// Flushes `fd`'s data and metadata to the device, as fsync(2).
inline detail::io_awaitable<void> fsync(int fd) noexcept {
  return {"fsync", {.code = detail::op_code::fsync, .fd = fd}};
}

/// Flushes `fd`'s data and the metadata needed to read it back, as fdatasync(2).
inline detail::io_awaitable<void> fdatasync(int fd) noexcept {
  return {"fdatasync", {.code = detail::op_code::fsync, .fd = fd, .op_flags = detail::kFsyncDatasync}};
}

/// Allocates (or, with `mode` flags such as FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, deallocates) the
/// byte range [offset, offset + length) of `fd`, as fallocate(2). Minimum kernel 5.6.
inline detail::io_awaitable<void> fallocate(int fd, int mode, std::uint64_t offset,
                                            std::uint64_t length) noexcept {
  return {"fallocate",
          {.code = detail::op_code::fallocate,
           .fd = fd,
           .op_flags = static_cast<std::uint32_t>(mode),
           .offset = offset,
           .aux = length}};
}

/// Sets the length of the file `fd` (open for writing) to `length`, as ftruncate(2). Natively it needs
/// kernel 6.9 (IORING_OP_FTRUNCATE): an older kernel fails it with EINVAL; the emulation runs ftruncate(2).
inline detail::io_awaitable<void> ftruncate(int fd, std::uint64_t length) noexcept {
  return {"ftruncate", {.code = detail::op_code::ftruncate, .fd = fd, .offset = length}};
}

/// Fills `out` with what statx(2) reports for `path` relative to `dirfd`. `flags` are AT_* flags
/// (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH ...), `mask` the STATX_* fields wanted. `out` must stay valid until
/// the co_await returns.
inline detail::io_awaitable<void, true, detail::owned_path> statx(int dirfd, std::string path, int flags,
                                                                  unsigned mask, struct ::statx& out) {
  return {"statx",
          {.code = detail::op_code::statx,
           .fd = dirfd,
           .len = mask,
           .op_flags = static_cast<std::uint32_t>(flags),
           .aux = reinterpret_cast<std::uintptr_t>(&out)},
          detail::owned_path{std::move(path)}};
}

/// Yields the struct statx (STATX_BASIC_STATS) of `path`, following symlinks. The nothrow form yields only
/// the io_result (to ask whether a path exists); use uring::statx to get the fields without exceptions.
inline detail::io_awaitable<struct ::statx, true, detail::owned_stat> stat(std::string path) {
  return {"stat",
          {.code = detail::op_code::statx, .fd = AT_FDCWD, .len = STATX_BASIC_STATS},
          detail::owned_stat{std::move(path)}};
}

/// Yields the struct statx (STATX_BASIC_STATS) of the open file `fd`. The nothrow form yields only the
/// io_result, as for stat.
inline detail::io_awaitable<struct ::statx, true, detail::owned_stat> fstat(int fd) noexcept {
  return {"fstat",
          {.code = detail::op_code::statx, .fd = fd, .len = STATX_BASIC_STATS, .op_flags = AT_EMPTY_PATH},
          detail::owned_stat{}};
}

}  // namespace uring
