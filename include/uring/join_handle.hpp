/// @file
/// uring/join_handle.hpp — the result of a spawned task, for whoever wants it.
///
/// Provides: uring::join_handle<T> (what uring::spawn returns).
/// Threads: co_await it from a coroutine on any executor, or get() from a plain thread; the task may end
/// on any thread.
///
/// `co_await h` yields the task's value or rethrows its exception, on the awaiting coroutine's executor
/// (a stop of the awaiting coroutine ends the wait with ECANCELED and leaves the task running on its own,
/// as if detached: with_timeout applies); `h.get()` does the same for a thread that runs no executor,
/// blocking. One of them, once. Dropping the handle (or detach()) leaves the task running on its own: an
/// exception it ends with then shuts its executor down and is rethrown from executor::run(), as it would have
/// been had the handle never existed. The same holds for an exception the task had already ended with when
/// the handle is dropped unread: errors are never lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "uring/detail/join_point.hpp"
#include "uring/executor.hpp"
#include "uring/executor_handle.hpp"

namespace uring {

namespace detail {

template <class T>
struct join_state {
  static constexpr unsigned kEnded = 1, kDetached = 2, kTaken = 4;
  using stored = std::conditional_t<std::is_void_v<T>, bool, T>;

  /// The task's side, on the thread it ends on. True when nobody holds the handle any more and `error`
  /// must fail the executor, as for a detached spawn.
  bool end(std::exception_ptr e) noexcept {
    const bool failed = e != nullptr;  // read before the hand-over: the taker then owns `error`
    error = std::move(e);
    if (executor* ex = running_executor()) owner = ex->handle().id();
    const unsigned old = flags.fetch_or(kEnded, std::memory_order_acq_rel);
    done.signal();
    return (old & kDetached) != 0 && failed;
  }
  /// The handle's side, once, from any thread.
  void detach() noexcept {
    const unsigned old = flags.fetch_or(kDetached, std::memory_order_acq_rel);
    if ((old & kEnded) == 0 || (old & kTaken) != 0 || error == nullptr) return;
    // It ended with an exception nobody took: hand it to the executor it ended on, which fails with it.
    auto* node = new posted_fn([e = error] { std::rethrow_exception(e); });
    if (!post_to_handle(owner, *node)) delete node;  // that executor is gone: nothing left to fail
  }
  T take() {
    flags.fetch_or(kTaken, std::memory_order_acq_rel);
    // Moved out: the exception then lives and dies on the taker's thread, whichever side frees this state.
    if (error) std::rethrow_exception(std::exchange(error, nullptr));
    if constexpr (!std::is_void_v<T>) return std::move(*value);
  }

  join_point done;
  std::optional<stored> value;
  std::exception_ptr error;
  std::atomic<unsigned> flags{0};
  std::uint64_t owner = 0;  ///< the executor the task ended on, by handle id
};

}  // namespace detail

/// The result of a spawned task (what uring::spawn returns), for whoever wants it: `co_await h` yields the
/// task's value or rethrows its exception on the awaiting coroutine's executor; get() does the same for a
/// thread that runs no executor, blocking. One of them, once (std::logic_error for an empty handle).
/// Dropping the handle (or detach()) leaves the task running on its own.
///
/// Threads: co_await it from a coroutine on any executor, or get() from a plain thread; the task may end
/// on any thread.
template <class T>
class join_handle {
 public:
  /// An empty handle.
  join_handle() noexcept = default;
  /// For uring::spawn: the handle of the task whose result `s` will hold.
  explicit join_handle(std::shared_ptr<detail::join_state<T>> s) noexcept : state_(std::move(s)) {}
  ///@{
  /// Moves the handle; `o` is left empty (an assigned-to handle first detaches its own task).
  join_handle(join_handle&&) noexcept = default;
  join_handle& operator=(join_handle&& o) noexcept {
    if (this != &o) {
      detach();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ///@}
  /// Detaches the task, if the handle still holds it.
  ~join_handle() { detach(); }

  /// True when the task has ended (its result can be taken without waiting).
  [[nodiscard]] bool done() const noexcept { return state_ && state_->done.ended(); }

  /// Leaves the task to run on its own (see above); the handle becomes empty.
  void detach() noexcept {
    if (state_) std::exchange(state_, nullptr)->detach();
  }

  /// From a thread that runs no executor: waits for the task, then yields its value or rethrows.
  T get() {
    auto s = take_state("uring::join_handle::get");
    s->done.wait_blocking("uring::join_handle::get");
    return s->take();
  }

  /// What `co_await h` uses: waits for the task (a stop of the awaiting coroutine ends the wait with
  /// ECANCELED and leaves the task running on its own), then yields its value or rethrows.
  struct awaiter {
    std::shared_ptr<detail::join_state<T>> state;  ///< the task's result, taken by await_resume
    detail::join_point::awaiter wait;              ///< the wait for the task's end
    /// An await that never took the result (its frame destroyed while waiting) leaves the task on its own.
    ~awaiter() {
      if (state) state->detach();
    }
    ///@{
    /// The awaiter protocol, called by `co_await`.
    bool await_ready() const noexcept { return wait.await_ready(); }
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> h) {
      return wait.await_suspend(h);
    }
    T await_resume() {
      auto s = std::move(state);
      try {
        wait.await_resume();
      } catch (...) {
        s->detach();  // stopped: the task runs on, as if detached
        throw;
      }
      return s->take();
    }
    ///@}
  };
  /// Waits for the task and yields its value or rethrows (the handle becomes empty).
  awaiter operator co_await() {
    auto s = take_state("uring::join_handle");
    auto& done = s->done;
    return awaiter{std::move(s), done.wait("uring::join_handle")};
  }

 private:
  std::shared_ptr<detail::join_state<T>> take_state(const char* what) {
    if (!state_) throw std::logic_error(std::string(what) + ": empty handle (taken, detached or moved from)");
    return std::move(state_);
  }

  std::shared_ptr<detail::join_state<T>> state_;
};

}  // namespace uring
