// ops/ring_ops.cpp — the operations on the ring itself: timeout, poll, cancel_fd, install_direct,
// plain_fd and send_direct, as the native ring prepares them (the emulated backend serves them from its
// own state), and the table's names and kernel numbers checked against liburing's.
#include <liburing.h>

#include "ops/op_table.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/op_allowlist.hpp"

namespace uring {

namespace detail {

static_assert(kop::nop == IORING_OP_NOP && kop::readv == IORING_OP_READV && kop::writev == IORING_OP_WRITEV &&
              kop::fsync == IORING_OP_FSYNC && kop::poll_add == IORING_OP_POLL_ADD &&
              kop::sendmsg == IORING_OP_SENDMSG && kop::recvmsg == IORING_OP_RECVMSG &&
              kop::timeout == IORING_OP_TIMEOUT && kop::accept == IORING_OP_ACCEPT &&
              kop::async_cancel == IORING_OP_ASYNC_CANCEL && kop::link_timeout == IORING_OP_LINK_TIMEOUT &&
              kop::connect == IORING_OP_CONNECT && kop::fallocate == IORING_OP_FALLOCATE &&
              kop::openat == IORING_OP_OPENAT && kop::close == IORING_OP_CLOSE &&
              kop::files_update == IORING_OP_FILES_UPDATE && kop::statx == IORING_OP_STATX &&
              kop::read == IORING_OP_READ && kop::write == IORING_OP_WRITE && kop::send == IORING_OP_SEND &&
              kop::recv == IORING_OP_RECV && kop::splice == IORING_OP_SPLICE &&
              kop::shutdown == IORING_OP_SHUTDOWN && kop::msg_ring == IORING_OP_MSG_RING &&
              kop::send_zc == IORING_OP_SEND_ZC && kop::fixed_fd_install == kOpFixedFdInstall);
// IORING_OP_FTRUNCATE (6.9, 55) is newer than liburing 2.3, which has no name for it.

void prep_timeout(io_uring_sqe* sqe, const io_request& r) noexcept {
  static_assert(sizeof(timespec64) == sizeof(__kernel_timespec));
  unsigned flags = (r.op_flags & kTimeoutAbsolute) ? IORING_TIMEOUT_ABS : 0;
  if (r.op_flags & kTimeoutRepeat) flags |= kTimeoutMultishot;  // count 0: until cancelled
  io_uring_prep_timeout(sqe, static_cast<__kernel_timespec*>(r.addr), 0, flags);
}

void prep_poll(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_poll_add(sqe, r.fd, r.op_flags);
}

void prep_cancel_fd(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_cancel_fd(sqe, r.fd, IORING_ASYNC_CANCEL_ALL);
}

void prep_install_direct(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_files_update(sqe, static_cast<int*>(r.addr), 1, static_cast<int>(IORING_FILE_INDEX_ALLOC));
}

void prep_plain_fd(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(kop::fixed_fd_install, sqe, r.fd, nullptr, 0, 0);  // flags 0: the new fd is O_CLOEXEC
}

// liburing 2.3 has no helper for it (io_uring_prep_msg_ring_fd came in 2.4): by hand.
void prep_send_direct(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(kop::msg_ring, sqe, r.fd, reinterpret_cast<void*>(std::uintptr_t{IORING_MSG_SEND_FD}), 0,
                   r.offset);
  sqe->addr3 = r.aux;
  sqe->file_index = IORING_FILE_INDEX_ALLOC;  // the target's kernel picks the slot
}

}  // namespace detail

const char* to_string(op_kind k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < detail::kOpCodeCount ? detail::kOpTable[i].name : "?";
}

}  // namespace uring
