// ops/futex_calls.hpp — the futex calls the library makes as plain syscalls (ops/futex_ops.cpp): the
// emulated wake, futex_wake_now and the waits of plain threads in uring/sync/.
//
// Provides: detail::futex_wake_all_kinds, detail::futex_wait_kernel.
// Threads: any.
#pragma once

#include <time.h>

#include <cstdint>

namespace uring::detail {

// Wakes at most `count` waits on `word` matching `mask`: the kernel's first, then the emulated executors'
// (backend/emulated/futex_registry.hpp). How many, or -errno.
int futex_wake_all_kinds(const std::uint32_t* word, std::uint32_t count, std::uint32_t mask) noexcept;
// One FUTEX_WAIT_BITSET_PRIVATE on `word`, until `deadline` (absolute, CLOCK_MONOTONIC; null: none).
// 0 (woken, perhaps spuriously), -EAGAIN, -ETIMEDOUT or -EINTR.
int futex_wait_kernel(const std::uint32_t* word, std::uint32_t expected, std::uint32_t mask,
                      const timespec* deadline) noexcept;

}  // namespace uring::detail
