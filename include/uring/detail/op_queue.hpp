// uring/detail/op_queue.hpp — an executor's operations: those awaited this turn, the count the kernel
// holds, the inline path into the ring's SQ, and the in-flight registry.
//
// Provides: detail::op_queue. Threads: the owner thread of the executor that holds it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "uring/detail/live_registry.hpp"
#include "uring/detail/operation.hpp"

namespace uring::detail {

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
  void* sqes = nullptr;          // the kernel's SQE array
  unsigned* sqe_tail = nullptr;  // the next SQE to fill (not yet published to the kernel)
  // The first SQE the kernel has not been shown: those from here to the tail are still ours to change.
  const unsigned* sqe_published = nullptr;
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
    // Listed first, while few values are live: after the SQE is written, the registry's rare call to its
    // back array cost the whole path extra register moves (callgrind). One the SQ then has no room for
    // stays listed, and the list's submit does not list it again.
    enlist(op);
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
    return true;
  }

  // Every user operation from its start to its final completion (executor::inflight), and the turn's
  // clocks its entries are stamped with.
  live_registry live;
  std::uint32_t now_ms = 0;  // CLOCK_MONOTONIC_COARSE in ms, read after each turn's wait
  std::uint32_t now_us = 0;  // CLOCK_MONOTONIC in µs, as each turn starts and after its wait, with
                             // latency histograms; else 0

  [[nodiscard]] bool listed(const operation& op) const noexcept { return live.contains(op); }
  [[gnu::always_inline]] void enlist(operation& op) noexcept {
    static_assert(offsetof(operation, since_us) == offsetof(operation, since_ms) + 4 &&
                  offsetof(op_queue, now_us) == offsetof(op_queue, now_ms) + 4);
    std::memcpy(&op.since_ms, &now_ms, 8);  // both clocks in one store
    op.cancel_sent = false;
    op.reported = false;
    live.add(op);
  }
  [[gnu::always_inline]] void delist(operation& op) noexcept { live.remove(op); }

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
  // The SQ position of the SQE that start_inline wrote last.
  [[nodiscard]] unsigned last_inline_position() const noexcept { return *sqe_tail - 1; }

  // An operation that start_inline wrote at SQ position `at`, stopped before the kernel was shown it:
  // its SQE becomes a NOP tagged kWithdrawnTag, so the operation completes -ECANCELED without having
  // run. False when the kernel may have the SQE already (a later cancel must reach it). The SQE's
  // user_data is checked too, so a position that has since come round again is never taken for it.
  bool withdraw(const operation& op, unsigned at, std::uint64_t tag) noexcept {
    if (sqes == nullptr || at - *sqe_published >= *sqe_tail - *sqe_published) return false;
    std::uint64_t* w = sqe_at(at);
    if (w[4] != reinterpret_cast<std::uint64_t>(&op)) return false;
    w[0] = w[1] = w[2] = w[3] = 0;  // IORING_OP_NOP, no flags, no fd
    w[4] = reinterpret_cast<std::uint64_t>(&op) | tag;
    return true;
  }
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
