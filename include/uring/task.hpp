/// @file
/// uring/task.hpp — the coroutine type of the library.
///
/// Provides: uring::task<T>, a lazy coroutine producing a T (or void, or a reference), and
/// uring::nothrow_task<T> (task::nothrow).
/// Threads: a task runs on whichever thread resumes it; awaiting it from a coroutine runs it inline on the
/// awaiting coroutine's thread. A task is not thread-safe: await it once, from one place.
///
/// A task does nothing until it is awaited (or handed to executor::run / uring::spawn). Completion resumes
/// the awaiter by symmetric transfer, so a loop of awaits that all finish synchronously runs in constant
/// stack with clang. g++ 12 does not guarantee the tail call of symmetric transfer, so such long chains
/// overflow its stack at -O0 and under ASan. An exception escaping the task's body is rethrown to the
/// awaiter. Destroying a task that was never awaited destroys its frame; destroying one that is suspended on
/// an operation is a bug the executor prevents (it drains operations before frames are freed).
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <variant>

#include "uring/detail/deadline.hpp"
#include "uring/result.hpp"

namespace uring {

template <class T = void>
class task;
template <class T>
class nothrow_task;

namespace detail {

class task_promise_base {
 public:
  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      return self.promise().continuation_;
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }
  void set_continuation(std::coroutine_handle<> c) noexcept { continuation_ = c; }

  /// The stop token operations awaited in this task follow (see uring/io.hpp). A task that has none takes
  /// its awaiter's when it is awaited, so a stop request reaches a whole chain of tasks.
  [[nodiscard]] const std::stop_token& stop_token() const noexcept { return stop_token_; }
  void set_stop_token(std::stop_token t) noexcept { stop_token_ = std::move(t); }
  /// The time limit operations awaited in this task live under (uring/detail/deadline.hpp; null: none).
  /// Passed on like the stop token: a task awaited takes the earlier of its own and its awaiter's.
  [[nodiscard]] detail::deadline* deadline() const noexcept { return deadline_; }
  void set_deadline(detail::deadline* d) noexcept { deadline_ = d; }

 private:
  std::coroutine_handle<> continuation_ = std::noop_coroutine();
  std::stop_token stop_token_;
  detail::deadline* deadline_ = nullptr;
};

template <class T>
class task_promise final : public task_promise_base {
  /// References are stored as pointers so that task<T&> works like task<T>.
  using stored = std::conditional_t<std::is_reference_v<T>, std::add_pointer_t<T>, T>;

 public:
  task<T> get_return_object() noexcept;
  void unhandled_exception() noexcept { result_.template emplace<2>(std::current_exception()); }

  template <class U = T>
  requires std::is_convertible_v<U&&, T>
  void return_value(U&& value) noexcept(std::is_nothrow_constructible_v<stored, U&&>) {
    if constexpr (std::is_reference_v<T>) {
      T ref = static_cast<U&&>(value);
      result_.template emplace<1>(std::addressof(ref));
    } else {
      result_.template emplace<1>(std::forward<U>(value));
    }
  }

  T result() {
    if (result_.index() == 2) std::rethrow_exception(std::get<2>(result_));
    if constexpr (std::is_reference_v<T>) {
      return static_cast<T>(*std::get<1>(result_));
    } else {
      return std::move(std::get<1>(result_));
    }
  }

 private:
  std::variant<std::monostate, stored, std::exception_ptr> result_;
};

template <>
class task_promise<void> final : public task_promise_base {
 public:
  task<void> get_return_object() noexcept;
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }
  void return_void() const noexcept {}
  void result() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  std::exception_ptr exception_;
};

}  // namespace detail

