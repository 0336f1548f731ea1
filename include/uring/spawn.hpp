/// @file
/// uring/spawn.hpp — start a task that runs on its own; its result comes back through a join_handle.
///
/// Provides: uring::spawn.
/// Threads: spawn(t) runs t on the executor running on this thread; spawn(target, t) may be called from
/// any thread and runs t on `target`'s thread. Either way the task starts on a later turn of that loop.
/// `target` is an executor& (which must outlive the call) or an executor_handle (which may name an
/// executor that is gone: ESHUTDOWN then, see uring/executor_handle.hpp).
///
/// The executor the task starts on owns its frame until it finishes, even if the task moves to other
/// executors in between (resume_on): when it finishes elsewhere, its owner is told and frees it.
/// spawn returns a join_handle: `co_await h` (any executor) or `h.get()` (a plain thread) gives the task's
/// value or exception. A task whose handle was dropped (or detached) runs on its own: an exception
/// escaping it shuts the owner down and is rethrown from executor::run() (as Asio's co_spawn does with
/// `detached`). Errors are never lost.
/// A lambda coroutine's captures live in the lambda, not in the task's frame: spawn(target, fn, args...)
/// keeps the callable and its arguments in the frame, where spawn(target, [x] -> task<> {...}()) reads
/// dead captures once the statement ends.
#pragma once

#include <cerrno>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/executor_handle.hpp"
#include "uring/join_handle.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {

struct spawn_node {
  spawn_node* prev = nullptr;
  spawn_node* next = nullptr;
  std::coroutine_handle<> frame;
};

class spawned {
 public:
  struct promise_type {
    spawn_node node;
    executor* owner = nullptr;
    std::exception_ptr error;
    /// Starts the task on a foreign owner, or tells the owner it finished elsewhere.
    struct message_node : remote_node {
      promise_type* promise = nullptr;
    } message;

    spawned get_return_object() noexcept {
      auto h = std::coroutine_handle<promise_type>::from_promise(*this);
      node.frame = h;
      message.promise = this;
      return spawned{h};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }

    /// On the owner's thread: the frame leaves the owner's list and is freed; its error, if any, fails
    /// the owner. Elsewhere (the task moved away and finished there), the owner is asked to do it.
    struct final_awaiter {
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> h) const noexcept {
        promise_type& p = h.promise();
        if (running_executor() == p.owner) {
          finish(h);
        } else {
          p.message.run = [](remote_node* n) noexcept { finish(from_message(n)); };
          p.message.discard = nullptr;  // the owner's shutdown frees it either way
          executor_access::post_remote(*p.owner, p.message);
        }
      }
      void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }

    static std::coroutine_handle<promise_type> from_message(remote_node* n) noexcept {
      return std::coroutine_handle<promise_type>::from_promise(*static_cast<message_node*>(n)->promise);
    }
    static void finish(std::coroutine_handle<promise_type> h) noexcept {
      promise_type& p = h.promise();
      if (p.error) executor_access::fail(*p.owner, std::move(p.error));
      executor_access::release(*p.owner, p.node);
      h.destroy();
    }
  };

  explicit spawned(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

/// Runs `t`, keeps its outcome in `state` for the join_handle; with the handle gone, an exception fails the
/// executor (through the promise's unhandled_exception).
template <class T>
spawned spawn_body(task<T> t, std::shared_ptr<join_state<T>> state) {
  std::exception_ptr error;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
    } else {
      state->value.emplace(co_await std::move(t));
    }
  } catch (...) {
    error = std::current_exception();
  }
  // The task's frame, and this frame's reference to the exception, go with the hand-over: the awaiter may
  // run at once on another thread, and nothing of the task (a copy of the exception) may be released here
  // meanwhile. With the handle gone (end() says so), nobody else touches the state's error any more.
  t = task<T>{};
  if (state->end(std::move(error))) std::rethrow_exception(state->error);
}

/// A task that owns `fn` and `args` (copied into its frame) and awaits what fn(args...) returns.
template <class F, class... Args>
auto call_in_frame(F fn, Args... args) -> task<typename std::invoke_result_t<F&, Args&...>::value_type> {
  co_return co_await std::invoke(fn, args...);
}

