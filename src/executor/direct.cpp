// direct.cpp — installing, closing and sending direct descriptors (uring/direct.hpp).
#include "uring/direct.hpp"
#include "executor/executor_state.hpp"

#include <cerrno>
#include <string>
#include <system_error>

#include "uring/owned_fd.hpp"
#include "uring/resume_on.hpp"

namespace uring {

namespace detail {
void throw_direct_error(int err, const char* call, long arg, const char* ebadf, bool target) {
  std::string what = std::string("uring::") + call + "(" + std::to_string(arg) + ")";
  const std::string whose = target ? ": the target executor" : ": the executor";
  if (err == ENXIO)
    what += whose + " has no table of direct descriptors (executor_options::direct_files is 0)";
  if (err == ENFILE)
    what += whose + "'s table of direct descriptors is full (executor_options::direct_files)";
  if (err == EBADF && ebadf != nullptr) what += std::string(": ") + ebadf;
  throw std::system_error(err, std::system_category(), what);
}
}  // namespace detail

namespace {
constexpr const char* kEmptySlot = "the slot is empty";

// IORING_OP_FILES_UPDATE with IORING_FILE_INDEX_ALLOC: the slot, or -errno.
task<int> install(int fd) {
  int slot = fd;  // the kernel writes the slot it chose over the fd
  const io_result r = co_await detail::io_awaitable<int, false>(
      "install_direct", {.code = detail::op_code::install_direct, .addr = &slot});
  co_return r.res < 0 ? r.res : slot;
}
}  // namespace

task<direct_fd> install_direct(int fd) {
  const int slot = co_await install(fd);
  if (slot < 0) detail::throw_direct_error(-slot, "install_direct", fd, "not an open file descriptor");
  co_return direct_fd{static_cast<std::uint32_t>(slot)};
}

task<void> close_direct(direct_fd f) {
  const io_result r = co_await detail::io_awaitable<void, false>(
      "close_direct",
      {.code = detail::op_code::close, .direct = true, .fd = static_cast<std::int32_t>(f.index)});
  if (r.res < 0) detail::throw_direct_error(-r.res, "close_direct", f.index, kEmptySlot);
}

namespace detail {

namespace {
// The mailbox road, for either kind of target: the file as a plain fd (natively IORING_OP_FIXED_FD_INSTALL,
// emulated a dup), carried to target by submit_to and installed in its table there. Undelivered, the
// plain fd is closed with the function that carries it, and the file stays in slot f. Target is
// executor& or executor_handle, a copy: the task is lazy and may outlive the caller's handle.
template <class Target>
task<void> send_plain(Target target, direct_fd f, std::unique_ptr<direct_handoff> h) {
  const io_result plain = co_await io_awaitable<int, false>(
      "send_direct", {.code = op_code::plain_fd, .direct = true, .fd = static_cast<std::int32_t>(f.index)});
  if (plain.res == -EINVAL) {
    throw std::system_error(
        EOPNOTSUPP, std::system_category(),
        "uring::send_direct(" + std::to_string(f.index) +
            "): the mailbox road needs a plain fd for the file, and this kernel cannot make "
            "one (IORING_OP_FIXED_FD_INSTALL, 6.8)");
  }
  if (plain.res < 0) throw_direct_error(-plain.res, "send_direct", f.index, kEmptySlot);
  // Named, not a temporary in the co_await: g++ 12 mishandles a capturing lambda temporary there.
  auto carry = [fd = owned_fd(plain.res), h = std::move(h), index = f.index]() mutable -> task<void> {
    const int slot = co_await install(fd.get());
    if (slot < 0) throw_direct_error(-slot, "send_direct", index, kEmptySlot, true);
    fd.reset();
    h->deliver(direct_fd{static_cast<std::uint32_t>(slot)});
  };
  co_await submit_to(target, std::move(carry));
  co_await close_direct(f);
}
}  // namespace

task<void> send_direct(executor& target, direct_fd f, std::unique_ptr<direct_handoff> h) {
  // Where the kernel moves the file (IORING_MSG_SEND_FD), the CQE it posts on target's ring brings `h`
  // with the slot as its result.
  h->run = [](remote_node* n) noexcept {
    std::unique_ptr<direct_handoff> me(static_cast<direct_handoff*>(n));
    me->deliver(direct_fd{static_cast<std::uint32_t>(n->res)});
  };
  h->discard = [](remote_node* n) noexcept { delete static_cast<direct_handoff*>(n); };  // target shuts down
  const int ring = executor_core::direct_route(target, *h);
  if (ring == -ENXIO) throw_direct_error(ENXIO, "send_direct", f.index, nullptr, true);
  if (ring >= 0) {
    const io_result r = co_await io_awaitable<int, false>(
        "send_direct",
        {.code = op_code::send_direct,
         .fd = ring,
         .offset = reinterpret_cast<std::uint64_t>(static_cast<remote_node*>(h.get())) | kMessageTag,
         .aux = f.index});
    if (r.res >= 0) {
      h.release();  // target's CQE carries it now
      co_await close_direct(f);
      co_return;
    }
    // EINVAL: a kernel without IORING_MSG_SEND_FD (before 6.0); the mailbox road below works there.
    if (r.res != -EINVAL) throw_direct_error(-r.res, "send_direct", f.index, kEmptySlot, r.res != -EBADF);
  }
  co_await send_plain<executor&>(target, f, std::move(h));
}

task<void> send_direct(const executor_handle& target, direct_fd f, std::unique_ptr<direct_handoff> h) {
  return send_plain<executor_handle>(target, f, std::move(h));
}

}  // namespace detail
}  // namespace uring
