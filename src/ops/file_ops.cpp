// ops/file_ops.cpp — the file operations' rows: nop, read, write, readv, writev, openat, close, statx,
// fsync, fallocate, ftruncate and splice, each as the native ring prepares it and as the emulation runs
// it. ops/op_table.hpp says which fields each one reads.
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ops/op_table.hpp"
#include "ops/syscall.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/detail/op_queue.hpp"

namespace uring::detail {

static_assert(kop::read_multishot == kOpReadMultishot);

namespace {

// A read or write, plain or vectored, as io_uring does it. Without may_block it never blocks (RWF_NOWAIT:
// -EAGAIN means "wait for readiness"); a file whose driver does not know RWF_NOWAIT, and one epoll
// cannot watch (a regular file), are done blocking, as an io-wq worker would.
int transfer(io_request& r, const iovec* iov, int count, bool reading, emu_try& t) {
  off_t off = syscall_offset(r.offset);
  auto once = [&](int flags) {
    for (;;) {
      const ssize_t n =
          reading ? ::preadv2(r.fd, iov, count, off, flags) : ::pwritev2(r.fd, iov, count, off, flags);
      if (n >= 0) return static_cast<int>(n);
      if (errno == EINTR) continue;
      // io_uring ignores the offset of a stream (pipe, socket); the syscall refuses it.
      if (errno == ESPIPE && off != -1) {
        off = -1;
        continue;
      }
      return -errno;
    }
  };
  if (t.may_block) {
    t.in_worker = true;
    return once(0);
  }
  const int n = once(RWF_NOWAIT);
  if (n != -EOPNOTSUPP) return n;
  t.in_worker = true;
  return once(0);
}

bool is_read(op_code c) { return c == op_code::read || c == op_code::readv; }

}  // namespace

void prep_rw(io_uring_sqe* sqe, const io_request& r) noexcept {
  op_queue::encode_simple(reinterpret_cast<std::uint64_t*>(sqe), r, 0);
}
int emulate_rw(io_request& r, emu_try& t) {
  const iovec iov{r.addr, r.len};
  return transfer(r, &iov, 1, is_read(r.code), t);
}

void prep_readv(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_readv(sqe, r.fd, static_cast<const iovec*>(r.addr), r.len, r.offset);
}
int emulate_readv(io_request& r, emu_try& t) {
  return transfer(r, static_cast<const iovec*>(r.addr), static_cast<int>(r.len), true, t);
}

// The buffer comes from group `len`; len 0 lets the kernel fill the whole buffer it picks.
void prep_read_multishot(io_uring_sqe* sqe, const io_request& r) noexcept {
  const std::uint8_t op = r.aux == kOneChunk ? kop::read : kOpReadMultishot;
  io_uring_prep_rw(op, sqe, r.fd, nullptr, 0, kCurrentPosition);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = static_cast<std::uint16_t>(r.len);
}

void prep_writev(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_writev(sqe, r.fd, static_cast<const iovec*>(r.addr), r.len, r.offset);
}
int emulate_writev(io_request& r, emu_try& t) {
  return transfer(r, static_cast<const iovec*>(r.addr), static_cast<int>(r.len), false, t);
}

void prep_openat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_openat(sqe, r.fd, static_cast<const char*>(r.addr), static_cast<int>(r.op_flags), r.len);
}
// io_uring first tries an open inline with O_NONBLOCK added (cleared again on the new file), unless
// O_CREAT, O_TRUNC or O_TMPFILE send it straight to io-wq; only an EAGAIN sends it there. So a FIFO opens
// at once for reading and fails with ENXIO for writing when nobody reads, where open(2) would wait for the
// other end. The emulation does the same, rather than block the executor thread.
int emulate_openat(io_request& r, emu_try& t) {
  const auto path = static_cast<const char*>(r.addr);
  const int flags = static_cast<int>(r.op_flags);
  const bool inline_first = (flags & (O_CREAT | O_TRUNC | O_TMPFILE)) == 0;
  int fd =
      retry_eintr([&] { return ::openat(r.fd, path, inline_first ? flags | O_NONBLOCK : flags, r.len); });
  t.in_worker = !inline_first;
  if (fd == -EAGAIN && inline_first) {
    fd = retry_eintr([&] { return ::openat(r.fd, path, flags, r.len); });
    t.in_worker = true;
  }
  if (fd >= 0 && (flags & O_NONBLOCK) == 0) {
    const int now = ::fcntl(fd, F_GETFL);
    if (now >= 0 && (now & O_NONBLOCK) != 0) ::fcntl(fd, F_SETFL, now & ~O_NONBLOCK);
  }
  return fd;
}

