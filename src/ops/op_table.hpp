// ops/op_table.hpp — every operation the library starts, one row each: its name, the kernel opcode it
// becomes, the kernel that brought it, how the emulation runs it, and its two implementations.
//
// Provides: detail::op_row, detail::kOpTable, detail::op_info(code), detail::emulation, detail::emu_try.
// Threads: constant data; any thread.
//
// Adding an operation: a name in op_code (uring/detail/op_code.hpp), a row here, and its two functions
// in the family file beside this one (ring_ops.cpp, file_ops.cpp, fs_ops.cpp, fixed_ops.cpp,
// futex_ops.cpp, socket_ops.cpp, process_ops.cpp). The checks at the end refuse to compile a table whose
// rows are out of order or missing, or a row without a native preparation, or without an emulated attempt
// where its emulation class needs one. Everything else — the restriction list, to_string, the executor's
// statistics, the emulation's dispatch — reads the table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "uring/detail/operation.hpp"

struct io_uring_sqe;

namespace uring::detail {

// How the emulated backend runs an operation.
enum class emulation : std::uint8_t {
  backend,      // from the emulated backend's own state (nop, timers, poll, direct slots, cancels, futexes)
  readable,     // a non-blocking try at submission; on EAGAIN it waits in epoll for the fd to be readable
  writable,     // ... writable
  multishot,    // as readable, taking everything the fd has each time (a multishot accept)
  synchronous,  // the syscall at submission, as an io-wq worker would run it
  none,         // no emulation: the library takes another road on this backend (-EINVAL if asked)
};

// One try at an operation as a syscall (emulated backend). With may_block false it must not block:
// -EAGAIN means "wait for readiness". in_worker comes in as "an io-wq worker would have run this" for the
// synchronous class and false otherwise; the attempt corrects it where that depends on the call.
struct emu_try {
  bool may_block = false;
  bool in_worker = false;
};

using native_prep_fn = void (*)(io_uring_sqe* sqe, const io_request& r);
using emulated_fn = int (*)(io_request& r, emu_try& t);

struct op_row {
  op_code code;
  const char* name;
  std::uint8_t kernel_opcode;  // IORING_OP_*: what the ring's restrictions name
  const char* since;           // the kernel that brought it, as "5.6"
  emulation emulated_as;
  // request.direct makes fd a slot of the table of direct descriptors (IOSQE_FIXED_FILE). False where
  // direct means something else (close: the slot to empty).
  bool fixed_file;
  // op_flags are MSG_* flags: MSG_DONTWAIT means one try that fails EAGAIN rather than a wait.
  bool msg_flags;
  // The kernel fails the next linked SQE when this one fails (measured on 6.18 for every operation: it
  // does not after a failed fsync, statx, mkdirat, unlinkat, renameat, symlinkat, linkat, fallocate,
  // madvise, shutdown or ftruncate, nor bind, listen and the rest set false here). A chain links the
  // steps after one only where this is true, and otherwise waits for it and judges it (ops/chain.cpp).
  bool fails_link;
  native_prep_fn native;  // fills the SQE (the caller sets user_data, IOSQE_FIXED_FILE and links)
  emulated_fn emulated;   // null for the emulation classes that need none
};

// The family files' functions, declared for the table (prep_rw: nop, read and write share the inline
// path's encoder).
void prep_rw(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_readv(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_writev(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_timeout(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_poll(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_openat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_close(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_statx(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_fsync(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_fallocate(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_ftruncate(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_unlinkat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_renameat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_mkdirat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_symlinkat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_linkat(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_fadvise(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_madvise(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_socket(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_socket_direct(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_bind(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_listen(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_splice(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_accept(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_accept_multishot(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_accept_direct(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_accept_multishot_direct(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_connect(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_recv(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send_zc(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_recvmsg(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_sendmsg(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_shutdown(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_recv_multishot(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_read_multishot(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_cancel_fd(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_install_direct(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_plain_fd(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send_direct(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_futex_wait(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_futex_wake(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_waitid(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_read_fixed(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_write_fixed(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send_fixed(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send_zc_fixed(io_uring_sqe* sqe, const io_request& r) noexcept;
void prep_send_bundle(io_uring_sqe* sqe, const io_request& r) noexcept;
int emulate_rw(io_request& r, emu_try& t);
int emulate_readv(io_request& r, emu_try& t);
int emulate_writev(io_request& r, emu_try& t);
int emulate_openat(io_request& r, emu_try& t);
int emulate_close(io_request& r, emu_try& t);
int emulate_statx(io_request& r, emu_try& t);
int emulate_fsync(io_request& r, emu_try& t);
int emulate_fallocate(io_request& r, emu_try& t);
int emulate_ftruncate(io_request& r, emu_try& t);
int emulate_unlinkat(io_request& r, emu_try& t);
int emulate_renameat(io_request& r, emu_try& t);
int emulate_mkdirat(io_request& r, emu_try& t);
int emulate_symlinkat(io_request& r, emu_try& t);
int emulate_linkat(io_request& r, emu_try& t);
int emulate_fadvise(io_request& r, emu_try& t);
int emulate_madvise(io_request& r, emu_try& t);
int emulate_socket(io_request& r, emu_try& t);
int emulate_bind(io_request& r, emu_try& t);
int emulate_listen(io_request& r, emu_try& t);
int emulate_splice(io_request& r, emu_try& t);
int emulate_accept(io_request& r, emu_try& t);
int emulate_connect(io_request& r, emu_try& t);
int emulate_recv(io_request& r, emu_try& t);
int emulate_send(io_request& r, emu_try& t);
int emulate_send_zc(io_request& r, emu_try& t);
int emulate_recvmsg(io_request& r, emu_try& t);
int emulate_sendmsg(io_request& r, emu_try& t);
int emulate_shutdown(io_request& r, emu_try& t);
int emulate_futex_wake(io_request& r, emu_try& t);
int emulate_waitid(io_request& r, emu_try& t);

// waitid names a process, which epoll cannot watch: before its first try the emulated backend asks
// emulated_waitid_target to make a wait that would block name a pidfd (ops/process_ops.cpp). It yields
// kWaitOnPidfd to go on (the request may now name a pidfd of its own, which emulated_waitid_done
// closes when the operation completes), or the result to complete with at once.
inline constexpr int kWaitOnPidfd = 1;
int emulated_waitid_target(io_request& r);
void emulated_waitid_done(io_request& r) noexcept;
int emulate_rw_fixed(io_request& r, emu_try& t);

// Kernel opcodes, as the kernel numbers them (checked against liburing's in ops/op_table.cpp, which also
// names those liburing 2.3 lacks).
namespace kop {
inline constexpr std::uint8_t nop = 0, readv = 1, writev = 2, fsync = 3, poll_add = 6, sendmsg = 9,
                              recvmsg = 10, timeout = 11, accept = 13, async_cancel = 14, link_timeout = 15,
                              connect = 16, fallocate = 17, openat = 18, close = 19, files_update = 20,
                              statx = 21, read = 22, write = 23, fadvise = 24, madvise = 25, send = 26,
                              recv = 27, splice = 30, shutdown = 34, renameat = 35, unlinkat = 36,
                              mkdirat = 37, symlinkat = 38, linkat = 39, msg_ring = 40, socket = 45,
                              send_zc = 47, waitid = 50, futex_wait = 51, futex_wake = 52,
                              fixed_fd_install = 54, ftruncate = 55, bind = 56, listen = 57,
                              read_multishot = 49;
inline constexpr std::uint8_t read_fixed = 4, write_fixed = 5;
}  // namespace kop

using e = emulation;
// Fields of io_request that each operation reads (the others are ignored), and what it completes with.
inline constexpr op_row kOpTable[] = {
    // (no fields). Completes with 0.
    {op_code::nop, "nop", kop::nop, "5.1", e::backend, true, false, true, prep_rw, nullptr},
    // fd, addr, len, offset (kCurrentPosition: the file's position, as for pipes). The byte count.
    {op_code::read, "read", kop::read, "5.6", e::readable, true, false, true, prep_rw, emulate_rw},
    {op_code::write, "write", kop::write, "5.6", e::writable, true, false, true, prep_rw, emulate_rw},
    // addr = const timespec64*; op_flags: kTimeoutAbsolute. Completes -ETIME when it expires.
    {op_code::timeout, "timeout", kop::timeout, "5.4", e::backend, true, false, true, prep_timeout, nullptr},
    // fd, op_flags = poll mask (POLLIN...). Completes with the ready events.
    {op_code::poll, "poll", kop::poll_add, "5.1", e::backend, true, false, true, prep_poll, nullptr},
    // fd = dirfd, addr = path, op_flags = open flags, len = mode. Completes with the new fd.
    {op_code::openat, "openat", kop::openat, "5.6", e::synchronous, true, false, true, prep_openat,
     emulate_openat},
    // fd (direct: the slot to empty).
    {op_code::close, "close", kop::close, "5.6", e::synchronous, false, false, true, prep_close,
     emulate_close},
    // fd = dirfd, addr = path, op_flags = AT_* flags, len = mask, aux = struct statx*.
    {op_code::statx, "statx", kop::statx, "5.6", e::synchronous, true, false, false, prep_statx,
     emulate_statx},
    // fd, op_flags = kFsyncDatasync for fdatasync.
    {op_code::fsync, "fsync", kop::fsync, "5.1", e::synchronous, true, false, false, prep_fsync,
     emulate_fsync},
    // fd, addr = sockaddr* (or null), aux = socklen_t*, op_flags = SOCK_* flags. The new fd.
    {op_code::accept, "accept", kop::accept, "5.5", e::readable, true, false, true, prep_accept,
     emulate_accept},
    // As accept; one completion per connection, flagged kCqeMore while more will come.
    {op_code::accept_multishot, "accept_multishot", kop::accept, "5.19", e::multishot, true, false, false,
     prep_accept_multishot, emulate_accept},
    // fd, addr = const sockaddr*, len = its length.
    {op_code::connect, "connect", kop::connect, "5.5", e::writable, true, false, true, prep_connect,
     emulate_connect},
    // fd, addr, len, op_flags = MSG_* flags. The byte count, 0 at end of stream. Sends always carry
    // MSG_NOSIGNAL from the caller: a closed peer is EPIPE, not a signal.
    {op_code::recv, "recv", kop::recv, "5.6", e::readable, true, true, true, prep_recv, emulate_recv},
    {op_code::send, "send", kop::send, "5.6", e::writable, true, true, true, prep_send, emulate_send},
    // fd, addr = msghdr*, op_flags = MSG_* flags.
    {op_code::recvmsg, "recvmsg", kop::recvmsg, "5.3", e::readable, true, true, true, prep_recvmsg,
     emulate_recvmsg},
    {op_code::sendmsg, "sendmsg", kop::sendmsg, "5.3", e::writable, true, true, true, prep_sendmsg,
     emulate_sendmsg},
    // fd, len = SHUT_RD / SHUT_WR / SHUT_RDWR.
    {op_code::shutdown, "shutdown", kop::shutdown, "5.11", e::synchronous, true, false, false, prep_shutdown,
     emulate_shutdown},
    // fd: cancels every operation in flight on it; completes with how many, or -ENOENT.
    {op_code::cancel_fd, "cancel_fd", kop::async_cancel, "5.19", e::backend, true, false, false,
     prep_cancel_fd, nullptr},
    // fd, op_flags = MSG_* flags, len = buffer group (a provided-buffer ring registered on this ring). One
    // completion per chunk received, flagged kCqeMore while armed, each carrying the buffer it filled
    // (kCqeBuffer, id in the flags' top 16 bits). -ENOBUFS (final) when the group ran dry. aux = kOneChunk:
    // a single recv instead, one chunk (one buffer) at most. aux = kBundle: a single bundled recv of at most
    // `offset` bytes (IORING_RECVSEND_BUNDLE): one completion, res spanning consecutive buffers of the ring
    // from the one it names. The emulation has no provided buffers: the
    // library receives into its own pool there.
    {op_code::recv_multishot, "recv_multishot", kop::recv, "6.0", e::none, true, false, false,
     prep_recv_multishot, nullptr},
    // As send, zero-copy: the byte count comes flagged kCqeMore, then a completion flagged kCqeNotif once the
    // kernel no longer reads the buffer. The emulation sends a copy: one completion.
    {op_code::send_zc, "send_zc", kop::send_zc, "6.0", e::writable, true, true, false, prep_send_zc,
     emulate_send_zc},
    // fd = the output (a pipe, or a socket fed from a pipe), aux = the input fd, offset = the input's offset
    // (kCurrentPosition for a pipe), len, op_flags = SPLICE_F_* flags. The bytes moved, 0 at the input's
    // end. One side must be a pipe. The input must have data to give (the emulation waits only for the
    // output to take more).
    {op_code::splice, "splice", kop::splice, "5.7", e::writable, true, false, true, prep_splice,
     emulate_splice},
    // addr = int* holding an fd: installs a reference to its file in a free slot of the executor's table of
    // direct descriptors (IORING_FILE_INDEX_ALLOC), writes the slot over the fd, and completes with 1.
    // -ENXIO without a table, -ENFILE when it is full.
    {op_code::install_direct, "install_direct", kop::files_update, "5.19", e::backend, true, false, false,
     prep_install_direct, nullptr},
    // fd = a direct slot: a new plain fd for its file (O_CLOEXEC).
    {op_code::plain_fd, "plain_fd", kop::fixed_fd_install, "6.8", e::backend, true, false, false,
     prep_plain_fd, nullptr},
    // fd = another ring's fd, aux = one of our direct slots, offset = the user_data of the CQE it posts
    // there: installs the slot's file in a free slot of that ring's table (IORING_MSG_SEND_FD). Completes
    // with that slot. The emulation passes the file through the target's mailbox instead.
    {op_code::send_direct, "send_direct", kop::msg_ring, "6.0", e::none, false, false, false,
     prep_send_direct, nullptr},
    // fd: as accept, the new socket put in a free slot of the table of direct descriptors instead of the
    // process's. Completes with the slot; -ENFILE when the table is full or missing (the connection is
    // closed).
    {op_code::accept_direct, "accept_direct", kop::accept, "5.19", e::readable, true, false, false,
     prep_accept_direct, emulate_accept},
    // fd: as accept_multishot, each connection in a free slot. Each completion is a slot; -ENFILE (final)
    // when the table is full or missing.
    {op_code::accept_multishot_direct, "accept_multishot_direct", kop::accept, "5.19", e::multishot, true,
     false, false, prep_accept_multishot_direct, emulate_accept},
    // fd, addr = const iovec*, len = their count, offset (kCurrentPosition as for read). The byte count.
    {op_code::readv, "readv", kop::readv, "5.1", e::readable, true, false, true, prep_readv, emulate_readv},
    {op_code::writev, "writev", kop::writev, "5.1", e::writable, true, false, true, prep_writev,
     emulate_writev},
    // fd, op_flags = fallocate(2)'s mode, offset, aux = length.
    {op_code::fallocate, "fallocate", kop::fallocate, "5.6", e::synchronous, true, false, false,
     prep_fallocate, emulate_fallocate},
    // fd, offset = the new length.
    {op_code::ftruncate, "ftruncate", kop::ftruncate, "6.9", e::synchronous, true, false, false,
     prep_ftruncate, emulate_ftruncate},
    // The operations on names take no direct descriptor: the kernel refuses IOSQE_FIXED_FILE for them.
    // fd = dirfd, addr = path, op_flags = 0 or AT_REMOVEDIR.
    {op_code::unlinkat, "unlinkat", kop::unlinkat, "5.11", e::synchronous, false, false, false, prep_unlinkat,
     emulate_unlinkat},
    // fd = the old dirfd, addr = the old path, len = the new dirfd, aux = the new path (const char*),
    // op_flags = renameat2(2)'s RENAME_* flags.
    {op_code::renameat, "renameat", kop::renameat, "5.11", e::synchronous, false, false, false, prep_renameat,
     emulate_renameat},
    // fd = dirfd, addr = path, len = mode.
    {op_code::mkdirat, "mkdirat", kop::mkdirat, "5.15", e::synchronous, false, false, false, prep_mkdirat,
     emulate_mkdirat},
    // addr = the target, fd = the new link's dirfd, aux = its path (const char*).
    {op_code::symlinkat, "symlinkat", kop::symlinkat, "5.15", e::synchronous, false, false, false,
     prep_symlinkat, emulate_symlinkat},
    // As renameat; op_flags = linkat(2)'s AT_* flags.
    {op_code::linkat, "linkat", kop::linkat, "5.15", e::synchronous, false, false, false, prep_linkat,
     emulate_linkat},
    // fd, offset, len (0: to the end), op_flags = POSIX_FADV_* advice.
    {op_code::fadvise, "fadvise", kop::fadvise, "5.6", e::synchronous, true, false, true, prep_fadvise,
     emulate_fadvise},
    // addr, len, op_flags = MADV_* advice (no fd).
    {op_code::madvise, "madvise", kop::madvise, "5.6", e::synchronous, false, false, false, prep_madvise,
     emulate_madvise},
    // fd = the domain (AF_*), op_flags = the type (SOCK_* with SOCK_NONBLOCK / SOCK_CLOEXEC), len = the
    // protocol. The new fd.
    {op_code::socket, "socket", kop::socket, "5.19", e::synchronous, false, false, true, prep_socket,
     emulate_socket},
    // As socket, the new socket put in a free slot of the table of direct descriptors (no plain fd).
    // Completes with the slot; -ENFILE when the table is full or missing.
    {op_code::socket_direct, "socket_direct", kop::socket, "5.19", e::synchronous, false, false, false,
     prep_socket_direct, emulate_socket},
    // fd, addr = const sockaddr*, len = its length.
    {op_code::bind, "bind", kop::bind, "6.11", e::synchronous, true, false, false, prep_bind, emulate_bind},
    // fd, len = the backlog.
    {op_code::listen, "listen", kop::listen, "6.11", e::synchronous, true, false, false, prep_listen,
     emulate_listen},
    // addr = a 32-bit futex word of this process, offset = the value expected there, aux = the bitset
    // mask; fd = FUTEX2_* flags (size u32, private). Completes with 0 once woken, -EAGAIN at once if the
    // word does not hold the value. The emulation keeps the wait in a process-wide list that the
    // library's wakes read (backend/emulated/futex_registry.hpp): a futex cannot be polled.
    {op_code::futex_wait, "futex_wait", kop::futex_wait, "6.7", e::backend, false, false, false,
     prep_futex_wait, nullptr},
    // As futex_wait, offset = how many waiters to wake at most. Completes with how many were woken.
    {op_code::futex_wake, "futex_wake", kop::futex_wake, "6.7", e::synchronous, false, false, false,
     prep_futex_wake, emulate_futex_wake},
    // fd = the id (a pid, a pidfd, a process group), len = the idtype (P_PID, P_PIDFD, P_ALL, P_PGID),
    // op_flags = waitid(2)'s options (WEXITED, WNOHANG, ...), addr = siginfo_t* (or null). Completes with 0
    // and the siginfo filled as waitid(2) fills it. The emulation waits on a pidfd (emulated_waitid_target).
    {op_code::waitid, "waitid", kop::waitid, "6.7", e::readable, false, false, false, prep_waitid,
     emulate_waitid},
    // Registered buffers (uring/fixed_buffers.hpp): aux = the buffer's index in the executor's table, and
    // [addr, addr + len) must lie inside that buffer (-EFAULT otherwise, and for an index the table lacks;
    // the emulation keeps the same table and checks the same way before the syscall).
    // fd, addr, len, offset (kCurrentPosition as for read), aux. The byte count.
    {op_code::read_fixed, "read_fixed", kop::read_fixed, "5.1", e::readable, true, false, true,
     prep_read_fixed, emulate_rw_fixed},
    {op_code::write_fixed, "write_fixed", kop::write_fixed, "5.1", e::writable, true, false, true,
     prep_write_fixed, emulate_rw_fixed},
    // As send and send_zc, from a registered buffer (IORING_RECVSEND_FIXED_BUF): fd, addr, len, op_flags =
    // MSG_* flags, aux. send_zc takes one since 6.0; a plain send in no kernel up to 6.18 (EINVAL), so
    // the probe tries it (kernel_features::send_fixed_buf).
    {op_code::send_fixed, "send_fixed", kop::send, "probe", e::writable, true, true, true, prep_send_fixed,
     emulate_send},
    {op_code::send_zc_fixed, "send_zc_fixed", kop::send_zc, "6.0", e::writable, true, true, true,
     prep_send_zc_fixed, emulate_send_zc},
    // fd (a pipe, FIFO, eventfd: pollable, no offset), len = buffer group (a provided-buffer ring of this
    // ring). As recv_multishot: one completion per chunk, flagged kCqeMore while armed, each carrying the
    // buffer it filled; -ENOBUFS (final) when the group ran dry; -EBADFD for an fd that cannot be polled.
    // aux = kOneChunk: a one-shot IORING_OP_READ that selects its buffer from the group instead (what a
    // kernel without it, URING_DISABLE=read_multishot, or a stream with less than the whole pool gets). The
    // emulation reads into the library's
    // own pool instead (net::buffer_pool without a ring).
    {op_code::read_multishot, "read_multishot", kop::read_multishot, "6.7", e::none, true, false, false,
     prep_read_multishot, nullptr},
    // fd, op_flags = MSG_* flags, len = buffer group (a provided-buffer ring of this ring, each slot's length
    // the bytes to send from it). One send of every buffer queued in the group, in ring order from its head
    // (IORING_RECVSEND_BUNDLE): the bytes sent, kCqeBuffer naming the first buffer; flagged kCqeMore when
    // it goes on with buffers it could not take at once. -ENOBUFS when the group is empty. The emulation
    // has no provided buffers: send_queue sends by sendmsg there.
    {op_code::send_bundle, "send_bundle", kop::send, "6.10", e::none, true, true, false, prep_send_bundle,
     nullptr},
};

[[nodiscard]] constexpr const op_row& op_info(op_code c) noexcept {
  return kOpTable[static_cast<std::size_t>(c)];
}

[[nodiscard]] constexpr bool needs_emulated_fn(emulation how) noexcept {
  return how == emulation::readable || how == emulation::writable || how == emulation::multishot ||
         how == emulation::synchronous;
}

// The table is complete and in op_code order, and every row has what its classes require.
constexpr bool op_table_is_whole() noexcept {
  if (std::size(kOpTable) != kOpCodeCount) return false;
  for (std::size_t i = 0; i < kOpCodeCount; ++i) {
    const op_row& row = kOpTable[i];
    if (static_cast<std::size_t>(row.code) != i || row.name == nullptr || row.native == nullptr) return false;
    if (needs_emulated_fn(row.emulated_as) != (row.emulated != nullptr)) return false;
  }
  return true;
}
static_assert(
    op_table_is_whole(),
    "ops/op_table.hpp: one row per op_code, in order, each with a native preparation and, where its "
    "emulation class needs one, an emulated attempt");

}  // namespace uring::detail
