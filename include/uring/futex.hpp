/// @file
/// uring/futex.hpp — futex wait and wake on a 32-bit word of this process: awaited on an executor
/// (IORING_OP_FUTEX_WAIT / IORING_OP_FUTEX_WAKE, kernel 6.7), or called from a plain thread.
///
/// Provides: uring::futex_wait, uring::futex_wake, uring::futex_wait_now, uring::futex_wake_now,
/// uring::futex_match_any.
/// Threads: await futex_wait / futex_wake from a coroutine on an executor; call futex_wait_now /
/// futex_wake_now from any thread (futex_wait_now blocks it).
///
/// As futex(2)'s FUTEX_WAIT_BITSET / FUTEX_WAKE_BITSET on a private futex: a wait completes when a wake on
/// the same word names a bit of its mask, and fails EAGAIN at once when the word does not hold the
/// expected value; a wake returns how many waits it ended. Waits may end without a wake having changed
/// the word (a wake meant for another value, a cancel that lost its race): recheck the word. The word is
/// borrowed: it must outlive the co_await. As every operation: awaiting yields the result or throws
/// std::system_error naming it ("futex_wait: Resource temporarily unavailable"), `.nothrow()` yields an
/// io_result, and with_timeout / with_stop_token cancel a waiting futex_wait (ECANCELED / ETIMEDOUT; a wake
/// that wins the race makes it succeed instead). Natively it needs kernel 6.7 (older: EINVAL).
///
/// The emulation cannot poll a futex: an emulated executor's wait sits in a process-wide list that every
/// wake made through this header reads (futex_wake on any emulated executor, futex_wake_now), besides
/// waking the kernel's waiters. A bare futex(2) wake or a native ring's futex_wake reaches only the
/// kernel's waiters, not an emulated executor's (docs/sync.md).
#pragma once

#include <atomic>
#include <cstdint>

#include "uring/detail/io_awaitable.hpp"

namespace uring {

/// A mask that every wait and every wake shares a bit with (FUTEX_BITSET_MATCH_ANY).
inline constexpr std::uint32_t futex_match_any = 0xffffffffu;

namespace detail {
/// The SQE's fd: FUTEX2_SIZE_U32 | FUTEX2_PRIVATE.
inline constexpr std::int32_t kFutexFlags = 0x02 | 128;
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);
inline const std::uint32_t* word_address(const std::atomic<std::uint32_t>& word) noexcept {
  return reinterpret_cast<const std::uint32_t*>(&word);
}
}  // namespace detail

namespace detail {
/// Both ops' request: the word, the value (wait) or count (wake), the mask.
inline io_request futex_request(op_code code, std::atomic<std::uint32_t>& word, std::uint32_t value,
                                std::uint32_t mask) noexcept {
  return {.code = code,
          .fd = kFutexFlags,
          .offset = value,
          .addr = const_cast<std::uint32_t*>(word_address(word)),
          .aux = mask};
}
}  // namespace detail

/// Waits while `word` holds `expected`, until a wake whose mask shares a bit with `mask`. Yields nothing;
/// EAGAIN when the word held another value.
inline detail::io_awaitable<void> futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                                             std::uint32_t mask = futex_match_any) noexcept {
  return {"futex_wait", detail::futex_request(detail::op_code::futex_wait, word, expected, mask)};
}

/// Wakes at most `count` waits on `word` whose mask shares a bit with `mask`. Yields how many it woke.
inline detail::io_awaitable<std::uint32_t> futex_wake(std::atomic<std::uint32_t>& word,
                                                      std::uint32_t count = 1,
                                                      std::uint32_t mask = futex_match_any) noexcept {
  return {"futex_wake", detail::futex_request(detail::op_code::futex_wake, word, count, mask)};
}

/// futex_wake for any thread, without an executor: wakes the kernel's waiters (plain threads, native
/// rings) and the emulated executors' waits. How many it woke, or -errno.
int futex_wake_now(std::atomic<std::uint32_t>& word, std::uint32_t count = 1,
                   std::uint32_t mask = futex_match_any) noexcept;
/// futex_wait for a plain thread: blocks it while `word` holds `expected`, until a wake (futex_wake on a
/// native ring or an emulated executor, futex_wake_now, or futex(2)). 0, -EAGAIN when the word held another
/// value.
int futex_wait_now(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                   std::uint32_t mask = futex_match_any) noexcept;

}  // namespace uring
