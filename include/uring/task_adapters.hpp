/// @file
/// uring/task_adapters.hpp — time-outs and stop tokens for whole tasks.
///
/// Provides: uring::with_timeout and uring::with_stop_token for uring::task (the same spellings as for single
/// operations, uring/io.hpp, and streams).
/// Threads: await the result from a coroutine running on an executor.
///
/// with_timeout(work(), d) puts the task, and every task it awaits, under a deadline `d` from now
/// (uring/detail/deadline.hpp): each operation it awaits carries a linked timeout at the deadline, a
/// stream's wait or a chain ends by it, and a wait on other coroutines (a join, sync::, a look-up) is
/// stopped when it passes. What the deadline cuts short fails with ETIMEDOUT: a composite names itself
/// ("read_exactly: Connection timed out"), a stopped wait is reported as
/// std::system_error(ETIMEDOUT, "with_timeout"). An operation started after the deadline fails at once,
/// so a task that catches the error and goes on cannot wait any longer. The task's value or exception is
/// the result (`.nothrow()` on the timed task yields it as uring::result). Nested time-outs: the earlier
/// deadline wins. A time-out costs one coroutine frame, and a timer only where the task waits on other
/// coroutines (one, armed by the first such wait).
/// with_stop_token(work(), token) makes `token` the one the task's operations follow, in place of the
/// awaiting coroutine's.
#pragma once

#include <cerrno>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/deadline.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {
/// The awaiting coroutine's own promise, found without suspending.
struct own_promise {
  task_promise_base* p = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    p = &h.promise();
    return false;
  }
  task_promise_base& await_resume() const noexcept { return *p; }
};

/// A failure of a task under `limit`: a wait the deadline stopped says ETIMEDOUT instead of ECANCELED.
[[noreturn]] void rethrow_under(const deadline& limit, const std::stop_token& outer, std::exception_ptr e);
}  // namespace detail

/// Puts `work`, and every task it awaits, under a deadline `d` from now: what the deadline cuts short fails
/// with ETIMEDOUT (a stopped wait as std::system_error(ETIMEDOUT, "with_timeout")), and an operation started
/// after it fails at once. Nested time-outs: the earlier deadline wins. std::logic_error for an empty task.
/// Threads: await the result from a coroutine running on an executor.
template <class T, class Rep, class Period>
requires(!std::is_reference_v<T>) task<T> with_timeout(task<T> work, std::chrono::duration<Rep, Period> d) {
  auto h = work.release();
  if (!h) throw std::logic_error("uring::with_timeout: an empty task (moved from?)");
  if (d >= std::chrono::hours(24 * 365 * 100)) co_return co_await task<T>(h);  // no limit in practice
  detail::task_promise_base& self = co_await detail::own_promise{};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  detail::deadline limit(detail::monotonic_ns() + (ns > 0 ? ns : 0), self.stop_token());
  h.promise().set_deadline(detail::deadline::earlier(h.promise().deadline(), &limit));
  std::exception_ptr failed;
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await task<T>(h);
      value.emplace(true);
    } else {
      value.emplace(co_await task<T>(h));
    }
  } catch (...) {
    failed = std::current_exception();
  }
  co_await limit.settle();
  if (failed) detail::rethrow_under(limit, self.stop_token(), failed);
  if constexpr (!std::is_void_v<T>) co_return std::move(*value);
}

/// Makes `token` the stop token `work`'s operations follow, in place of the awaiting coroutine's.
template <class T>
task<T> with_stop_token(task<T> work, std::stop_token token) {
  auto h = work.release();
  if (h && token.stop_possible()) h.promise().set_stop_token(std::move(token));
  return task<T>(h);
}

}  // namespace uring
