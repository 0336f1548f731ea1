/// @file
/// uring/ticker.hpp — a periodic timer: ticks every period, awaited one next() at a time.
///
/// Provides: uring::ticker.
/// Threads: use it from coroutines of one executor (the one that armed it); a stop request for next() may
/// come from any thread.
///
/// `uring::ticker t(100ms); for (;;) { auto n = co_await t.next(); ... }` — next() yields how many periods
/// have ended since the last next() returned: 1 when the loop keeps up, more when it fell behind (ticks
/// are counted, never queued, so a slow consumer costs no memory). The periods are counted from the first
/// next(), which arms the ticker, and do not drift with the consumer's delays.
///
/// Natively one multishot timeout (IORING_TIMEOUT_MULTISHOT, kernel 6.4) ticks for the ticker's whole life:
/// no SQE per tick. Without it (older kernels, the emulation, URING_DISABLE=multishot) one absolute timeout
/// is armed at the next period's end while a next() waits, and the periods that ended meanwhile are
/// counted from the clock: the same counts, one SQE per awaited tick. executor::plan().multishot_timeout
/// says which.
///
/// A stop (the awaiting task's token, or with_stop_token(next(), token)) ends that wait with ECANCELED; the
/// ticker keeps ticking. cancel() ends the ticker: a waiting next() throws ECANCELED, and the next() after it
/// re-arms, counting from then. Destroying the ticker cancels its request. next() takes no time-out: the
/// period is its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>

#include "uring/detail/state_awaitable.hpp"

namespace uring::detail {
struct ticker_state;  ///< src/time/ticker.cpp
/// For state_awaitable (see uring/detail/state_awaitable.hpp).
bool state_ready(const ticker_state& s) noexcept;
void state_cancel(ticker_state& s, std::uint64_t wait) noexcept;
std::uint64_t state_wait(const ticker_state& s) noexcept;
executor* state_suspend(const std::shared_ptr<ticker_state>& s, std::coroutine_handle<> h,
                        std::int64_t deadline);
std::uint64_t state_resume(ticker_state& s);
template <>
inline constexpr bool state_times_out<ticker_state> = false;
}  // namespace uring::detail

namespace uring {

/// A periodic timer: ticks every period, awaited one next() at a time; the periods are counted from the
/// first next() and do not drift with the consumer's delays. Natively one multishot timeout
/// (IORING_TIMEOUT_MULTISHOT, kernel 6.4) for the ticker's whole life; elsewhere one absolute timeout per
/// awaited tick, with the same counts.
///
/// Threads: use it from coroutines of one executor (the one that armed it); a stop request for next() may
/// come from any thread.
class ticker {
 public:
  /// A ticker of `period` (at least 1 us: std::invalid_argument otherwise), armed by the first next().
  explicit ticker(std::chrono::nanoseconds period);
  ///@{
  /// Moves the ticker and its request.
  ticker(ticker&&) noexcept = default;
  ticker& operator=(ticker&&) noexcept = default;
  ///@}
  /// Cancels the ticker's request.
  ~ticker();

  /// What next() returns: awaited, it yields the number of periods ended.
  using next_awaitable = detail::state_awaitable<detail::ticker_state, std::uint64_t>;

  /// Waits for the end of the current period; yields the periods ended since the last next() returned
  /// (at least 1). Throws std::system_error: ECANCELED once the stop token (the awaiting task's, or
  /// with_stop_token's) is requested or the ticker cancelled; the kernel's error if the timer could not be
  /// armed.
  next_awaitable next() noexcept { return {state_, std::stop_token{}}; }

  /// Ends the ticker (owner thread): a waiting next() throws ECANCELED; the next next() re-arms it,
  /// counting from then. Allocates the fresh state (std::bad_alloc).
  void cancel();

  /// The period the ticker was made with.
  [[nodiscard]] std::chrono::nanoseconds period() const noexcept;

 private:
  std::shared_ptr<detail::ticker_state> state_;
};

}  // namespace uring
