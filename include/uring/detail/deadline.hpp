// uring/detail/deadline.hpp — the time limit with_timeout puts on a whole task.
//
// Provides: detail::deadline, detail::deadline_of, detail::wait_stop, detail::awaiting_stop,
// detail::monotonic_ns.
// Threads: a deadline is made and settled by with_timeout's frame; the task's awaitables read it on
// whichever executor they run, and its timer may run on another executor than the frame ends on.
//
// A task awaited through with_timeout(work(), d) carries a pointer to its deadline in its promise and
// passes it on, as it does its stop token, to the tasks it awaits (the earlier deadline wins). What the
// deadline does depends on what waits under it:
// - a single operation gets a linked timeout at the deadline (absolute, IORING_TIMEOUT_ABS): no timer of
//   its own and no allocation; one started after the deadline fails at once. Either way ETIMEDOUT.
// - a stream's next item and a chain wait until the earlier of their own limit and the deadline.
// - a wait on other coroutines (a join handle, a scope's join, sync:: primitives, a name look-up) follows
//   a stop token (wait_stop): the first such wait arms one timer at the deadline, whose firing stops
//   the token those waits follow. with_timeout reports the ECANCELED that causes as ETIMEDOUT.
// The timer is armed on the executor of the first such wait, in a block of its own: a frame that an
// executor's shutdown frees unsettled, while the timer is still in flight on another executor, leaves
// the block to the timer's completion, which frees it.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>

#include "uring/detail/operation.hpp"
#include "uring/detail/remote.hpp"

namespace uring {
class executor;
}

namespace uring::detail {

class deadline final {
 public:
  // A limit at `at_ns` (CLOCK_MONOTONIC) for a task that otherwise follows `outer`.
  deadline(std::int64_t at_ns, std::stop_token outer) noexcept;
  deadline(const deadline&) = delete;
  deadline& operator=(const deadline&) = delete;
  ~deadline();

  [[nodiscard]] std::int64_t at_ns() const noexcept { return at_ns_; }
  // For an operation's linked timeout: the deadline as an absolute time.
  [[nodiscard]] const timespec64* at() const noexcept { return &at_; }
  // The earlier of two deadlines (either may be null: none).
  [[nodiscard]] static deadline* earlier(deadline* a, deadline* b) noexcept {
    if (a == nullptr) return b;
    if (b == nullptr) return a;
    return b->at_ns_ < a->at_ns_ ? b : a;
  }

  // The token the task follows apart from the deadline.
  [[nodiscard]] const std::stop_token& outer() const noexcept { return outer_; }
  // A token stopped when the deadline passes or outer() is stopped, for waits on other coroutines. The
  // first call arms the timer on the running executor.
  std::stop_token token();
  // True once the timer fired: the deadline, not a stop, ended the waits that followed it.
  [[nodiscard]] bool expired() const noexcept { return expired_.load(std::memory_order_acquire); }

  // Awaited by with_timeout's frame once the task has ended: the timer, if armed, is cancelled and its
  // completion waited for, so that the frame never frees it in flight.
  struct settle_awaiter {
    deadline& d;
    bool await_ready() const noexcept { return !d.armed_.load(std::memory_order_acquire); }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return d.settle(h); }
    void await_resume() const noexcept {}
  };
  settle_awaiter settle() noexcept { return {*this}; }

 private:
  struct forward_stop {
    deadline* d;
    void operator()() const noexcept { d->source_.request_stop(); }
  };
  struct timer;  // src/time/deadline.cpp
  static void on_timer(operation* op) noexcept;
  bool settle(std::coroutine_handle<> h) noexcept;
  void wake_settler() noexcept;

  std::int64_t at_ns_;
  timespec64 at_;
  std::stop_token outer_;
  std::stop_source source_{std::nostopstate};  // made by the first token()
  std::optional<std::stop_callback<forward_stop>> forward_;
  timer* timer_ = nullptr;          // made by the first token() that arms it
  executor* timer_home_ = nullptr;  // where the timer runs
  std::atomic<bool> armed_{false};
  std::atomic<bool> expired_{false};
  bool settling_ = false;  // timer_home_'s thread only
  std::coroutine_handle<> settler_;
  executor* settler_home_ = nullptr;
  // Posted to timer_home_ by a settle from another executor: cancels the timer there.
  struct cancel_node : remote_node {
    deadline* d;
  } cancel_node_;
  // Sent to settler_home_ by a timer completing on another executor: resumes the settling frame.
  struct resume_node : remote_node {
    deadline* d;
  } resume_node_;
};

// The deadline a coroutine's awaitables live under (null: none).
template <class Promise>
[[nodiscard]] deadline* deadline_of(Promise& p) noexcept {
  if constexpr (requires { p.deadline(); }) {
    return p.deadline();
  } else {
    return nullptr;
  }
}

// The stop token a wait on other coroutines follows: the awaiting coroutine's and, under a deadline,
// the deadline's too. Where those differ (the wait is in a when_all child, or under a with_stop_token of
// its own), it owns a stop source that either stops.
class wait_stop {
 public:
  template <class Promise>
  void follow(Promise& p) {
    if constexpr (requires { p.stop_token(); }) {
      deadline* d = deadline_of(p);
      if (d == nullptr) [[likely]] {
        token_ = p.stop_token();
      } else {
        follow_both(*d, p.stop_token());
      }
    }
  }
  // A token given explicitly replaces what the coroutine would have had it follow.
  void set(std::stop_token t) noexcept { token_ = std::move(t); }
  [[nodiscard]] bool empty() const noexcept { return !token_.stop_possible(); }
  [[nodiscard]] const std::stop_token& token() const noexcept { return token_; }

 private:
  void follow_both(deadline& d, const std::stop_token& own);
  struct both;
  struct both_deleter {
    void operator()(both* b) const noexcept;
  };
  std::stop_token token_;
  std::unique_ptr<both, both_deleter> both_;
};

// `co_await awaiting_stop{}` inside a task yields, without suspending, the wait_stop its waits follow: for
// an operation that a linked timeout cannot end (a splice blocked in an io-wq worker ignores one; a
// cancel interrupts it), given to it by with_stop_token.
struct awaiting_stop {
  wait_stop stop;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    stop.follow(h.promise());
    return false;
  }
  wait_stop await_resume() noexcept { return std::move(stop); }
};

}  // namespace uring::detail
