/// @file
/// uring/net/leased_recv.hpp — the awaitable behind tcp_stream::recv(pool), and the per-stream state it
/// keeps.
///
/// Provides: uring::net::basic_recv_awaitable (recv_awaitable, and its .nothrow() form yielding
/// uring::net::recv_result), uring::net::leased_receiver, and the overloads uring::with_timeout and
/// uring::with_stop_token for it.
/// Threads: await from a coroutine on the pool's executor; a stop request may come from any thread.
///
/// A stream that receives with a pool keeps a small state between calls (leased_receiver): the recv it
/// armed, and chunks received before they were asked for (up to the pool's max_per_stream). The state may
/// outlive the stream: a request the kernel still holds keeps it, and it frees itself (returning any
/// buffers) with the request's final completion. See uring/net/buffer_pool.hpp for the semantics.
///
/// Like every single operation of the library, a leased receive throws std::system_error("recv: ...") or,
/// with .nothrow(), yields the error; it takes a stop token (with_stop_token, else the awaiting task's)
/// and a timeout (with_timeout). A stop fails it with ECANCELED, a timeout with ETIMEDOUT, and either one
/// takes no bytes: the receive request ends (the next receive re-arms it) and whatever arrived meanwhile
/// waits in the stream for the next receive, so nothing is lost or repeated. A chunk that is there when the
/// stop or the time comes wins: the receive yields it. The timeout is not a linked timeout (the recv
/// armed ahead outlives any one receive): the state keeps one timer, armed at the earliest deadline of a
/// waiting receive and not cancelled when a receive ends early, so a timed receive that finds data costs
/// nothing extra; the timer re-arms itself when it fires for a deadline that has since moved. Likewise the
/// state watches the stop token of its waits with one registration for as long as they use the same one
/// (a connection's receives under its task's token register it once, not once a wait).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <utility>

#include "uring/detail/deadline.hpp"
#include "uring/executor.hpp"
#include "uring/net/buffer_pool.hpp"

namespace uring::detail {
struct recv_state;  ///< src/net/leased_recv.cpp
}  // namespace uring::detail

namespace uring::net {

/// What `co_await stream.recv(pool).nothrow()` yields: the chunk, or why there is none.
struct recv_result {
  leased_buffer buffer;  ///< the chunk received; empty at end of stream and on an error
  std::int32_t res = 0;  ///< buffer.size(), 0 at end of stream, or -errno (-ECANCELED, -ETIMEDOUT, ...)

  ///@{
  /// True on success; the failure as std::error_code (-res in std::system_category) otherwise.
  [[nodiscard]] bool ok() const noexcept { return res >= 0; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] std::error_code error() const noexcept {
    return res < 0 ? std::error_code(-res, std::system_category()) : std::error_code();
  }
  ///@}
};

}  // namespace uring::net

namespace uring::detail {

/// Out of line (src/net/leased_recv.cpp), so that the state stays incomplete here.
bool recv_ready(const recv_state& s) noexcept;
/// Arms the receive if needed (and the timer, if `deadline_ns`, a CLOCK_MONOTONIC time, is not 0), makes
/// `h` its waiter, and ends the wait with ECANCELED when `stop` is stopped (at once if it is already). The
/// state watches the token for as long as its waits use it: one registration serves them all. Returns
/// false if the result is there after all (nothing waits).
bool recv_suspend(const std::shared_ptr<recv_state>& s, std::coroutine_handle<> h, std::int64_t deadline_ns,
                  const std::stop_token& stop);
net::leased_buffer recv_resume(recv_state& s);  ///< throws the error
net::recv_result recv_resume_nothrow(recv_state& s) noexcept;
std::int64_t monotonic_ns() noexcept;

}  // namespace uring::detail

namespace uring::net {

/// What `co_await stream.recv(pool)` awaits: yields a leased_buffer (empty at end of stream); throws
/// std::system_error("recv: ...") for an error, ECANCELED when its stop token (default: the awaiting
/// task's) is requested, ETIMEDOUT when its timeout (with_timeout) passes first. `.nothrow()` yields a
/// recv_result instead. Movable until it is awaited.
template <bool Throw = true>
class [[nodiscard]] basic_recv_awaitable {
 public:
  ///@{
  /// For tcp_stream::recv: the receive of stream state `s`, with stop token `t` (none: the awaiting task's).
  /// Movable until it is awaited.
  basic_recv_awaitable(std::shared_ptr<detail::recv_state> s, std::stop_token t) noexcept
      : state_(std::move(s)), token_(std::move(t)) {}
  basic_recv_awaitable(basic_recv_awaitable&& o) noexcept
      : state_(std::move(o.state_)), token_(std::move(o.token_)), timeout_(o.timeout_) {}
  ///@}
  basic_recv_awaitable& operator=(basic_recv_awaitable&&) = delete;

