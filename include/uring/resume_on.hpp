// uring/resume_on.hpp — move a coroutine to another executor's thread, or run a function there.
//
// Provides: uring::resume_on, uring::submit_to.
// Threads: await them from a coroutine on any executor; the target may be any live executor.
//
// `co_await resume_on(other)` suspends the coroutine and resumes it on `other`'s thread (no allocation:
// the hand-off node lives in the awaitable). From then on its operations run on `other`'s ring.
// `co_await submit_to(other, fn)` runs `fn()` (a plain function, or one returning a task, which is
// awaited there) on `other` and brings its result or exception back to the awaiting executor.
// A target that no longer accepts work makes the co_await throw std::system_error(ESHUTDOWN).
//
// Frame ownership: a coroutine stays owned by the executor it was spawned on. When executors stop, the
// executors a coroutine travelled between must stop together (executor_group does: all of them
// quiesce before any frees a frame); see docs/messaging.md.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {

class [[nodiscard]] resume_on_awaitable : private remote_node {
 public:
  explicit resume_on_awaitable(executor& to) noexcept : target_(to) {
    run = [](remote_node* n) noexcept { static_cast<resume_on_awaitable*>(n)->waiter_.resume(); };
    discard = [](remote_node*) noexcept {};  // a shutting-down target must not resume it; its owner frees it
  }
  bool await_ready() const noexcept { return executor::current() == &target_; }
  void await_suspend(std::coroutine_handle<> h) {
    waiter_ = h;
    if (!executor_access::send(target_, *this)) {
      throw std::system_error(ESHUTDOWN, std::system_category(), "uring::resume_on: the target executor no longer accepts work");
    }
  }
  void await_resume() const noexcept {}

 private:
  executor& target_;
  std::coroutine_handle<> waiter_;
};

// What submit_to yields for `fn`: its return type, or T when it returns task<T>.
template <class R>
struct unwrap_task {
  using type = R;
};
template <class T>
struct unwrap_task<task<T>> {
  using type = T;
};
template <class F>
using submit_result_t = typename unwrap_task<std::invoke_result_t<F&>>::type;

template <class F>
inline constexpr bool returns_task = !std::is_same_v<std::invoke_result_t<F&>, submit_result_t<F>>;

}  // namespace detail

// Continues the awaiting coroutine on `target`'s thread.
inline detail::resume_on_awaitable resume_on(executor& target) noexcept { return detail::resume_on_awaitable(target); }

// Runs `fn` on `target` and yields its result on the awaiting coroutine's executor. Must be awaited from
// a coroutine running on an executor (std::logic_error otherwise).
template <class F>
task<detail::submit_result_t<F>> submit_to(executor& target, F fn) {
  using R = detail::submit_result_t<F>;
  executor& home = detail::executor_access::current("uring::submit_to");
  co_await resume_on(target);
  std::exception_ptr error;
  std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> result;
  try {
    if constexpr (detail::returns_task<F>) {
      if constexpr (std::is_void_v<R>) {
        co_await fn();
        result.emplace(true);
      } else {
        result.emplace(co_await fn());
      }
    } else if constexpr (std::is_void_v<R>) {
      fn();
      result.emplace(true);
    } else {
      result.emplace(fn());
    }
  } catch (...) {
    error = std::current_exception();
  }
  co_await resume_on(home);
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<R>) co_return std::move(*result);
}

}  // namespace uring
