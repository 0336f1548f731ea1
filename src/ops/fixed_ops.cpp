// ops/fixed_ops.cpp — the operations on registered buffers (read_fixed, write_fixed, and send / send_zc
// from a registered buffer), as the native ring prepares them and as the emulation runs them. The
// emulated backend checks the index and the bounds against its own table first (backend/emulated/
// buffer_table.hpp); the syscalls are then the plain ones. ops/op_table.hpp says which fields each reads.
#include <liburing.h>
#include <sys/uio.h>

#include "ops/op_table.hpp"

namespace uring::detail {

static_assert(kop::read_fixed == IORING_OP_READ_FIXED && kop::write_fixed == IORING_OP_WRITE_FIXED);

namespace {
unsigned index_of(const io_request& r) noexcept { return static_cast<unsigned>(r.aux); }
}  // namespace

void prep_read_fixed(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_read_fixed(sqe, r.fd, r.addr, r.len, r.offset, static_cast<int>(index_of(r)));
}
void prep_write_fixed(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_write_fixed(sqe, r.fd, r.addr, r.len, r.offset, static_cast<int>(index_of(r)));
}
// As read and write (file_ops.cpp), which tell the direction by the code.
int emulate_rw_fixed(io_request& r, emu_try& t) {
  io_request plain = r;
  plain.code = r.code == op_code::read_fixed ? op_code::read : op_code::write;
  return emulate_rw(plain, t);
}

// liburing 2.3 has the zero-copy form only; a plain send takes the same flag in ioprio where the kernel
// accepts it (the probe's send_fixed_buf: 6.18 still refuses it with EINVAL).
void prep_send_fixed(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_send(sqe, r.fd, r.addr, r.len, static_cast<int>(r.op_flags));
  sqe->ioprio |= IORING_RECVSEND_FIXED_BUF;
  sqe->buf_index = static_cast<__u16>(index_of(r));
}
void prep_send_zc_fixed(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_send_zc_fixed(sqe, r.fd, r.addr, r.len, static_cast<int>(r.op_flags), 0, index_of(r));
}

}  // namespace uring::detail
