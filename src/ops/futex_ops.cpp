// ops/futex_ops.cpp — futex wait and wake (IORING_OP_FUTEX_WAIT / _WAKE, kernel 6.7), as the native ring
// prepares them and as the emulation runs the wake; and the same two calls for plain threads
// (uring/futex.hpp). The emulated wait is the emulated backend's own (backend/emulated/futex_registry.hpp).
#include <liburing.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "backend/emulated/futex_registry.hpp"
#include "ops/futex_calls.hpp"
#include "ops/op_table.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/futex.hpp"

namespace uring::detail {

static_assert(kop::futex_wait == kOpFutexWait && kop::futex_wake == kOpFutexWake);
static_assert(kFutexFlags == (kFutex2SizeU32 | kFutex2Private));

namespace {

// The SQE both ops share: fd = FUTEX2_* flags, addr = the word, addr2 = the value (wait) or the count
// (wake), addr3 = the mask; len and the op flags (sqe->futex_flags) stay 0, as the kernel requires.
void prep_futex(std::uint8_t opcode, io_uring_sqe* sqe, const io_request& r) noexcept {
  io_uring_prep_rw(opcode, sqe, r.fd, r.addr, 0, 0);
  sqe->addr2 = r.offset;
  sqe->addr3 = r.aux;
}

}  // namespace

void prep_futex_wait(io_uring_sqe* sqe, const io_request& r) noexcept { prep_futex(kOpFutexWait, sqe, r); }
void prep_futex_wake(io_uring_sqe* sqe, const io_request& r) noexcept { prep_futex(kOpFutexWake, sqe, r); }

int emulate_futex_wake(io_request& r, emu_try& t) {
  t.in_worker = false;  // the kernel wakes inline
  return futex_wake_all_kinds(static_cast<const std::uint32_t*>(r.addr), static_cast<std::uint32_t>(r.offset),
                              static_cast<std::uint32_t>(r.aux));
}

int futex_wake_all_kinds(const std::uint32_t* word, std::uint32_t count, std::uint32_t mask) noexcept {
  // The kernel's waiters first (plain threads, native rings), then the emulated executors' waits.
  const long n = ::syscall(SYS_futex, word, FUTEX_WAKE_BITSET_PRIVATE, count, nullptr, nullptr, mask);
  if (n < 0) return -errno;
  if (static_cast<std::uint32_t>(n) >= count) return static_cast<int>(n);
  return static_cast<int>(n) + futex_wake_listed(word, count - static_cast<std::uint32_t>(n), mask);
}

int futex_wait_kernel(const std::uint32_t* word, std::uint32_t expected, std::uint32_t mask,
                      const timespec* deadline) noexcept {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline.
  const long rc = ::syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, nullptr, mask);
  return rc < 0 ? -errno : 0;
}

}  // namespace uring::detail

namespace uring {

int futex_wake_now(std::atomic<std::uint32_t>& word, std::uint32_t count, std::uint32_t mask) noexcept {
  return detail::futex_wake_all_kinds(detail::word_address(word), count, mask);
}

int futex_wait_now(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint32_t mask) noexcept {
  int rc;
  do {
    rc = detail::futex_wait_kernel(detail::word_address(word), expected, mask, nullptr);
  } while (rc == -EINTR);
  return rc;
}

}  // namespace uring
