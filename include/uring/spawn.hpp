// uring/spawn.hpp — start a task that nobody awaits.
//
// Provides: uring::spawn.
// Threads: spawn(t) runs t on the executor running on this thread; spawn(target, t) may be called from
// any thread and runs t on `target`'s thread. Either way the task starts on a later turn of that loop.
// `target` is an executor& (which must outlive the call) or an executor_handle (which may name an
// executor that is gone: ESHUTDOWN then, see uring/executor_handle.hpp).
//
// The executor the task starts on owns its frame until it finishes, even if the task moves to other
// executors in between (resume_on): when it finishes elsewhere, its owner is told and frees it. An
// exception escaping it shuts the owner down and is rethrown from executor::run() (as Asio's co_spawn
// does with `detached`): errors are never lost.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <system_error>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/executor_handle.hpp"
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
    // Starts the task on a foreign owner, or tells the owner it finished elsewhere.
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

    // On the owner's thread: the frame leaves the owner's list and is freed; its error, if any, fails
    // the owner. Elsewhere (the task moved away and finished there), the owner is asked to do it.
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

template <class T>
spawned spawn_body(task<T> t) {
  co_await std::move(t);
}

// Both spawn(target, t) forms: wraps t and hands its start node over with `hand_off(node)`, which sets
// node.target to the executor that takes it (that one becomes the owner). False if it was refused: the
// frame (and t with it) is destroyed unstarted, and the caller throws.
template <class T, class HandOff>
[[nodiscard]] bool spawn_elsewhere(task<T> t, HandOff hand_off) {
  using promise = spawned::promise_type;
  auto h = spawn_body(std::move(t)).handle_;
  promise& p = h.promise();
  p.message.run = [](remote_node* n) noexcept {
    auto frame = promise::from_message(n);
    executor& owner = *n->target;
    frame.promise().owner = &owner;
    executor_access::adopt(owner, frame.promise().node);
    executor_access::schedule(owner, frame);
  };
  p.message.discard = [](remote_node* n) noexcept { promise::from_message(n).destroy(); };
  if (hand_off(p.message)) return true;
  h.destroy();
  return false;
}

}  // namespace detail

// Starts `t` on the executor running on this thread; throws std::logic_error if there is none.
template <class T>
void spawn(task<T> t) {
  executor& ex = detail::executor_access::current("uring::spawn");
  auto h = detail::spawn_body(std::move(t)).handle_;
  h.promise().owner = &ex;
  detail::executor_access::adopt(ex, h.promise().node);
  detail::executor_access::schedule(ex, h);
}

// Starts `t` on `target`, from any thread. Throws std::system_error(ESHUTDOWN), with `t` destroyed
// unstarted, if `target` no longer accepts work.
template <class T>
void spawn(executor& target, task<T> t) {
  if (executor::current() == &target) return spawn(std::move(t));
  const bool posted = detail::spawn_elsewhere(std::move(t), [&target](detail::remote_node& n) noexcept {
    n.target = &target;
    return detail::executor_access::try_post(target, n);
  });
  if (!posted)
    throw std::system_error(ESHUTDOWN, std::system_category(),
                            "uring::spawn: the target executor no longer accepts work");
}

// The same through a handle: ESHUTDOWN, with `t` destroyed unstarted, if the handle names no executor,
// or one that is gone or refuses work. A task the target accepted but never started because it shut
// down first is destroyed unstarted by the target (as for an executor&): spawn cannot report it.
template <class T>
void spawn(const executor_handle& target, task<T> t) {
  if (executor* cur = executor::current(); cur != nullptr && cur->handle() == target)
    return spawn(std::move(t));
  const std::uint64_t id = target.id();
  const bool posted = detail::spawn_elsewhere(
      std::move(t), [id](detail::remote_node& n) noexcept { return detail::post_to_handle(id, n); });
  if (!posted) detail::throw_handle_refused("uring::spawn");
}

}  // namespace uring
