/// @file
/// uring/sync_wait.hpp — run a task to completion from ordinary code.
///
/// Provides: uring::sync_wait.
/// Threads: call it from a thread that is not running an executor (std::logic_error otherwise: blocking
/// inside a coroutine would stall that executor's whole loop).
///
/// sync_wait(t) builds a temporary executor with default options on the calling thread, runs `t` on it and
/// returns t's result (or rethrows its exception). For long-lived programs, construct an executor and call
/// executor::run yourself.
#pragma once

#include <stdexcept>
#include <utility>

#include "uring/executor.hpp"
#include "uring/task.hpp"

namespace uring {

/// Runs `t` to completion on a temporary executor (default options) on the calling thread and returns its
/// result, or rethrows its exception. Threads: a thread that is not running an executor
/// (std::logic_error otherwise: blocking inside a coroutine would stall that executor's whole loop).
template <class T>
T sync_wait(task<T> t) {
  if (executor::current() != nullptr) {
    throw std::logic_error(
        "uring::sync_wait: called on a thread whose executor is running; co_await instead");
  }
  executor ex;
  return ex.run(std::move(t));
}

}  // namespace uring
