// ops/fs_ops.cpp — the operations on names in the file system (unlinkat, renameat, mkdirat, symlinkat,
// linkat) and the advice ones (fadvise, madvise), as the native ring prepares them and as the emulation
// runs them. ops/op_table.hpp says which fields each one reads.
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "ops/op_table.hpp"
#include "ops/syscall.hpp"

namespace uring::detail {

static_assert(kop::fadvise == IORING_OP_FADVISE && kop::madvise == IORING_OP_MADVISE &&
              kop::renameat == IORING_OP_RENAMEAT && kop::unlinkat == IORING_OP_UNLINKAT &&
              kop::mkdirat == IORING_OP_MKDIRAT && kop::symlinkat == IORING_OP_SYMLINKAT &&
              kop::linkat == IORING_OP_LINKAT);

namespace {

const char* path_of(const io_request& r) noexcept { return static_cast<const char*>(r.addr); }
// The second path of renameat, linkat and symlinkat.
const char* second_path_of(const io_request& r) noexcept { return reinterpret_cast<const char*>(r.aux); }
// The second dirfd of renameat and linkat travels in len.
int second_dirfd_of(const io_request& r) noexcept { return static_cast<int>(r.len); }

}  // namespace

void prep_unlinkat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_unlinkat(sqe, r.fd, path_of(r), static_cast<int>(r.op_flags));
}
int emulate_unlinkat(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::unlinkat(r.fd, path_of(r), static_cast<int>(r.op_flags)); });
}

void prep_renameat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_renameat(sqe, r.fd, path_of(r), second_dirfd_of(r), second_path_of(r), r.op_flags);
}
int emulate_renameat(io_request& r, emu_try&) {
  return retry_eintr(
      [&] { return ::renameat2(r.fd, path_of(r), second_dirfd_of(r), second_path_of(r), r.op_flags); });
}

void prep_mkdirat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_mkdirat(sqe, r.fd, path_of(r), static_cast<mode_t>(r.len));
}
int emulate_mkdirat(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::mkdirat(r.fd, path_of(r), static_cast<mode_t>(r.len)); });
}

void prep_symlinkat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_symlinkat(sqe, path_of(r), r.fd, second_path_of(r));
}
int emulate_symlinkat(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::symlinkat(path_of(r), r.fd, second_path_of(r)); });
}

void prep_linkat(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_linkat(sqe, r.fd, path_of(r), second_dirfd_of(r), second_path_of(r),
                       static_cast<int>(r.op_flags));
}
int emulate_linkat(io_request& r, emu_try&) {
  return retry_eintr([&] {
    return ::linkat(r.fd, path_of(r), second_dirfd_of(r), second_path_of(r), static_cast<int>(r.op_flags));
  });
}

void prep_fadvise(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_fadvise(sqe, r.fd, r.offset, static_cast<off_t>(r.len), static_cast<int>(r.op_flags));
}
// posix_fadvise(3) returns the error number rather than setting errno. The kernel gives the advice that
// only sets the file's read-ahead mode inline, the others (WILLNEED reads, DONTNEED drops) in a worker.
int emulate_fadvise(io_request& r, emu_try& t) {
  const int advice = static_cast<int>(r.op_flags);
  t.in_worker = advice != POSIX_FADV_NORMAL && advice != POSIX_FADV_RANDOM && advice != POSIX_FADV_SEQUENTIAL;
  int rc;
  do {
    rc = ::posix_fadvise(r.fd, static_cast<off_t>(r.offset), static_cast<off_t>(r.len), advice);
  } while (rc == EINTR);
  return -rc;
}

void prep_madvise(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_madvise(sqe, r.addr, static_cast<off_t>(r.len), static_cast<int>(r.op_flags));
}
int emulate_madvise(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::madvise(r.addr, r.len, static_cast<int>(r.op_flags)); });
}

}  // namespace uring::detail
