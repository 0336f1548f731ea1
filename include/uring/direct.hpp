/// @file
/// uring/direct.hpp — direct descriptors: files held in the executor's own table (io_uring's registered
/// files), so that an operation on one skips the kernel's lookup of an fd in the process's file table
/// (an fdget/fdput per operation, which threads sharing that table make costly).
///
/// Provides: uring::direct_fd, uring::install_direct, uring::close_direct, uring::send_direct (to an
/// executor& or an executor_handle), and uring::read / uring::write / uring::recv / uring::send on a
/// direct_fd (the last two for sockets, with MSG_* flags).
/// net::tcp_listener::accept_direct accepts a connection straight into a slot; accept_all_direct, every
/// connection of a multishot accept.
/// Threads: a direct_fd is a slot of one executor's table: use it only from coroutines on that executor;
/// send_direct moves the file into another executor's table.
///
/// The table has executor_options::direct_files slots (0 by default: no table), empty at start-up; what
/// it still holds when the executor goes is closed with it. install_direct(fd) puts a reference to fd's
/// file in a free slot. The fd itself stays the caller's, to close whenever it likes: the slot keeps the
/// file open until close_direct. An operation in flight keeps its file even if its slot is emptied
/// meanwhile. Errors, as std::system_error naming the call: ENXIO (the executor has no table), ENFILE (the
/// table is full), EBADF (not an open fd; for an operation or close_direct: an empty slot).
/// Natively the table is the ring's registered files (IORING_REGISTER_FILES2, 5.19; slots chosen by the
/// kernel, IORING_FILE_INDEX_ALLOC); emulated, each slot holds a dup() of the fd, one more fd per slot.
///
/// send_direct(target, f, fn) moves the file in slot f into a free slot of target's table and runs
/// fn(slot) on target's thread (fn returns void, or task<void>, which is spawned there). It completes once
/// the file is in target's table; slot f is then empty. Between two native rings that hand off by
/// MSG_RING the kernel moves the file (IORING_MSG_SEND_FD, 6.0: no plain fd is made); otherwise (an
/// emulated side, MSG_RING disabled, or a target named by an executor_handle) it travels as a plain fd
/// (natively IORING_OP_FIXED_FD_INSTALL, 6.8) through target's mailbox and is installed there. If it
/// fails (target has no table: ENXIO, a full one: ENFILE; target gone or shutting down: ESHUTDOWN), the
/// file stays in slot f, fn is destroyed without running, and the co_await throws std::system_error. An
/// exception escaping fn fails target's executor, as one escaping a posted function does. If target
/// shuts down after accepting the file but before running fn, fn is destroyed and the file is closed
/// with target's table.
#pragma once

#include <sys/socket.h>

#include <concepts>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "uring/buffer.hpp"
#include "uring/detail/io_awaitable.hpp"
#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/io.hpp"
#include "uring/spawn.hpp"
#include "uring/task.hpp"

namespace uring {

/// A slot of the running executor's table of direct descriptors.
struct direct_fd {
  std::uint32_t index = 0;  ///< the slot's index in the table
  /// Same slot.
  friend bool operator==(direct_fd, direct_fd) = default;
};

namespace detail {
/// Throws std::system_error(err) naming `call(arg)`. ENXIO and ENFILE say what to change about the table
/// (the running executor's, or with `target` send_direct's target's); `ebadf` says what EBADF means for
/// this call (null: the kernel's words only).
[[noreturn]] void throw_direct_error(int err, const char* call, long arg, const char* ebadf,
                                     bool target = false);

/// A direct descriptor on its way to another executor, and what runs there once it has a slot.
struct direct_handoff : remote_node {
  virtual ~direct_handoff() = default;
  /// On the target's thread, with the slot the file got there.
  virtual void deliver(direct_fd slot) noexcept = 0;
};
template <class Fn>
struct direct_handoff_of final : direct_handoff {
  explicit direct_handoff_of(Fn f) : fn(std::move(f)) {}
  void deliver(direct_fd slot) noexcept override {
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<Fn&, direct_fd>>) {
        fn(slot);
      } else {
        spawn(run_owned(std::move(fn), slot));
      }
    } catch (...) {
      report_posted_failure(std::current_exception());
    }
  }
  /// The task's frame owns the function: a lambda coroutine's captures live in the lambda, not the frame.
  static task<void> run_owned(Fn f, direct_fd slot) { co_await f(slot); }
  Fn fn;
};
task<void> send_direct(executor& target, direct_fd f, std::unique_ptr<direct_handoff> h);
task<void> send_direct(const executor_handle& target, direct_fd f, std::unique_ptr<direct_handoff> h);
/// What send_direct runs on the target: fn(slot) returning void, or a task<void> spawned there.
template <class Fn>
concept slot_function = std::is_void_v<std::invoke_result_t<Fn&, direct_fd>> ||
    std::is_same_v<std::invoke_result_t<Fn&, direct_fd>, task<void>>;
}  // namespace detail

