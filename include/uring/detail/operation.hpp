// uring/detail/operation.hpp — the completion record every asynchronous operation is built on.
//
// Provides: detail::io_request, detail::operation, detail::sqe_image (op_code is in detail/op_code.hpp;
// the executor's queue of them is detail/op_queue.hpp).
// Threads: an operation belongs to the executor it was submitted to and is touched only on that thread.
//
// An operation describes *what* to do in a backend-neutral io_request (so public headers need no liburing,
// and the emulated backend can interpret the same description), and *how to finish* through one function
// pointer. The backend uses the operation's address as the CQE's user_data, so the record must stay put
// from submission until its completion has been delivered: awaitables keep it in the coroutine frame.
#pragma once

#include <time.h>

#include <array>
#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "uring/detail/op_code.hpp"

namespace uring::detail {

// As an offset: the fd's own position (pipes and sockets have none).
inline constexpr std::uint64_t kCurrentPosition = ~std::uint64_t{0};
// As recv_multishot's aux: one chunk, not multishot.
inline constexpr std::uint64_t kOneChunk = 1;
// As recv_multishot's aux: one bundled recv (several consecutive buffers), at most `offset` bytes.
inline constexpr std::uint64_t kBundle = 2;
// Or'd into kOneChunk or kBundle: the socket is probably empty (the last receive took less than it had
// room for), so the recv waits for readiness before it tries (IORING_RECVSEND_POLL_FIRST): a try that
// would fail costs more than the poll.
inline constexpr std::uint64_t kPollFirst = 4;

// A completion flag (the kernel's IORING_CQE_F_MORE): a multishot operation will complete again. Only the
// completion without it is final.
inline constexpr std::uint32_t kCqeMore = 1u << 1;
// Completion flags of an operation that picked a provided buffer (IORING_CQE_F_BUFFER): which one it
// filled is in the flags' top 16 bits (IORING_CQE_BUFFER_SHIFT).
inline constexpr std::uint32_t kCqeBuffer = 1u << 0;
inline constexpr unsigned kCqeBufferShift = 16;
// A completion flag of a buffer ring consumed incrementally (IORING_CQE_F_BUF_MORE, 6.12): the kernel keeps
// the buffer and its next completion from it continues where this one's bytes ended.
inline constexpr std::uint32_t kCqeBufMore = 1u << 4;
// A zero-copy send's notification (IORING_CQE_F_NOTIF): the kernel is done with the buffer.
inline constexpr std::uint32_t kCqeNotif = 1u << 3;

inline constexpr std::uint8_t kLinkNext = 1;
inline constexpr std::uint8_t kLinkHard = 2;

inline constexpr std::uint32_t kTimeoutAbsolute = 1;  // timeout: addr is a CLOCK_MONOTONIC deadline
inline constexpr std::uint32_t kTimeoutRepeat = 2;    // timeout: every period until cancelled (natively only)

// Seconds and nanoseconds, laid out as the kernel's __kernel_timespec.
struct timespec64 {
  std::int64_t tv_sec = 0;
  std::int64_t tv_nsec = 0;
};
// Nanoseconds (non-negative) as a timespec64, and back.
constexpr timespec64 timespec_of_ns(std::int64_t ns) noexcept {
  return {ns / 1'000'000'000, ns % 1'000'000'000};
}
constexpr std::int64_t ns_of(const timespec64& t) noexcept { return t.tv_sec * 1'000'000'000 + t.tv_nsec; }
// CLOCK_MONOTONIC (std::chrono::steady_clock, and the kernel's timeouts) in nanoseconds.
inline std::int64_t monotonic_ns() noexcept {
  ::timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct io_request {
  op_code code = op_code::nop;
  // fd is a slot of the executor's table of direct descriptors (uring/direct.hpp), not a plain fd
  // (IOSQE_FIXED_FILE, which is 1: start_inline writes this byte as the SQE's flags; for close, the slot
  // to empty).
  bool direct = false;
  // A step of a chain (uring/chain.hpp) on a ring that links them: kLinkNext or kLinkHard ties the next
  // operation in the list to this one (IOSQE_IO_LINK, IOSQE_IO_HARDLINK). The chain's first step also
  // says how many SQEs the whole chain takes, so that one submit carries all of them.
  std::uint8_t link = 0;
  std::uint8_t chain_sqes = 0;
  std::int32_t fd = -1;
  std::uint32_t len = 0;
  std::uint32_t op_flags = 0;
  std::uint64_t offset = 0;
  void* addr = nullptr;
  std::uint64_t aux = 0;
  // When set, the operation is cancelled (completes -ECANCELED) if this time passes first: a linked
  // timeout. Relative, or absolute (CLOCK_MONOTONIC) when made by as_absolute. Read only at submission.
  const timespec64* link_timeout = nullptr;
};

// A linked timeout's time taken as an absolute CLOCK_MONOTONIC time (IORING_TIMEOUT_ABS): the pointer's
// lowest bit, always clear in a timespec64's address, says so.
inline const timespec64* as_absolute(const timespec64* t) noexcept {
  return reinterpret_cast<const timespec64*>(reinterpret_cast<std::uintptr_t>(t) | 1);
}
struct link_time {
  const timespec64* time;
  bool absolute;
};
inline link_time link_time_of(const io_request& r) noexcept {
  const auto bits = reinterpret_cast<std::uintptr_t>(r.link_timeout);
  return {reinterpret_cast<const timespec64*>(bits & ~std::uintptr_t{1}), (bits & 1) != 0};
}

// Where an operation is in its life, so that a cancel knows whether the kernel has it yet. The last two
// never reach the kernel: the backend completes them at the turn's end with early_result(state).
enum class op_state : std::uint8_t {
  idle,
  queued,
  submitted,
  cancelled_early,  // cancelled before its turn's submit: completes -ECANCELED
  refused,          // not in the executor's op allowlist: completes -EACCES
};

[[nodiscard]] constexpr bool completes_early(op_state s) noexcept { return s >= op_state::cancelled_early; }
[[nodiscard]] constexpr std::int32_t early_result(op_state s) noexcept {
  return s == op_state::refused ? -EACCES : -ECANCELED;
}

struct operation {
  // Called on the owner thread once the operation's completion is reaped, after `res` and `cqe_flags`
  // are stored. Null for the common case, which is to resume `waiter` (one indirect jump, not two).
  using complete_fn = void (*)(operation* self) noexcept;

  complete_fn complete = nullptr;
  std::coroutine_handle<> waiter;
  operation* next = nullptr;  // the executor's list of operations awaiting the turn's enter
  std::int32_t res = 0;       // byte count or other non-negative result, or -errno
  std::uint32_t cqe_flags = 0;
  op_state state = op_state::idle;
  // A multishot operation: `complete` (never null for one) sees every completion, also those reaped
  // while the executor shuts down, because the operation may own what each one delivers (an accepted fd)
  // and may outlive its owner (it then frees itself on the final one). It must not resume coroutines
  // inline: it schedules them.
  bool multishot = false;
  bool cancel_sent = false;     // a cancel was asked for (executor::inflight shows it)
  bool reported = false;        // the stuck-operation watchdog has reported it
  std::uint32_t live_slot = 0;  // its slot in the in-flight registry's back array (live_registry), else 0
  io_request request;
  std::uint32_t since_ms = 0;   // the turn's coarse clock when it started (op_queue::now_ms): its age
  std::uint32_t since_us = 0;   // the turn's fine clock then, with latency histograms (op_queue::now_us)
  const char* label = nullptr;  // the user's tag (io_awaitable::tag), shown by executor::inflight

  // res and cqe_flags, given as the CQE lays them out: one 8-byte word, stored in one go.
  void store_result(std::uint64_t res_and_flags) noexcept {
    static_assert(offsetof(operation, cqe_flags) == offsetof(operation, res) + 4);
    std::memcpy(&res, &res_and_flags, sizeof res_and_flags);
  }
  void finish(std::uint64_t res_and_flags) noexcept {
    store_result(res_and_flags);
    state = op_state::idle;  // from here on a cancel must not reach the kernel: the address may be reused
    if (complete != nullptr) {
      complete(this);
    } else {
      waiter.resume();
    }
  }
};

// The coarse monotonic clock (CLOCK_MONOTONIC_COARSE) in milliseconds, wrapping: op_queue::now_ms.
inline std::uint32_t coarse_now_ms() noexcept {
  ::timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(ts.tv_sec) * 1000 +
                                    static_cast<std::uint64_t>(ts.tv_nsec) / 1'000'000);
}

// Debug builds: prints which operation was freed while in flight, then aborts.
[[noreturn]] void in_flight_operation_destroyed(const char* name) noexcept;

// The kernel's 64-byte SQE (struct io_uring_sqe) as a nop, read or write uses it, so that public
// headers need no liburing; native_backend.cpp checks the layout against liburing's.
struct sqe_image {
  std::uint8_t opcode;
  std::uint8_t flags = 0;
  std::uint16_t ioprio = 0;
  std::int32_t fd;
  std::uint64_t off;
  std::uint64_t addr;
  std::uint32_t len;
  std::uint32_t rw_flags = 0;
  std::uint64_t user_data;
  std::uint64_t tail[3] = {};  // buf_index, personality, splice_fd_in, addr3, pad: all zero
};
static_assert(sizeof(sqe_image) == 64);
// start_inline writes it as eight little-endian words: {opcode, flags, ioprio, fd}, off, addr,
// {len, rw_flags}, user_data, and the zero tail.
static_assert(offsetof(sqe_image, fd) == 4 && offsetof(sqe_image, off) == 8 &&
              offsetof(sqe_image, addr) == 16 && offsetof(sqe_image, len) == 24 &&
              offsetof(sqe_image, user_data) == 32);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);

}  // namespace uring::detail
