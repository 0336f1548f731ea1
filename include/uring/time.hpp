/// @file
/// uring/time.hpp — sleeping on the ring.
///
/// Provides: uring::sleep_for, uring::sleep_until.
/// Threads: await them from a coroutine running on an executor.
///
/// A sleep is an io_uring timeout (IORING_OP_TIMEOUT on CLOCK_MONOTONIC, i.e. std::chrono::steady_clock)
/// or, emulated, a deadline in the executor's timer heap. It completes normally when the time has come and
/// throws std::system_error(ECANCELED) if cancelled through a stop token first. Minimum kernel: 5.4.
#pragma once

#include <chrono>

#include "uring/io.hpp"

namespace uring {

/// Completes once `d` has passed (an io_uring timeout on CLOCK_MONOTONIC; emulated, the executor's timer
/// heap). Throws std::system_error(ECANCELED) if cancelled through a stop token first. Await it from a
/// coroutine running on an executor. Minimum kernel: 5.4.
template <class Rep, class Period>
detail::io_awaitable<void, true, detail::timer_payload> sleep_for(
    std::chrono::duration<Rep, Period> d) noexcept {
  return {"sleep_for", {.code = detail::op_code::timeout}, detail::timer_payload{detail::to_timespec(d)}};
}

/// Completes once std::chrono::steady_clock reaches `t` (an absolute timeout); otherwise as sleep_for.
template <class Duration>
detail::io_awaitable<void, true, detail::timer_payload> sleep_until(
    std::chrono::time_point<std::chrono::steady_clock, Duration> t) noexcept {
  return {"sleep_until",
          {.code = detail::op_code::timeout, .op_flags = detail::kTimeoutAbsolute},
          detail::timer_payload{detail::to_timespec(t.time_since_epoch())}};
}

}  // namespace uring
