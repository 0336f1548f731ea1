// uring/detail/operation.hpp — the completion record every asynchronous operation is built on.
//
// Provides: detail::io_request, detail::operation, detail::op_queue (op_code is in detail/op_code.hpp).
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
  std::uint32_t live_slot = 0;  // its place in the executor's in-flight registry (op_queue::enlist)
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
std::uint32_t coarse_now_ms() noexcept;

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

// Operations awaited during one turn of an executor's loop, in order, plus the count of those the kernel
// holds. Kept inline in the executor so that starting an operation costs no call (start_inline, push).
struct op_queue {
  operation* head = nullptr;
  operation* tail = nullptr;
  std::size_t inflight = 0;  // submitted or pending, completion not yet reaped
  bool closed = false;       // the executor is shutting down: no new operations
  // The op_codes the executor's allowlist refuses (empty: unrestricted). Checked as each user operation
  // is queued (executor_access::submit; the executor's own wake-up read is exempt), so that a refused one
  // costs no SQE and fails the same way on every backend.
  op_set refused;

  // The native ring's submission queue, for start_inline (null sqes: the emulated backend, or a ring
  // that offers no inline path). The backend owns these; only the SQE slots past *sqe_tail are ours.
  void* sqes = nullptr;                // the kernel's SQE array
  unsigned* sqe_tail = nullptr;        // the next SQE to fill (not yet published to the kernel)
  const unsigned* sq_khead = nullptr;  // the kernel's consumer head
  unsigned sq_mask = 0;
  unsigned sq_entries = 0;
  // The SQ is full when the tail reaches this: the kernel's head plus the ring's size, as last read. The
  // head only grows, so a stale limit is a safe one; it is read again only once the tail gets there (one
  // read of kernel-written memory per ring's worth of SQEs, not one per operation).
  unsigned sq_limit = 0;
  // One bit per op_code that start_inline may take now: nop, read and write, less those the allowlist
  // refuses; none while the executor is closed or without an SQ, nor while operations wait in the list
  // (push clears it, take_all restores it). One test instead of five per operation.
  std::uint64_t inline_codes = 0;
  std::uint64_t inline_allowed = 0;  // inline_codes while the list is empty
  std::uint64_t* started = nullptr;  // executor_stats::ops, counted here for inline starts

  // Keeps inline_codes in step with closed, refused and sqes; call after changing any of them.
  void update_inline_codes() noexcept {
    constexpr std::uint64_t kInlinable =
        op_set{}.add(op_code::nop).add(op_code::read).add(op_code::write).low_bits();
    inline_allowed = (closed || sqes == nullptr) ? 0 : kInlinable & ~refused.low_bits();
    inline_codes = head != nullptr ? 0 : inline_allowed;
  }
  void set_closed(bool c) noexcept {
    closed = c;
    update_inline_codes();
  }

  // The hot path, as raw liburing code would do it: a nop, read or write with nothing attached (no
  // linked timeout: the caller guarantees it) is written straight into the ring's SQ while no operation
  // waits in the list (so the kernel still sees them in the order they were awaited). False: the caller
  // queues it on the list instead (executor_access::submit, which also refuses a closed executor).
  [[gnu::always_inline]] bool start_inline(operation& op) noexcept {
    const io_request& r = op.request;
    const auto code = static_cast<unsigned>(r.code);
    if (!((inline_codes >> code) & 1u)) return false;
    unsigned* const tail_at = sqe_tail;
    const unsigned at = *tail_at;
    if (static_cast<int>(sq_limit - at) <= 0) [[unlikely]] {
      if (!refresh_sq_limit(at, 0)) return false;  // SQ full: the list's submit makes room
    }
    encode_simple(sqe_at(at), r, reinterpret_cast<std::uint64_t>(&op));
    *tail_at = at + 1;
    op.state = op_state::submitted;
    ++inflight;
    ++started[code];
    enlist(op);
    return true;
  }

  // The in-flight registry (executor::inflight): every user operation from its start to its final
  // completion, by its slot in an array. A free slot holds the next free one (index << 1 | 1), so that
  // listing and removing an operation take a handful of stores and never move another entry. Slot 0 is
  // never handed out: it marks an operation that is not listed (the executor's own, live_slot 0).
  operation* unlisted_slot = free_link(0);
  operation** live = &unlisted_slot;
  std::uint32_t live_count = 1;  // slots handed out so far, free ones included
  std::uint32_t live_capacity = 1;
  std::uint32_t free_slot = 0;  // the first free slot below live_count, 0 if none
  std::uint32_t now_ms = 0;     // CLOCK_MONOTONIC_COARSE in ms, read once per turn
  std::uint32_t now_us = 0;     // CLOCK_MONOTONIC in µs, read once per turn with latency histograms, else 0

  op_queue() = default;
  op_queue(const op_queue&) = delete;  // `live` may point into it
  op_queue& operator=(const op_queue&) = delete;

