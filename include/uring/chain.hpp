/// @file
/// uring/chain.hpp — operations that run one after another, started as one: a write, then its fsync.
///
/// Provides: uring::chain, uring::hard_chain, and with_timeout / with_stop_token for them.
/// Threads: await from a coroutine running on an executor; a stop may come from any thread.
///
/// `co_await chain(write(fd, buf, 0), fsync(fd))` runs each step only once the one before it has
/// succeeded. Natively the steps are linked SQEs (IOSQE_IO_LINK) handed to the kernel in one submit; the
/// emulation starts each step when the one before it completes. Either way a step "fails the chain" as the
/// kernel judges it: a negative result, or a read or write (read, write, readv, writev, their fixed-buffer
/// forms, and recv or send with MSG_WAITALL) that moved fewer bytes than asked. The steps after a failed one
/// are not run and complete with ECANCELED. hard_chain(...) runs every step whatever the ones before it did
/// (IOSQE_IO_HARDLINK).
///
/// The result is every step's: `.nothrow()` yields std::array<io_result, N>; the throwing form yields
/// std::array<std::int32_t, N> and throws std::system_error for the first step that failed, naming it
/// ("chain step 2 of 2 (fsync): Input/output error"; a step cancelled after a short one says so).
///
/// A stop (with_stop_token, or the awaiting task's) cancels the steps still to run (ECANCELED);
/// with_timeout(chain(...), d) does so when `d` passes first, and those steps then say ETIMEDOUT. A hard
/// chain's steps that the kernel has not started yet cannot be cancelled there: each is cancelled as it
/// starts, so one that completes at once may still complete.
///
/// Limits: 1 to 16 steps; each step is a single operation of the library (read, write, fsync, send, ...)
/// without a time-out or stop token of its own (the chain's apply to all of them); a step's own result
/// shape (a payload such as a statx) is not kept, only its io_result.
#pragma once

#include <array>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>

#include "uring/detail/io_awaitable.hpp"
#include "uring/error.hpp"
#include "uring/io.hpp"

namespace uring {
namespace detail {

struct chain_base;

/// One step as the executor sees it: the step's request, bound to the payload the chain keeps.
struct chain_node : operation {
  chain_base* owner = nullptr;
  const char* name = nullptr;
};

/// Reads a step's request out of its awaitable (a friend of io_awaitable).
struct chain_access {
  template <class Result, bool Throw, class Payload>
  static void bind(io_awaitable<Result, Throw, Payload>& step, chain_node& node) noexcept {
    static_assert(!is_linked<Payload>, "a chain's step cannot carry its own time-out: time the whole chain");
    step.payload_.bind(step.request);  // the chain no longer moves: the pointers stay good
    node.request = step.request;
    node.label = step.label;
    node.name = step.name_;
  }
};

/// Everything that does not depend on the steps' types (src/ops/chain.cpp).
struct chain_base {
  chain_node* nodes = nullptr;
  std::uint8_t count = 0;
  std::uint8_t link = kLinkNext;  ///< or kLinkHard
  bool timed = false;             ///< with_timeout: `limit` bounds the whole chain
  timespec64 limit;
  /// The task's deadline bounds the chain where it comes before `limit`.
  void bound_by(const deadline& d) noexcept;
  std::stop_token token;  ///< with_stop_token's; else the awaiting coroutine's

  /// Starts the steps; false if the chain ended at once (a stop already requested, or a step the
  /// allowlist refuses: then no step runs). Throws std::logic_error off an executor, or one that closes.
  bool start(executor& ex, std::coroutine_handle<> waiter, const std::stop_token& inherited);
  /// After the resume: frees the stop callback.
  void end() noexcept;
  /// Step i's result as the chain reports it (a step cancelled by the time-out says ETIMEDOUT).
  [[nodiscard]] std::int32_t result(unsigned i) const noexcept;
  /// Throws for the first step that failed, if any.
  void throw_if_failed() const;

 private:
  static void on_step(operation* op) noexcept;
  static void on_timer(operation* op) noexcept;
  static void cancel_chain(operation* first, executor& ex) noexcept;
  void start_run(unsigned first);
  void step_done(unsigned i) noexcept;
  void cancel_steps() noexcept;
  void resume_if_done() noexcept;