void prep_close(io_uring_sqe* sqe, const io_request& r) noexcept {
  if (r.direct) {
    io_uring_prep_close_direct(sqe, static_cast<unsigned>(r.fd));
  } else {
    io_uring_prep_close(sqe, r.fd);
  }
}
int emulate_close(io_request& r, emu_try& t) {
  t.in_worker = false;  // done inline natively
  // close() releases the fd even when it reports EINTR; io_uring's close says 0 then too.
  return ::close(r.fd) == 0 || errno == EINTR ? 0 : -errno;
}

void prep_statx(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_statx(sqe, r.fd, static_cast<const char*>(r.addr), static_cast<int>(r.op_flags), r.len,
                      reinterpret_cast<struct statx*>(r.aux));
}
int emulate_statx(io_request& r, emu_try&) {
  return retry_eintr([&] {
    return ::statx(r.fd, static_cast<const char*>(r.addr), static_cast<int>(r.op_flags), r.len,
                   reinterpret_cast<struct statx*>(r.aux));
  });
}

void prep_fsync(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_fsync(sqe, r.fd, r.op_flags);
}
int emulate_fsync(io_request& r, emu_try&) {
  return retry_eintr([&] { return (r.op_flags & 1u) ? ::fdatasync(r.fd) : ::fsync(r.fd); });
}

void prep_fallocate(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_fallocate(sqe, r.fd, static_cast<int>(r.op_flags), static_cast<off_t>(r.offset),
                          static_cast<off_t>(r.aux));
}
int emulate_fallocate(io_request& r, emu_try&) {
  return retry_eintr([&] {
    return ::fallocate(r.fd, static_cast<int>(r.op_flags), static_cast<off_t>(r.offset),
                       static_cast<off_t>(r.aux));
  });
}

// liburing 2.3 has no helper for IORING_OP_FTRUNCATE (6.9): the length travels in off.
void prep_ftruncate(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(kop::ftruncate, sqe, r.fd, nullptr, 0, r.offset);
}
int emulate_ftruncate(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::ftruncate(r.fd, static_cast<off_t>(r.offset)); });
}

void prep_splice(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_splice(sqe, static_cast<int>(r.aux), static_cast<std::int64_t>(r.offset), r.fd, -1, r.len,
                       r.op_flags);
}
// Non-blocking on both ends: SPLICE_F_NONBLOCK covers the pipe; a socket output is switched for the call.
// splice(2) into a socket whose peer is gone raises SIGPIPE (it has no MSG_NOSIGNAL), which io_uring's
// splice does not: SIGPIPE is blocked for the call, and one the call raised is taken back.
int emulate_splice(io_request& r, emu_try&) {
  loff_t off = static_cast<loff_t>(r.offset);
  loff_t* off_in = r.offset == kCurrentPosition ? nullptr : &off;
  sigset_t pipe_only, old;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending;
  const bool was_pending = ::sigpending(&pending) == 0 && ::sigismember(&pending, SIGPIPE) == 1;
  const int n = nonblocking(r.fd, [&] {
    return static_cast<int>(
        ::splice(static_cast<int>(r.aux), off_in, r.fd, nullptr, r.len, r.op_flags | SPLICE_F_NONBLOCK));
  });
  if (n == -EPIPE && !was_pending) {
    const timespec now{};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return n;
}

}  // namespace uring::detail