  static operation* free_link(std::uint32_t next) noexcept {
    return reinterpret_cast<operation*>(std::uintptr_t{next} << 1 | 1u);
  }
  static bool is_free(const operation* entry) noexcept {
    return (reinterpret_cast<std::uintptr_t>(entry) & 1u) != 0;
  }
  [[nodiscard]] bool listed(const operation& op) const noexcept {
    return op.live_slot < live_count && live[op.live_slot] == &op;
  }
  [[gnu::always_inline]] void enlist(operation& op) noexcept {
    std::uint32_t at = free_slot;
    if (at != 0) [[likely]] {
      free_slot = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(live[at]) >> 1);
    } else {
      if (live_count == live_capacity && !grow_live()) [[unlikely]] {
        op.live_slot = 0;  // out of memory: the operation runs unlisted
        return;
      }
      at = live_count++;
    }
    op.live_slot = at;
    static_assert(offsetof(operation, since_us) == offsetof(operation, since_ms) + 4 &&
                  offsetof(op_queue, now_us) == offsetof(op_queue, now_ms) + 4);
    std::memcpy(&op.since_ms, &now_ms, 8);  // both clocks in one store
    op.cancel_sent = false;
    op.reported = false;
    live[at] = &op;
  }
  // An operation not found at its slot (not listed, or its registry was reset at shutdown) is left alone,
  // so a stale slot never frees a slot twice.
  [[gnu::always_inline]] void delist(operation& op) noexcept {
    const std::uint32_t at = op.live_slot;
    if (live[at] != &op) [[unlikely]]
      return;
    live[at] = free_link(free_slot);
    free_slot = at;
  }
  // Doubles the array (src/executor/inflight.cpp); false if memory ran out.
  bool grow_live() noexcept;
  // The shutdown: what is still listed may sit in a frame freed next.
  void reset_live() noexcept;
  void free_live() noexcept;  // the executor's destructor

  // The one encoding of a nop, read or write SQE (sqe_image's layout, into the eight words at `w`): the
  // inline path, the native backend's list and its full preparation all write these SQEs through it.
  static void encode_simple(std::uint64_t* w, const io_request& r, std::uint64_t user_data) noexcept {
    // The SQE's opcode and flags bytes, by the request's code and direct bytes read as one word (code |
    // direct << 8): the kernel's NOP (0), READ (22) or WRITE (23), and IOSQE_FIXED_FILE (1) for a direct
    // descriptor. One instruction more per operation than the opcode alone (callgrind).
    static constexpr auto kSqeHead = [] {
      std::array<std::uint16_t, 0x103> t{};
      for (unsigned direct = 0; direct < 2; ++direct) {
        t[direct << 8 | 0] = static_cast<std::uint16_t>(direct << 8 | 0);
        t[direct << 8 | 1] = static_cast<std::uint16_t>(direct << 8 | 22);
        t[direct << 8 | 2] = static_cast<std::uint16_t>(direct << 8 | 23);
      }
      return t;
    }();
    static_assert(offsetof(io_request, direct) == offsetof(io_request, code) + 1 && sizeof(bool) == 1);
    std::uint16_t code_and_direct;
    std::memcpy(&code_and_direct, &r.code, sizeof code_and_direct);
    // Eight 8-byte stores (sqe_image's layout, flags/ioprio/rw_flags zero), not one per field. The request
    // was stored a moment ago, field by field, and sits in the store buffer: one 16-byte load of offset
    // and addr together (what the compiler would merge them into) straddles two of those stores and
    // stalls until they retire (store-forwarding failure, measured ~1/3 of this function's time).
    // Single relaxed atomic loads are not merged. (code and direct are stored together, as one word.)
    w[0] = kSqeHead[code_and_direct] | std::uint64_t{static_cast<std::uint32_t>(r.fd)} << 32;
    w[1] = __atomic_load_n(&r.offset, __ATOMIC_RELAXED);
    w[2] = reinterpret_cast<std::uint64_t>(__atomic_load_n(&r.addr, __ATOMIC_RELAXED));
    w[3] = r.len;
    w[4] = user_data;
    w[5] = w[6] = w[7] = 0;
  }

  // The next free SQE of the native ring, as eight words to fill (sqe_image's layout), or null when the
  // SQ is full. Requires sqes. commit_sqe() hands it to the next enter.
  // With `most` (at most sq_entries), also null once `most` SQEs wait for the kernel.
  std::uint64_t* claim_sqe() noexcept { return claim_sqe(sq_entries); }
  std::uint64_t* claim_sqe(unsigned most) noexcept {
    const unsigned at = *sqe_tail;
    const int spare = static_cast<int>(sq_entries - most);  // room that must stay free
    if (static_cast<int>(sq_limit - at) <= spare) [[unlikely]] {
      if (!refresh_sq_limit(at, spare)) return nullptr;
    }
    return sqe_at(at);
  }
  // The SQE that SQ position `at` uses, as eight words.
  std::uint64_t* sqe_at(unsigned at) const noexcept {
    return static_cast<std::uint64_t*>(sqes) + std::size_t{at & sq_mask} * 8;
  }
  void commit_sqe() noexcept { ++*sqe_tail; }
  // Reads the kernel's head again: true if more than `spare` SQEs are free past `at`.
  bool refresh_sq_limit(unsigned at, int spare) noexcept {
    sq_limit = __atomic_load_n(sq_khead, __ATOMIC_ACQUIRE) + sq_entries;
    return static_cast<int>(sq_limit - at) > spare;
  }

  void push(operation& op) noexcept {
    op.next = nullptr;
    op.state = op_state::queued;
    if (tail != nullptr) {
      tail->next = &op;
    } else {
      head = &op;
    }
    tail = &op;
    ++inflight;
    inline_codes = 0;  // what is awaited later must not overtake it
  }
  operation* take_all() noexcept {
    operation* first = head;
    head = tail = nullptr;
    inline_codes = inline_allowed;
    return first;
  }
};

}  // namespace uring::detail
