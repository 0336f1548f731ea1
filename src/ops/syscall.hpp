// ops/syscall.hpp — running an operation as a plain syscall, as io_uring would: the emulated attempts'
// shared helpers.
//
// Provides: detail::retry_eintr, detail::nonblocking, detail::transfer_all, detail::syscall_offset.
// Threads: any.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "uring/detail/operation.hpp"

namespace uring::detail {

// The result of `f` (a syscall returning -1 and errno on failure), retried after EINTR, as io_uring
// gives it: the value, or -errno.
template <class F>
int retry_eintr(F f) {
  long rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  return rc < 0 ? -errno : static_cast<int>(rc);
}

// Runs `f` with `fd` non-blocking. accept(2), connect(2) and splice(2) to a socket have no per-call
// MSG_DONTWAIT, so a blocking socket (the library's own are blocking, as io_uring prefers) is switched
// for the call only.
template <class F>
int nonblocking(int fd, F f) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  const bool toggle = (flags & O_NONBLOCK) == 0;
  if (toggle && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -errno;
  int rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  const int err = errno;
  if (toggle) ::fcntl(fd, F_SETFL, flags);
  return rc < 0 ? -err : rc;
}

// recv or send with MSG_WAITALL, as io_uring does it: on until the whole buffer is done, the stream
// ends or an error comes; with bytes done, their count is the result then. Progress lives in the request
// (addr and len advance; offset, unused by recv and send, counts the bytes done), so that the operation
// can wait in epoll between tries. `once` is one non-blocking try on r's current addr and len.
template <class F>
int transfer_all(io_request& r, F once) {
  for (;;) {
    const int n = retry_eintr(once);
    if (n > 0 && n < static_cast<int>(r.len)) {
      r.addr = static_cast<char*>(r.addr) + n;
      r.len -= static_cast<std::uint32_t>(n);
      r.offset += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == -EAGAIN || (n < 0 && r.offset == 0)) return n;
    return static_cast<int>(r.offset) + std::max(n, 0);
  }
}

// A request's offset as preadv2/pwritev2 take it: -1 for the file's own position.
inline off_t syscall_offset(std::uint64_t offset) {
  return offset == kCurrentPosition ? off_t{-1} : static_cast<off_t>(offset);
}

}  // namespace uring::detail
