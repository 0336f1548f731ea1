/// @file
/// uring/fs.hpp — names in the file system (unlink, rmdir, rename, mkdir, symlink, link) and advice on
/// files and memory (fadvise, madvise) on the ring.
///
/// Provides: uring::unlink_at, uring::unlink, uring::rmdir, uring::rename_at, uring::rename, uring::mkdir_at,
/// uring::mkdir, uring::symlink_at, uring::symlink, uring::link_at, uring::link, uring::fadvise,
/// uring::madvise.
/// Threads: await them from a coroutine running on an executor; the operation runs on that executor.
///
/// As uring/file.hpp: nothing happens until the awaitable is awaited; awaiting yields nothing or throws
/// std::system_error naming the operation ("unlink: No such file or directory"), `.nothrow()` yields a
/// uring::io_result instead, and with_timeout / with_stop_token apply. Paths are copied into the
/// awaitable. Natively they need kernel 5.11 (unlink, rmdir, rename), 5.15 (mkdir, symlink, link) or 5.6
/// (fadvise, madvise): an older kernel fails them with EINVAL. The emulation runs the syscall of the same
/// name at submission, on the executor's thread. The dirfds are plain fds, never direct descriptors.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "uring/file.hpp"

namespace uring {

namespace detail {

/// Two paths owned by their operation: rename's and link's old and new names, symlink's target and name.
struct owned_two_paths {
  std::string first;
  std::string second;
  void bind(io_request& r) noexcept {
    r.addr = first.data();
    r.aux = reinterpret_cast<std::uintptr_t>(second.data());
  }
};

/// renameat and linkat: two names, each relative to its own directory.
inline io_awaitable<void, true, owned_two_paths> two_names_at(const char* name, op_code code, int olddirfd,
                                                              std::string oldpath, int newdirfd,
                                                              std::string newpath, std::uint32_t flags) {
  return {name,
          {.code = code, .fd = olddirfd, .len = static_cast<std::uint32_t>(newdirfd), .op_flags = flags},
          owned_two_paths{std::move(oldpath), std::move(newpath)}};
}

}  // namespace detail

/// Removes the name `path` relative to the directory `dirfd` (AT_FDCWD: the working directory), as
/// unlinkat(2): a file, or with `flags` = AT_REMOVEDIR an empty directory.
inline detail::io_awaitable<void, true, detail::owned_path> unlink_at(int dirfd, std::string path,
                                                                      int flags = 0) {
  return {(flags & AT_REMOVEDIR) ? "rmdir" : "unlink",
          {.code = detail::op_code::unlinkat, .fd = dirfd, .op_flags = static_cast<std::uint32_t>(flags)},
          detail::owned_path{std::move(path)}};
}

/// Removes the file (not directory) `path`, as unlink(2).
inline detail::io_awaitable<void, true, detail::owned_path> unlink(std::string path) {
  return unlink_at(AT_FDCWD, std::move(path));
}

/// Removes the empty directory `path`, as rmdir(2) (ENOTEMPTY when it holds anything).
inline detail::io_awaitable<void, true, detail::owned_path> rmdir(std::string path) {
  return unlink_at(AT_FDCWD, std::move(path), AT_REMOVEDIR);
}

/// Renames `oldpath` (relative to `olddirfd`) to `newpath` (relative to `newdirfd`), as renameat2(2).
/// `flags`: RENAME_NOREPLACE (EEXIST rather than replace), RENAME_EXCHANGE (swap the two), or 0.
inline detail::io_awaitable<void, true, detail::owned_two_paths> rename_at(int olddirfd, std::string oldpath,
                                                                           int newdirfd, std::string newpath,
                                                                           unsigned flags = 0) {
  return detail::two_names_at("rename", detail::op_code::renameat, olddirfd, std::move(oldpath), newdirfd,
                              std::move(newpath), flags);
}

/// Renames `oldpath` to `newpath`, replacing what `newpath` names, as rename(2).
inline detail::io_awaitable<void, true, detail::owned_two_paths> rename(std::string oldpath,
                                                                        std::string newpath) {
  return rename_at(AT_FDCWD, std::move(oldpath), AT_FDCWD, std::move(newpath));
}

/// Creates the directory `path` relative to `dirfd` with `mode` (less the umask), as mkdirat(2).
inline detail::io_awaitable<void, true, detail::owned_path> mkdir_at(int dirfd, std::string path,
                                                                     mode_t mode = 0777) {
  return {"mkdir",
          {.code = detail::op_code::mkdirat, .fd = dirfd, .len = static_cast<std::uint32_t>(mode)},
          detail::owned_path{std::move(path)}};
}

/// Creates the directory `path`, as mkdir(2).
inline detail::io_awaitable<void, true, detail::owned_path> mkdir(std::string path, mode_t mode = 0777) {
  return mkdir_at(AT_FDCWD, std::move(path), mode);
}

/// Creates the symbolic link `linkpath` (relative to `newdirfd`) holding `target`, as symlinkat(2). The
/// target is stored as given, not resolved.
inline detail::io_awaitable<void, true, detail::owned_two_paths> symlink_at(std::string target, int newdirfd,
                                                                            std::string linkpath) {
  return {"symlink",
          {.code = detail::op_code::symlinkat, .fd = newdirfd},
          detail::owned_two_paths{std::move(target), std::move(linkpath)}};
}

/// Creates the symbolic link `linkpath` holding `target`, as symlink(2).
inline detail::io_awaitable<void, true, detail::owned_two_paths> symlink(std::string target,
                                                                         std::string linkpath) {
  return symlink_at(std::move(target), AT_FDCWD, std::move(linkpath));
}

/// Creates the hard link `newpath` (relative to `newdirfd`) to the file `oldpath` (relative to `olddirfd`),
/// as linkat(2). `flags`: AT_SYMLINK_FOLLOW links what a symlink `oldpath` points to, not the symlink.
inline detail::io_awaitable<void, true, detail::owned_two_paths> link_at(int olddirfd, std::string oldpath,
                                                                         int newdirfd, std::string newpath,
                                                                         int flags = 0) {
  return detail::two_names_at("link", detail::op_code::linkat, olddirfd, std::move(oldpath), newdirfd,
                              std::move(newpath), static_cast<std::uint32_t>(flags));
}

/// Creates the hard link `newpath` to the file `oldpath`, as link(2).
inline detail::io_awaitable<void, true, detail::owned_two_paths> link(std::string oldpath,
                                                                      std::string newpath) {
  return link_at(AT_FDCWD, std::move(oldpath), AT_FDCWD, std::move(newpath));
}

/// Tells the kernel how `fd`'s bytes [offset, offset + len) will be read, as posix_fadvise(3): `advice` is
/// POSIX_FADV_SEQUENTIAL, _RANDOM, _NORMAL, _WILLNEED, _DONTNEED or _NOREUSE; `len` 0 means to the end of
/// the file. The SQE carries a 32-bit length: advise larger ranges in pieces, or with len 0.
inline detail::io_awaitable<void> fadvise(int fd, std::uint64_t offset, std::uint32_t len,
                                          int advice) noexcept {
  return {"fadvise",
          {.code = detail::op_code::fadvise,
           .fd = fd,
           .len = len,
           .op_flags = static_cast<std::uint32_t>(advice),
           .offset = offset}};
}

/// Tells the kernel how the memory [addr, addr + len) will be used, as madvise(2): `advice` is MADV_*
/// (MADV_WILLNEED, MADV_DONTNEED, MADV_SEQUENTIAL ...); `addr` must be page-aligned (EINVAL otherwise). The
/// SQE carries a 32-bit length: advise larger regions in pieces.
inline detail::io_awaitable<void> madvise(void* addr, std::uint32_t len, int advice) noexcept {
  return {"madvise",
          {.code = detail::op_code::madvise,
           .fd = -1,
           .len = len,
           .op_flags = static_cast<std::uint32_t>(advice),
           .addr = addr}};
}

}  // namespace uring