/// The coroutine type of the library: a lazy coroutine producing a T (or void, or a reference). It does
/// nothing until it is awaited (or handed to executor::run / uring::spawn); completion resumes the awaiter
/// by symmetric transfer, and an exception escaping its body is rethrown to the awaiter.
///
/// Threads: a task runs on whichever thread resumes it; awaiting it from a coroutine runs it inline on the
/// awaiting coroutine's thread. A task is not thread-safe: await it once, from one place.
template <class T>
class [[nodiscard]] task {
 public:
  /// The coroutine's promise (the library's own).
  using promise_type = detail::task_promise<T>;
  /// What awaiting the task yields.
  using value_type = T;

  /// An empty task: valid() is false, awaiting it throws std::logic_error.
  task() noexcept = default;
  /// For the library's own promise: the task that owns coroutine `h`.
  explicit task(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  ///@{
  /// Moves the coroutine; `other` is left empty (an assigned-to task first destroys its own).
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ///@}
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() {
    if (handle_) handle_.destroy();
  }

  /// True when the task holds a coroutine (it was not moved from or default-constructed).
  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }

  /// What `co_await task` uses: starts the task inline, passing on the awaiting coroutine's stop token and
  /// deadline, and yields its value or rethrows its exception (std::logic_error for an empty task).
  class awaiter {
   public:
    /// Awaits coroutine `h`.
    explicit awaiter(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
    ///@{
    /// The awaiter protocol, called by `co_await`.
    bool await_ready() const noexcept { return !handle_ || handle_.done(); }
    template <class CallerPromise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<CallerPromise> caller) noexcept {
      if constexpr (requires { caller.promise().stop_token(); }) {
        auto& mine = handle_.promise();
        if (!mine.stop_token().stop_possible() && caller.promise().stop_token().stop_possible()) {
          mine.set_stop_token(caller.promise().stop_token());
        }
        mine.set_deadline(detail::deadline::earlier(mine.deadline(), detail::deadline_of(caller.promise())));
      }
      handle_.promise().set_continuation(caller);
      return handle_;
    }
    T await_resume() {
      if (!handle_) throw std::logic_error("uring::task: awaited an empty task (moved from?)");
      return handle_.promise().result();
    }
    ///@}

   private:
    std::coroutine_handle<promise_type> handle_;
  };

  ///@{
  /// Awaiting runs the task inline on the awaiting coroutine's thread and yields its value.
  awaiter operator co_await() & noexcept { return awaiter{handle_}; }
  awaiter operator co_await() && noexcept { return awaiter{handle_}; }
  ///@}

  /// The same task, awaited without exceptions: `co_await work().nothrow()` yields uring::result<T>
  /// (uring/result.hpp), its value or the exception it ended with.
  nothrow_task<T> nothrow() && noexcept requires(!std::is_reference_v<T>);

  /// For the library's own drivers (executor::run, spawn): hands over the coroutine.
  std::coroutine_handle<promise_type> release() noexcept { return std::exchange(handle_, nullptr); }

 private:
  friend class nothrow_task<T>;
  std::coroutine_handle<promise_type> handle_;
};

/// A task awaited in its nothrow form (task::nothrow): owns the coroutine as the task did.
template <class T>
class [[nodiscard]] nothrow_task {
 public:
  /// Takes over `t`.
  explicit nothrow_task(task<T> t) noexcept : task_(std::move(t)) {}

  /// The task's own awaiter (stop token and deadline passed on as for any await), its failure caught.
  detail::nothrow_adapter<typename task<T>::awaiter> operator co_await() && noexcept {
    return detail::nothrow_adapter<typename task<T>::awaiter>(typename task<T>::awaiter{handle_of(task_)});
  }

 private:
  static std::coroutine_handle<typename task<T>::promise_type> handle_of(task<T>& t) noexcept {
    return t.handle_;
  }
  task<T> task_;
};

template <class T>
nothrow_task<T> task<T>::nothrow() && noexcept requires(!std::is_reference_v<T>) {
  return nothrow_task<T>(std::move(*this));
}

namespace detail {
template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>{std::coroutine_handle<task_promise>::from_promise(*this)};
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>{std::coroutine_handle<task_promise>::from_promise(*this)};
}
}  // namespace detail

}  // namespace uring