  executor* ex_ = nullptr;
  std::coroutine_handle<> waiter_;
  chain_node timer_;
  op_canceller* canceller_ = nullptr;
  unsigned pending_ = 0;
  bool linked_ = false;     ///< the ring links steps (else: one step at a time)
  unsigned run_end_ = 0;    ///< the last step of the run in flight: the kernel links up to it
  bool stopping_ = false;   ///< a stop or the time-out: no more steps
  bool timed_out_ = false;  ///< the time-out passed first
};

template <bool Throw, class... Steps>
class [[nodiscard]] chain_awaitable : chain_base {
  static constexpr std::size_t N = sizeof...(Steps);
  static_assert(N >= 1 && N <= 16, "a chain has 1 to 16 steps");

 public:
  chain_awaitable(std::uint8_t kind, Steps&&... steps) : steps_(std::move(steps)...) {
    link = kind;
    count = static_cast<std::uint8_t>(N);
  }
  chain_awaitable(chain_awaitable&&) noexcept = default;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    std::stop_token inherited;
    if constexpr (has_stop_token<Promise>) inherited = h.promise().stop_token();
    if (const deadline* d = deadline_of(h.promise())) [[unlikely]]
      bound_by(*d);
    nodes = nodes_.data();
    std::apply([n = nodes](auto&... s) { bind_all(n, std::index_sequence_for<Steps...>{}, s...); }, steps_);
    return start(executor_access::current("chain"), h, inherited);
  }
  auto await_resume() {
    end();
    if constexpr (Throw) {
      throw_if_failed();
      std::array<std::int32_t, N> out{};
      for (unsigned i = 0; i < N; ++i) out[i] = result(i);
      return out;
    } else {
      std::array<io_result, N> out{};
      for (unsigned i = 0; i < N; ++i) out[i] = io_result{result(i)};
      return out;
    }
  }

  /// The same chain, yielding every step's io_result instead of throwing.
  chain_awaitable<false, Steps...> nothrow() && noexcept requires Throw {
    return chain_awaitable<false, Steps...>(std::move(*this));
  }
  /// The whole chain bounded by `d` (see with_timeout).
  chain_awaitable within(timespec64 d) && noexcept {
    timed = true;
    limit = d;
    return std::move(*this);
  }
  chain_awaitable stopped_by(std::stop_token t) && noexcept {
    token = std::move(t);
    return std::move(*this);
  }

 private:
  template <bool, class...>
  friend class chain_awaitable;
  template <bool OtherThrow>
  explicit chain_awaitable(chain_awaitable<OtherThrow, Steps...>&& o) noexcept
      : chain_base(static_cast<chain_base&&>(o)), steps_(std::move(o.steps_)) {}

  template <std::size_t... I>
  static void bind_all(chain_node* n, std::index_sequence<I...>, auto&... s) noexcept {
    (chain_access::bind(s, n[I]), ...);
  }

  std::tuple<Steps...> steps_;
  std::array<chain_node, N> nodes_{};
};

}  // namespace detail

/// Runs `steps` one after another, each only if the one before it succeeded (see the top of this file).
template <class... Steps>
requires(!std::is_reference_v<Steps> && ...) detail::chain_awaitable<true, Steps...> chain(Steps&&... steps) {
  return {detail::kLinkNext, std::move(steps)...};
}

/// Runs `steps` one after another, each whatever the ones before it did.
template <class... Steps>
requires(!std::is_reference_v<Steps> &&
         ...) detail::chain_awaitable<true, Steps...> hard_chain(Steps&&... steps) {
  return {detail::kLinkHard, std::move(steps)...};
}

/// The chain, its unfinished steps cancelled when `d` passes first: they then say ETIMEDOUT, and the
/// throwing form throws it. One timer for the whole chain, not one per step.
template <bool Throw, class... Steps, class Rep, class Period>
detail::chain_awaitable<Throw, Steps...> with_timeout(detail::chain_awaitable<Throw, Steps...> c,
                                                      std::chrono::duration<Rep, Period> d) noexcept {
  return std::move(c).within(detail::to_timespec(d));
}

/// The chain, its unfinished steps cancelled (ECANCELED) when `token` is stopped, from any thread.
template <bool Throw, class... Steps>
detail::chain_awaitable<Throw, Steps...> with_stop_token(detail::chain_awaitable<Throw, Steps...> c,
                                                         std::stop_token token) noexcept {
  return std::move(c).stopped_by(std::move(token));
}

}  // namespace uring