  ///@{
  /// The awaiter protocol, called by `co_await`.
  bool await_ready() const noexcept { return detail::recv_ready(*state_); }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    std::int64_t until = 0;
    if (timeout_) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*timeout_).count();
      until = detail::monotonic_ns() + (ns > 0 ? ns : 0);
      if (until == 0) until = 1;  // 0 means none
    }
    if (const detail::deadline* limit = detail::deadline_of(h.promise()); limit != nullptr) {
      if (until == 0 || limit->at_ns() < until) until = limit->at_ns();  // the task's deadline is sooner
    }
    if constexpr (requires { h.promise().stop_token(); }) {
      if (!token_.stop_possible()) {  // none of its own: the task's, not copied
        decltype(auto) task_token = h.promise().stop_token();
        return detail::recv_suspend(state_, h, until, task_token);
      }
    }
    return detail::recv_suspend(state_, h, until, token_);
  }

  auto await_resume() {
    if constexpr (Throw) {
      return detail::recv_resume(*state_);
    } else {
      return detail::recv_resume_nothrow(*state_);
    }
  }
  ///@}

  /// The same receive, awaited without exceptions: yields recv_result.
  basic_recv_awaitable<false> nothrow() && noexcept requires Throw {
    basic_recv_awaitable<false> r(std::move(state_), std::move(token_));
    r.set_timeout(timeout_);
    return r;
  }

  ///@{
  /// For with_stop_token and with_timeout: the stop token, and the time limit from the await, to use.
  void set_stop_token(std::stop_token t) noexcept { token_ = std::move(t); }
  void set_timeout(std::optional<std::chrono::nanoseconds> d) noexcept { timeout_ = d; }
  ///@}

 private:
  std::shared_ptr<detail::recv_state> state_;
  std::stop_token token_;
  std::optional<std::chrono::nanoseconds> timeout_;
};

/// What tcp_stream::recv(pool) returns.
using recv_awaitable = basic_recv_awaitable<true>;

/// A stream's leased-receive state, created by its first recv(pool). Destroying it (with the stream) ends
/// the armed request and returns the chunks nobody took.
class leased_receiver {
 public:
  leased_receiver() noexcept = default;
  ///@{
  /// Moves the state; an assigned-to receiver first ends its own.
  leased_receiver(leased_receiver&& o) noexcept = default;
  leased_receiver& operator=(leased_receiver&& o) noexcept {
    if (this != &o) {
      abandon();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ///@}
  ~leased_receiver() { abandon(); }

  /// The next chunk of `fd` in a buffer of `pool` (binding this receiver to both on first use).
  recv_awaitable recv(int fd, buffer_pool& pool, std::stop_token stop) {
    return next(fd, pool, std::move(stop), false);
  }
  /// The same for a pipe, FIFO or eventfd (uring/read_stream.hpp): read(2) rather than recv(2).
  recv_awaitable read(int fd, buffer_pool& pool, std::stop_token stop) {
    return next(fd, pool, std::move(stop), true);
  }

 private:
  recv_awaitable next(int fd, buffer_pool& pool, std::stop_token stop, bool reading);
  void abandon() noexcept;
  std::shared_ptr<detail::recv_state> state_;
};

}  // namespace uring::net

namespace uring {

/// The leased receive, failing with ETIMEDOUT if no chunk (nor end of stream) has come within `d` (see
/// the top of this header: it takes no bytes).
template <bool Throw, class Rep, class Period>
net::basic_recv_awaitable<Throw> with_timeout(net::basic_recv_awaitable<Throw> op,
                                              std::chrono::duration<Rep, Period> d) noexcept {
  op.set_timeout(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  return op;
}

/// The leased receive, failing with ECANCELED when `token` is stopped (from any thread).
template <bool Throw>
net::basic_recv_awaitable<Throw> with_stop_token(net::basic_recv_awaitable<Throw> op,
                                                 std::stop_token token) noexcept {
  op.set_stop_token(std::move(token));
  return op;
}

}  // namespace uring