/// Installs a reference to `fd`'s file in a free slot of the running executor's table; yields the slot.
task<direct_fd> install_direct(int fd);
/// Empties the slot (its file closes once no operation holds it).
task<void> close_direct(direct_fd f);

/// Moves the file in slot `f` into a free slot of `target`'s table and runs fn(that slot) there.
template <detail::slot_function Fn>
task<void> send_direct(executor& target, direct_fd f, Fn fn) {
  return detail::send_direct(target, f, std::make_unique<detail::direct_handoff_of<Fn>>(std::move(fn)));
}
/// The same to an executor_handle: ESHUTDOWN also where it names an executor that is gone. It always
/// takes the mailbox road (a plain fd, carried through the handle's lookup), as every call through a
/// handle does: the kernel's road names the target by its ring's fd, which a destroyed executor's
/// successor may reuse.
template <detail::slot_function Fn>
task<void> send_direct(const executor_handle& target, direct_fd f, Fn fn) {
  return detail::send_direct(target, f, std::make_unique<detail::direct_handoff_of<Fn>>(std::move(fn)));
}

///@{
/// As read, write, read_at and write_at on a plain fd (uring/io.hpp), on the file in slot `f`
/// (IOSQE_FIXED_FILE).
inline detail::io_awaitable<std::size_t> read_at(direct_fd f, mutable_buffer buf,
                                                 std::uint64_t offset) noexcept {
  return detail::rw("read", detail::op_code::read, true, static_cast<std::int32_t>(f.index), buf.data(),
                    buf.size(), offset);
}
inline detail::io_awaitable<std::size_t> write_at(direct_fd f, const_buffer buf,
                                                  std::uint64_t offset) noexcept {
  return detail::rw("write", detail::op_code::write, true, static_cast<std::int32_t>(f.index),
                    const_cast<void*>(buf.data()), buf.size(), offset);
}
inline detail::io_awaitable<std::size_t> read(direct_fd f, mutable_buffer buf) noexcept {
  return read_at(f, buf, detail::current_position);
}
inline detail::io_awaitable<std::size_t> write(direct_fd f, const_buffer buf) noexcept {
  return write_at(f, buf, detail::current_position);
}
///@}

///@{
/// recv(2) and send(2) on the socket in slot `f`, with their MSG_* flags: MSG_PEEK, MSG_DONTWAIT (fails
/// with EAGAIN instead of waiting), MSG_WAITALL (completes only once the whole buffer is done, the peer
/// has ended the stream, or an error came after some bytes: their count then), MSG_MORE, ... send always
/// adds MSG_NOSIGNAL: a peer that is gone is an EPIPE error, never a SIGPIPE. Each yields the byte
/// count; recv 0 once the peer has shut its side down.
inline detail::io_awaitable<std::size_t> recv(direct_fd f, mutable_buffer buf, int flags = 0) noexcept {
  return {"recv",
          {.code = detail::op_code::recv,
           .direct = true,
           .fd = static_cast<std::int32_t>(f.index),
           .len = detail::clamp_len(buf.size()),
           .op_flags = static_cast<std::uint32_t>(flags),
           .addr = buf.data()}};
}
inline detail::io_awaitable<std::size_t> send(direct_fd f, const_buffer buf, int flags = 0) noexcept {
  return {"send",
          {.code = detail::op_code::send,
           .direct = true,
           .fd = static_cast<std::int32_t>(f.index),
           .len = detail::clamp_len(buf.size()),
           .op_flags = static_cast<std::uint32_t>(flags | MSG_NOSIGNAL),
           .addr = const_cast<void*>(buf.data())}};
}
///@}

}  // namespace uring
