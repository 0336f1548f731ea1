// uring/detail/state_awaitable.hpp — what the awaitables of long-lived requests share: a state kept by
// shared_ptr (the request in flight may outlive the object that armed it), and a stop token that cancels
// the request on its executor.
//
// Provides: detail::cancel_on_stop, detail::state_awaitable.
// Threads: await from a coroutine on the state's executor; a stop request may come from any thread.
//
// Used by accept_stream::next (a multishot accept). The
// State may be incomplete where the awaitable is used: what it does is reached through free functions
// declared with it (listed at state_awaitable).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <utility>

#include "uring/detail/deadline.hpp"
#include "uring/executor.hpp"
#include "uring/result.hpp"

namespace uring::detail {

// Whether a State's waits take a deadline (uring::with_timeout); a State whose waits do not says false.
template <class State>
inline constexpr bool state_times_out = true;

// The stop callback: cancels at once on the owner thread, else posts the cancel there. It holds the state
// weakly: by the time a posted cancel runs, the state may be gone. It names the wait it was armed for: a
// posted cancel that arrives after that wait was served must not cancel a later one.
template <class State>
struct cancel_on_stop {
  std::weak_ptr<State> state;
  executor* owner;
  std::uint64_t wait;
  void operator()() const noexcept {
    if (running_executor() == owner) {
      if (auto s = state.lock()) state_cancel(*s, wait);
      return;
    }
    try {
      owner->post([w = state, id = wait] {
        if (auto s = w.lock()) state_cancel(*s, id);
      });
    } catch (...) {
      // The executor no longer takes work: it is shutting down, which ends the request anyway.
    }
  }
};

// The awaitable: yields Result. Each State provides five functions found by overload (declared with the
// State, defined where it is complete):
//   void state_cancel(State&, std::uint64_t wait) noexcept;  owner thread: if `wait` is still waiting,
//       ends the request and that waiter fails with ECANCELED; else nothing
//   std::uint64_t state_wait(const State&) noexcept;  the current wait's number (state_suspend starts one)
//   bool state_ready(const State&) noexcept;  a result is there: no need to suspend
//   executor* state_suspend(const std::shared_ptr<State>&, std::coroutine_handle<>, std::int64_t deadline);
//       arms the request if needed and makes the handle its waiter, until `deadline` (CLOCK_MONOTONIC ns,
//       0: none; a State without timeouts ignores it); the executor it waits on, or null if the result
//       is there after all (nothing waits)
//   Result state_resume(State&);  takes the result, or throws the error
// Movable until it is awaited (g++ may move it into the coroutine frame).
template <class State, class Result>
class [[nodiscard]] state_awaitable {
 public:
  state_awaitable(std::shared_ptr<State> s, std::stop_token t) noexcept
      : state_(std::move(s)), token_(std::move(t)) {}
  state_awaitable(state_awaitable&& o) noexcept
      : state_(std::move(o.state_)), timeout_ns_(o.timeout_ns_), token_(std::move(o.token_)) {}
  state_awaitable& operator=(state_awaitable&&) = delete;

  bool await_ready() const noexcept { return state_ready(*state_); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    if constexpr (requires { h.promise().stop_token(); }) {
      if (!token_.stop_possible()) {  // none of its own: the task's
        if constexpr (state_times_out<State>) {
          token_ = h.promise().stop_token();
        } else {
          // A wait that takes no time limit ends at the task's deadline through a stop token.
          follow_.follow(h.promise());
          token_ = follow_.token();
        }
      }
    }
    std::int64_t until = timeout_ns_ < 0 ? 0 : monotonic_ns() + timeout_ns_;
    if (const deadline* limit = deadline_of(h.promise()); limit != nullptr && state_times_out<State>) {
      if (until == 0 || limit->at_ns() < until) until = limit->at_ns();  // the task's deadline is sooner
    }
    executor* ex = state_suspend(state_, h, until);
    if (ex == nullptr) return false;
    // From now on a stop cancels the request (perhaps at once).
    if (token_.stop_possible())
      callback_.emplace(token_, cancel_on_stop<State>{state_, ex, state_wait(*state_)});
    return true;
  }

  Result await_resume() {
    callback_.reset();  // waits for a callback running on another thread
    return state_resume(*state_);
  }

  // with_timeout: the wait fails with ETIMEDOUT once `t` has passed (where the State supports it).
  void set_timeout(std::chrono::nanoseconds t) noexcept { timeout_ns_ = t.count() < 0 ? 0 : t.count(); }
  // The same wait, yielding uring::result<Result> instead of throwing (not after it was awaited).
  nothrow_adapter<state_awaitable> nothrow() && noexcept {
    return nothrow_adapter<state_awaitable>(std::move(*this));
  }
  // with_stop_token: `t` in place of the awaiting coroutine's token.
  void set_stop_token(std::stop_token t) noexcept { token_ = std::move(t); }

 private:
  std::shared_ptr<State> state_;
  std::int64_t timeout_ns_ = -1;  // -1: none
  std::stop_token token_;
  wait_stop follow_;  // for a State without time limits: the task's token and its deadline's
  std::optional<std::stop_callback<cancel_on_stop<State>>> callback_;
};

}  // namespace uring::detail

namespace uring {

// A stream's next item (an accept stream's, a ticker's), cancelled (ECANCELED) when `token` is stopped,
// from any thread, in place of the awaiting coroutine's token.
template <class State, class Result>
detail::state_awaitable<State, Result> with_stop_token(detail::state_awaitable<State, Result> op,
                                                       std::stop_token token) noexcept {
  op.set_stop_token(std::move(token));
  return op;
}

}  // namespace uring
