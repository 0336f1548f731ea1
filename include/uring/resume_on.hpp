/// @file
/// uring/resume_on.hpp — move a coroutine to another executor's thread, or run a function there.
///
/// Provides: uring::resume_on, uring::submit_to, each for an executor& or an executor_handle.
/// Threads: await them from a coroutine on any executor; the target may be any live executor (through
/// an executor&), or any executor at all (through a handle, which may name one that is gone).
///
/// `co_await resume_on(other)` suspends the coroutine and resumes it on `other`'s thread (no allocation:
/// the hand-off node lives in the awaitable). From then on its operations run on `other`'s ring.
/// `co_await submit_to(other, fn)` runs `fn()` (a plain function, or one returning a task, which is
/// awaited there) on `other` and brings its result or exception back to the awaiting executor.
/// A target that no longer accepts work makes the co_await throw std::system_error(ESHUTDOWN), on the
/// awaiting coroutine's own executor; a submit_to's fn is then destroyed without running. So does a target
/// that accepted the hand-off but shut down before running it: the node travels back home with the error
/// (if home refuses it too, home is shutting down and frees the frame itself). Inside an executor_group
/// that is stopping, a refused hop neither throws nor comes back: the coroutine stays suspended and the
/// group frees it, as it frees every coroutine its stop catches (so a stop never fails join()).
///
/// Through an executor_handle (uring/executor_handle.hpp) the target is looked up under the registry's
/// lock, so the target may be destroyed at any time: the co_await either continues on the target or
/// throws ESHUTDOWN ("... the target executor is gone or no longer accepts work"), also when the target
/// accepted the hand-off but shut down before running it. The handle forms always take the target's mailbox,
/// never MSG_RING: a MSG_RING names the target by its ring's fd number and a failed one falls back to the
/// target's address, neither of which stays valid once the target may be destroyed (the fd may even name a
/// newer ring by then).
///
/// Frame ownership: a coroutine stays owned by the executor it was spawned on. When executors stop, the
/// executors a coroutine travelled between must stop together (executor_group does: all of them
/// quiesce before any frees a frame); see docs/messaging.md. A handle guards against the *target's*
/// destruction; the coroutine's owner must still outlive the trip, as for an executor&.
///
/// After the hop the code runs on another thread, but the compiler may not know it: a value it thinks
/// cannot change across the co_await is stale. std::this_thread::get_id() (pthread_self is declared
/// `const`) may give the old thread's id at -O2, and the address of a thread_local may be the old
/// thread's. Read them after the hop through a call the compiler cannot see into (a noinline function
/// with an empty asm memory clobber), not through a value or address taken before it.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/executor_handle.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {

/// The two kinds of target (executor_target, uring/message.hpp; handle_target, uring/executor_handle.hpp).
inline executor_target target_of(executor& ex) noexcept { return {&ex}; }
inline handle_target target_of(const executor_handle& h) noexcept { return {h.id()}; }

template <class Target>
class [[nodiscard]] hop_awaitable : private remote_node {
 public:
  hop_awaitable(Target to, const char* what) noexcept : target_(to), what_(what) {
    run = [](remote_node* n) noexcept { static_cast<hop_awaitable*>(n)->waiter_.resume(); };
    discard = &send_home;
  }
  bool await_ready() const noexcept { return target_.here(); }
  void await_suspend(std::coroutine_handle<> h) {
    waiter_ = h;
    executor* home = executor::current();
    if constexpr (Target::by_handle) {
      home_ = home != nullptr ? home->handle().id() : 0;
    } else {
      home_ = home;
    }
    if (!target_.hand_off(*this)) {
      // Refused while this executor's group stops (a sibling quiesced first): the coroutine stays
      // suspended and is freed with the group, like every coroutine the stop catches, rather than
      // throwing ESHUTDOWN into a stopping executor, which would fail the group's join.
      if (home != nullptr && executor_access::group_stopping(*home)) return;
      refuse();  // nothing was handed over: it throws on this thread
    }
  }
  void await_resume() const {
    if (refused_) refuse();
  }

 private:
  [[noreturn]] void refuse() const {
    if constexpr (Target::by_handle) {
      throw_handle_refused(what_);
    } else {
      throw std::system_error(ESHUTDOWN, std::system_category(),
                              std::string(what_) + ": the target executor no longer accepts work");
    }
  }
  /// The target accepted the node but shuts down before running it (in its last drain, or where a failed
  /// MSG_RING falls back to a mailbox that refuses): the coroutine goes back to the executor it left,
  /// where await_resume throws ESHUTDOWN. If that one refuses (it is shutting down, or its
  /// executor_group is stopping), it frees the frame itself. (An executor& home is alive: it owns the
  /// frame this node lives in.)
  static void send_home(remote_node* n) noexcept {
    auto* self = static_cast<hop_awaitable*>(n);
    self->refused_ = true;
    self->discard = [](remote_node*) noexcept {};
    if constexpr (Target::by_handle) {
      (void)post_to_handle(self->home_, *self, /*going_home=*/true);
    } else if (self->home_ != nullptr) {
      (void)executor_access::try_post_home(*self->home_, *self);
    }
  }

  Target target_;
  const char* what_;
  std::coroutine_handle<> waiter_;
  /// The awaiting coroutine's executor: by handle for a handle target (home too may go away), else its
  /// address.
  std::conditional_t<Target::by_handle, std::uint64_t, executor*> home_{};
  bool refused_ = false;
};

using resume_on_awaitable = hop_awaitable<executor_target>;

/// What submit_to yields for `fn`: its return type, or T when it returns task<T>.
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

/// Continues the awaiting coroutine on `target`'s thread.
inline detail::hop_awaitable<detail::executor_target> resume_on(executor& target) noexcept {
  return {detail::target_of(target), "uring::resume_on"};
}
/// The same through a handle; ESHUTDOWN if it names no executor, or one that is gone or refuses work.
inline detail::hop_awaitable<detail::handle_target> resume_on(const executor_handle& target) noexcept {
  return {detail::target_of(target), "uring::resume_on"};
}

namespace detail {
/// The body of both submit_to forms. Target is held by value: the task is lazy and may outlive the
/// caller's handle.
template <class Target, class F>
task<submit_result_t<F>> submit_body(Target target, F fn) {
  using R = submit_result_t<F>;
  executor& home = executor_access::current("uring::submit_to");
  co_await hop_awaitable<Target>(target, "uring::submit_to");  // refused: fn dies with this frame, unrun
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
}  // namespace detail

/// Runs `fn` on `target` and yields its result on the awaiting coroutine's executor. Must be awaited from
/// a coroutine running on an executor (std::logic_error otherwise).
template <class F>
task<detail::submit_result_t<F>> submit_to(executor& target, F fn) {
  return detail::submit_body(detail::target_of(target), std::move(fn));
}
/// The same through a handle: ESHUTDOWN (fn destroyed without running) if it names no executor, or one
/// that is gone or refuses work before fn started.
template <class F>
task<detail::submit_result_t<F>> submit_to(const executor_handle& target, F fn) {
  return detail::submit_body(detail::target_of(target), std::move(fn));
}

}  // namespace uring
