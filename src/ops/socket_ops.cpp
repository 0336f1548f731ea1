// ops/socket_ops.cpp — the socket operations' rows: socket (plain, into a direct slot), bind, listen,
// accept (plain, multishot, into direct slots), connect, recv, send, send_zc, recvmsg, sendmsg, shutdown
// and the multishot receive into provided buffers and the bundled send from them, each as the native ring
// prepares it and as the emulation runs it. ops/op_table.hpp says which fields each one reads.
#include <liburing.h>
#include <sys/socket.h>

#include "ops/op_table.hpp"
#include "ops/syscall.hpp"
#include "setup/liburing_compat.hpp"

namespace uring::detail {

static_assert(kop::socket == IORING_OP_SOCKET && kop::bind == kOpBind && kop::listen == kOpListen);

void prep_socket(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_socket(sqe, r.fd, static_cast<int>(r.op_flags), static_cast<int>(r.len), 0);
}
// The kernel refuses SOCK_CLOEXEC for a direct descriptor (the emulation's dup in the slot keeps it).
void prep_socket_direct(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_socket_direct_alloc(sqe, r.fd, static_cast<int>(r.op_flags) & ~SOCK_CLOEXEC,
                                    static_cast<int>(r.len), 0);
}
// Both socket kinds (the backend puts socket_direct's fd in a slot). Done inline natively, as bind and
// listen are.
int emulate_socket(io_request& r, emu_try& t) {
  t.in_worker = false;
  return retry_eintr([&] { return ::socket(r.fd, static_cast<int>(r.op_flags), static_cast<int>(r.len)); });
}

// liburing 2.3 has no io_uring_prep_bind / _listen: the kernel reads bind's address length from addr2
// and listen's backlog from len.
void prep_bind(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(kOpBind, sqe, r.fd, r.addr, 0, 0);
  sqe->addr2 = r.len;
}
int emulate_bind(io_request& r, emu_try& t) {
  t.in_worker = false;
  return retry_eintr([&] { return ::bind(r.fd, static_cast<const sockaddr*>(r.addr), r.len); });
}

void prep_listen(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(kOpListen, sqe, r.fd, nullptr, r.len, 0);
}
int emulate_listen(io_request& r, emu_try& t) {
  t.in_worker = false;
  return retry_eintr([&] { return ::listen(r.fd, static_cast<int>(r.len)); });
}

void prep_accept(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_accept(sqe, r.fd, static_cast<sockaddr*>(r.addr), reinterpret_cast<socklen_t*>(r.aux),
                       static_cast<int>(r.op_flags));
}
void prep_accept_multishot(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_multishot_accept(sqe, r.fd, static_cast<sockaddr*>(r.addr),
                                 reinterpret_cast<socklen_t*>(r.aux), static_cast<int>(r.op_flags));
}
// No SOCK_CLOEXEC: the kernel refuses it for a direct descriptor.
void prep_accept_direct(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_accept_direct(sqe, r.fd, nullptr, nullptr, 0, IORING_FILE_INDEX_ALLOC - 1);
}
void prep_accept_multishot_direct(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_multishot_accept_direct(sqe, r.fd, nullptr, nullptr, 0);
}
// Every accept, one connection per try (the backend puts it in a slot for the direct kinds; op_flags:
// SOCK_CLOEXEC there, as the table's dups have).
int emulate_accept(io_request& r, emu_try&) {
  return nonblocking(r.fd, [&] {
    return ::accept4(r.fd, static_cast<sockaddr*>(r.addr), reinterpret_cast<socklen_t*>(r.aux),
                     static_cast<int>(r.op_flags));
  });
}

void prep_connect(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_connect(sqe, r.fd, static_cast<const sockaddr*>(r.addr), r.len);
}
// The first call starts the handshake; a later one (once epoll says writable) reports how it went:
// EISCONN when it succeeded, the socket's error when it failed, EALREADY while it is still going.
int emulate_connect(io_request& r, emu_try&) {
  const int rc =
      nonblocking(r.fd, [&] { return ::connect(r.fd, static_cast<const sockaddr*>(r.addr), r.len); });
  if (rc == -EINPROGRESS || rc == -EALREADY) return -EAGAIN;
  if (rc == -EISCONN) return 0;
  return rc;
}

namespace {
// recv and send never block (MSG_DONTWAIT, so the caller's fd flags are untouched); MSG_WAITALL collects
// as io_uring does.
template <class F>
int stream_io(io_request& r, F once) {
  return (r.op_flags & MSG_WAITALL) != 0 ? transfer_all(r, once) : retry_eintr(once);
}
int dontwait(const io_request& r) { return static_cast<int>(r.op_flags) | MSG_DONTWAIT; }
}  // namespace

void prep_recv(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_recv(sqe, r.fd, r.addr, r.len, static_cast<int>(r.op_flags));
}
int emulate_recv(io_request& r, emu_try&) {
  return stream_io(r, [&] { return ::recv(r.fd, r.addr, r.len, dontwait(r)); });
}

void prep_send(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_send(sqe, r.fd, r.addr, r.len, static_cast<int>(r.op_flags));
}
int emulate_send(io_request& r, emu_try&) {
  return stream_io(r, [&] { return ::send(r.fd, r.addr, r.len, dontwait(r)); });
}

void prep_send_zc(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_send_zc(sqe, r.fd, r.addr, r.len, static_cast<int>(r.op_flags), 0);
}
// A copy: the buffer is free again as soon as this returns, so there is no notification to post.
int emulate_send_zc(io_request& r, emu_try& t) { return emulate_send(r, t); }

void prep_recvmsg(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_recvmsg(sqe, r.fd, static_cast<msghdr*>(r.addr), r.op_flags);
}
int emulate_recvmsg(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::recvmsg(r.fd, static_cast<msghdr*>(r.addr), dontwait(r)); });
}

void prep_sendmsg(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_sendmsg(sqe, r.fd, static_cast<const msghdr*>(r.addr), r.op_flags);
}
int emulate_sendmsg(io_request& r, emu_try&) {
  return retry_eintr([&] { return ::sendmsg(r.fd, static_cast<const msghdr*>(r.addr), dontwait(r)); });
}

void prep_shutdown(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_shutdown(sqe, r.fd, static_cast<int>(r.len));
}
int emulate_shutdown(io_request& r, emu_try& t) {
  t.in_worker = false;  // done inline natively
  return retry_eintr([&] { return ::shutdown(r.fd, static_cast<int>(r.len)); });
}

void prep_recv_multishot(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_recv_multishot(sqe, r.fd, nullptr, 0, static_cast<int>(r.op_flags));
  const std::uint64_t mode = r.aux & ~kPollFirst;
  if (mode == kOneChunk || mode == kBundle) sqe->ioprio &= ~IORING_RECV_MULTISHOT;
  if ((r.aux & kPollFirst) != 0) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  if (mode == kBundle) {
    sqe->ioprio |= kRecvsendBundle;
    sqe->len = static_cast<std::uint32_t>(r.offset);
  }
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = static_cast<std::uint16_t>(r.len);
}

void prep_send_bundle(io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_send(sqe, r.fd, nullptr, 0, static_cast<int>(r.op_flags));
  sqe->ioprio |= kRecvsendBundle;
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = static_cast<std::uint16_t>(r.len);
}

}  // namespace uring::detail