/// Both off-thread forms: hands the unstarted frame's start node over with `hand_off(node)`, which sets
/// node.target to the executor that takes it (that one becomes the owner). False if it was refused: the
/// frame (and what it holds) is destroyed unstarted.
template <class HandOff>
[[nodiscard]] bool start_elsewhere(spawned s, HandOff hand_off) {
  using promise = spawned::promise_type;
  promise& p = s.handle_.promise();
  p.message.run = [](remote_node* n) noexcept {
    auto frame = promise::from_message(n);
    executor& owner = *n->target;
    frame.promise().owner = &owner;
    executor_access::adopt(owner, frame.promise().node);
    executor_access::schedule(owner, frame);
  };
  p.message.discard = [](remote_node* n) noexcept { promise::from_message(n).destroy(); };
  if (hand_off(p.message)) return true;
  s.handle_.destroy();
  return false;
}

/// Starts the unstarted frame `s` on `ex`, the executor running on this thread, which owns it from now on.
inline void start_here(executor& ex, spawned s) noexcept {
  s.handle_.promise().owner = &ex;
  executor_access::adopt(ex, s.handle_.promise().node);
  executor_access::schedule(ex, s.handle_);
}

/// Starts `s` on `target`, from any thread (on this thread's own executor at once if that is the target).
/// Throws std::system_error(ESHUTDOWN), with the frame destroyed unstarted, if the target refuses it.
inline void start_on(executor& target, spawned s) {
  if (executor::current() == &target) return start_here(target, s);
  const bool posted = start_elsewhere(s, [&target](remote_node& n) noexcept {
    n.target = &target;
    return executor_access::try_post(target, n);
  });
  if (!posted)
    throw std::system_error(ESHUTDOWN, std::system_category(),
                            "uring::spawn: the target executor no longer accepts work");
}
/// The same through a handle: ESHUTDOWN also if the handle names no executor, or one that is gone.
inline void start_on(const executor_handle& target, spawned s) {
  if (executor* cur = executor::current(); cur != nullptr && cur->handle() == target)
    return start_here(*cur, s);
  const std::uint64_t id = target.id();
  const bool posted = start_elsewhere(s, [id](remote_node& n) noexcept { return post_to_handle(id, n); });
  if (!posted) throw_handle_refused("uring::spawn");
}

}  // namespace detail

/// Starts `t` on the executor running on this thread; throws std::logic_error if there is none.
template <class T>
join_handle<T> spawn(task<T> t) {
  executor& ex = detail::executor_access::current("uring::spawn");
  auto state = std::make_shared<detail::join_state<T>>();
  detail::start_here(ex, detail::spawn_body(std::move(t), state));
  return join_handle<T>(std::move(state));
}

/// Starts `t` on `target`, from any thread. Throws std::system_error(ESHUTDOWN), with `t` destroyed
/// unstarted, if `target` no longer accepts work.
template <class T>
join_handle<T> spawn(executor& target, task<T> t) {
  auto state = std::make_shared<detail::join_state<T>>();
  detail::start_on(target, detail::spawn_body(std::move(t), state));
  return join_handle<T>(std::move(state));
}

/// The same through a handle: ESHUTDOWN, with `t` destroyed unstarted, if the handle names no executor,
/// or one that is gone or refuses work. A task the target accepted but never started because it shut
/// down first is destroyed unstarted by the target (as for an executor&): its join_handle never ends, so
/// await it only from an executor that shuts down no later than the target (or with a time-out).
template <class T>
join_handle<T> spawn(const executor_handle& target, task<T> t) {
  auto state = std::make_shared<detail::join_state<T>>();
  detail::start_on(target, detail::spawn_body(std::move(t), state));
  return join_handle<T>(std::move(state));
}

/// The safe form for a lambda with captures (or any callable returning a task): `fn` and `args` are
/// copied into the spawned task's frame, so they live as long as it runs. (spawn(target, lambda()) keeps
/// only the task: a lambda temporary's captures are gone by the time it runs.)
template <class Target, class F, class... Args>
requires(std::same_as<std::remove_cvref_t<Target>, executor> ||
         std::same_as<std::remove_cvref_t<Target>, executor_handle>) &&
    std::invocable<F&, Args&...> auto spawn(Target&& target, F fn, Args... args) {
  return spawn(std::forward<Target>(target), detail::call_in_frame(std::move(fn), std::move(args)...));
}

}  // namespace uring
