// uring/task_adapters.hpp — time-outs and stop tokens for whole tasks.
//
// Provides: uring::with_timeout and uring::with_stop_token for uring::task (the same spellings as for single
// operations, uring/io.hpp, and streams).
// Threads: await the result from a coroutine running on an executor.
//
// with_timeout(work(), d) runs the task against a timer: if `d` passes first, the task is stopped through its
// stop token (its pending operations are cancelled), awaited to its end, and the co_await throws
// std::system_error(ETIMEDOUT) ("with_timeout: Connection timed out"). A task that ignores the stop and
// runs on delays the throw until it ends. If the task ends first, its value or exception is the result.
// with_stop_token(work(), token) makes `token` the one the task's operations follow, in place of the
// awaiting coroutine's.
#pragma once

#include <cerrno>
#include <chrono>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "uring/task.hpp"
#include "uring/time.hpp"
#include "uring/when_any.hpp"

namespace uring {

namespace detail {
inline task<void> expire_after(std::chrono::nanoseconds d) { co_await sleep_for(d); }
}  // namespace detail

template <class T, class Rep, class Period>
requires(!std::is_reference_v<T>) task<T> with_timeout(task<T> work, std::chrono::duration<Rep, Period> d) {
  auto r = co_await when_any(std::move(work),
                             detail::expire_after(std::chrono::duration_cast<std::chrono::nanoseconds>(d)));
  if (r.index() == 1) throw std::system_error(ETIMEDOUT, std::system_category(), "with_timeout");
  if constexpr (!std::is_void_v<T>) co_return std::get<0>(std::move(r));
}

template <class T>
task<T> with_stop_token(task<T> work, std::stop_token token) {
  auto h = work.release();
  if (h && token.stop_possible()) h.promise().set_stop_token(std::move(token));
  return task<T>(h);
}

}  // namespace uring
