// uring/spawn.hpp — start a task that nobody awaits.
//
// Provides: uring::spawn.
// Threads: spawn(t) is called from a coroutine (or any code) running on an executor's thread, while that
// executor runs; the task starts on a later turn of the same loop.
//
// The executor owns the spawned frame until it finishes. An exception escaping it shuts the executor down
// and is rethrown from executor::run() (as Asio's co_spawn does with `detached`): errors are never lost.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

#include "uring/executor.hpp"
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

    spawned get_return_object() noexcept {
      auto h = std::coroutine_handle<promise_type>::from_promise(*this);
      node.frame = h;
      return spawned{h};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    struct final_awaiter {
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> h) const noexcept {
        executor_access::release(*h.promise().owner, h.promise().node);
        h.destroy();
      }
      void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { executor_access::fail(*owner, std::current_exception()); }
  };

  explicit spawned(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

template <class T>
spawned spawn_body(task<T> t) {
  co_await std::move(t);
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

}  // namespace uring
