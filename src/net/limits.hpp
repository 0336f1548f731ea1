// limits.hpp — a deadline and a stop token applied to each step of a composite socket operation.
//
// Provides: net::limits. Threads: the awaiting coroutine's.
//
// A composite operation (write_all, read_exactly, connect_to) takes one timeout for the whole call: each
// step runs with a linked timeout of the time still left, so the total never exceeds it.
#pragma once

#include <cerrno>
#include <chrono>
#include <stop_token>
#include <utility>

#include "uring/error.hpp"
#include "uring/io.hpp"
#include "uring/task.hpp"

namespace uring::net {

class limits {
 public:
  limits(std::chrono::nanoseconds timeout, std::stop_token stop)
      : timed_(timeout > std::chrono::nanoseconds::zero()),
        deadline_(std::chrono::steady_clock::now() + timeout),
        stop_(std::move(stop)) {}

  // Awaits `op` (a nothrow operation) within what is left; ETIMEDOUT once the time is up.
  template <class Op>
  task<io_result> await(Op op) const {
    if (stop_.stop_possible()) op.set_stop_token(stop_);
    if (!timed_) co_return co_await std::move(op);
    auto left = deadline_ - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) co_return io_result{-ETIMEDOUT};
    co_return co_await std::move(op).linked_to(detail::to_timespec(left));
  }

  // For a step that takes its limits itself: whether a deadline applies, the time left (0 or less: none),
  // and the stop token.
  [[nodiscard]] bool timed() const noexcept { return timed_; }
  [[nodiscard]] std::chrono::nanoseconds left() const noexcept {
    return deadline_ - std::chrono::steady_clock::now();
  }
  [[nodiscard]] const std::stop_token& stop() const noexcept { return stop_; }

 private:
  bool timed_;
  std::chrono::steady_clock::time_point deadline_;
  std::stop_token stop_;
};

}  // namespace uring::net
