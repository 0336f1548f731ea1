/// @file
/// uring/result.hpp — what a task awaited in its nothrow form yields.
///
/// Provides: uring::result<T>, detail::nothrow_adapter (the nothrow form of an awaitable that throws).
/// Threads: a plain value; any thread.
///
/// `co_await work().nothrow()` (uring/task.hpp) yields a result<T> instead of rethrowing: the task's
/// value, or the exception it ended with. error() is that exception's code when it is a
/// std::system_error (every failure of the library's own operations is: errno in system_category), so a
/// nothrow task reads like a nothrow operation's io_result; exception() keeps any other kind.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

namespace uring {

/// What a task awaited in its nothrow form (`co_await work().nothrow()`) yields: the task's value, or
/// the exception it ended with. error() is that exception's code when it is a std::system_error; exception()
/// keeps any other kind. Threads: a plain value; any thread.
template <class T>
class result {
  using stored = std::conditional_t<std::is_void_v<T>, bool, T>;

 public:
  /// A task that returned.
  template <class... Args>
  static result done(Args&&... args) {
    result r;
    r.value_.emplace(std::forward<Args>(args)...);
    return r;
  }
  /// A task that threw `e` (its code, if it is a std::system_error, in `code`).
  static result failed(std::exception_ptr e, std::error_code code) noexcept {
    result r;
    r.error_ = std::move(e);
    r.code_ = code;
    return r;
  }

  ///@{
  /// True when the task returned.
  [[nodiscard]] bool ok() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return ok(); }
  ///@}
  /// The std::system_error's code the task failed with; empty when it succeeded or threw another type.
  [[nodiscard]] std::error_code error() const noexcept { return code_; }
  /// What the task threw (null when it succeeded).
  [[nodiscard]] std::exception_ptr exception() const noexcept { return error_; }
  ///@{
  /// The value; rethrows the task's exception if it failed.
  decltype(auto) value() & {
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<T>) return (*value_);
  }
  decltype(auto) value() && {
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }
  ///@}

 private:
  result() = default;
  std::optional<stored> value_;
  std::exception_ptr error_;
  std::error_code code_;
};

namespace detail {

/// `a`, awaited without exceptions: yields result<R> where `a` yields R or throws. Moves `a` in, so only
/// for awaitables that may be moved until awaited.
template <class Awaitable>
class [[nodiscard]] nothrow_adapter {
  using value = decltype(std::declval<Awaitable&>().await_resume());

 public:
  explicit nothrow_adapter(Awaitable a) noexcept(std::is_nothrow_move_constructible_v<Awaitable>)
      : a_(std::move(a)) {}
  bool await_ready() { return a_.await_ready(); }
  template <class Promise>
  decltype(auto) await_suspend(std::coroutine_handle<Promise> h) {
    return a_.await_suspend(h);
  }
  result<value> await_resume() noexcept {
    try {
      if constexpr (std::is_void_v<value>) {
        a_.await_resume();
        return result<value>::done(true);
      } else {
        return result<value>::done(a_.await_resume());
      }
    } catch (const std::system_error& e) {
      return result<value>::failed(std::current_exception(), e.code());
    } catch (...) {
      return result<value>::failed(std::current_exception(), {});
    }
  }

 private:
  Awaitable a_;
};

}  // namespace detail

}  // namespace uring
