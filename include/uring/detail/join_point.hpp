// uring/detail/join_point.hpp — a one-shot "it has ended" that a coroutine on any executor, or plain
// threads, can wait for.
//
// Provides: detail::join_point.
// Threads: signal() from any thread, once; one coroutine at a time awaits wait(), any number of plain
// threads call wait_blocking().
//
// The state is one word: empty, ended, or the address of the one waiting coroutine's node. signal()
// swaps in "ended" and, if a coroutine waited, resumes it on its own executor (scheduled when that is
// the signalling thread's, else sent there). Blocked threads sleep on the word (std::atomic::wait). A
// coroutine's wait follows its stop token: a stop ends it with ECANCELED (so with_timeout applies).
#pragma once

#include <atomic>
#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>

#include "uring/detail/deadline.hpp"
#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"

namespace uring::detail {

class join_point {
  static constexpr std::uintptr_t kEmpty = 0;
  static constexpr std::uintptr_t kEnded = 1;

 public:
  class awaiter : private remote_node {
   public:
    awaiter(join_point& p, const char* what) noexcept : point_(p), what_(what) {}
    bool await_ready() const noexcept { return point_.ended(); }
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> h) {
      waiter_ = h;
      home_ = &executor_access::current(what_);
      run = [](remote_node* n) noexcept { static_cast<awaiter*>(n)->waiter_.resume(); };
      discard = [](remote_node*) noexcept {};  // the executor shuts down: it frees the frame, unresumed
      follow_.follow(h.promise());             // the task's stop token, and its deadline's (may allocate)
      std::uintptr_t expected = kEmpty;
      if (point_.state_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(this),
                                                std::memory_order_acq_rel)) {
        if (!follow_.empty()) stop_.emplace(follow_.token(), on_stop{this});  // may run at once
        return true;
      }
      if (expected == kEnded) return false;
      throw std::logic_error(std::string(what_) + ": already awaited by another coroutine");
    }
    // Throws std::system_error(ECANCELED) if the awaiting coroutine's stop token ended the wait first.
    void await_resume() {
      stop_.reset();  // waits for a callback running on another thread
      if (stopped_) throw std::system_error(ECANCELED, std::system_category(), what_);
    }

   private:
    friend class join_point;
    void wake() noexcept {
      if (running_executor() == home_) {
        executor_access::schedule(*home_, waiter_);
      } else {
        (void)executor_access::send(*home_, *this);  // refused: home shuts down and frees the frame
      }
    }
    // A stop takes the waiter back (if signal() has not taken it first) and resumes it, stopped.
    struct on_stop {
      awaiter* a;
      void operator()() const noexcept {
        auto me = reinterpret_cast<std::uintptr_t>(a);
        if (a->point_.state_.compare_exchange_strong(me, kEmpty, std::memory_order_acq_rel)) {
          a->stopped_ = true;
          a->wake();
        }
      }
    };

    join_point& point_;
    const char* what_;
    std::coroutine_handle<> waiter_;
    executor* home_ = nullptr;
    wait_stop follow_;
    std::optional<std::stop_callback<on_stop>> stop_;
    bool stopped_ = false;
  };

  void signal() noexcept {
    const std::uintptr_t old = state_.exchange(kEnded, std::memory_order_acq_rel);
    state_.notify_all();
    if (old > kEnded) reinterpret_cast<awaiter*>(old)->wake();
  }
  [[nodiscard]] bool ended() const noexcept { return state_.load(std::memory_order_acquire) == kEnded; }
  awaiter wait(const char* what) noexcept { return {*this, what}; }
  // Plain threads: blocks until signal(). On an executor's thread it could wait for work that thread
  // must run: std::logic_error naming `what`.
  void wait_blocking(const char* what) const {
    if (running_executor() != nullptr)
      throw std::logic_error(std::string(what) + ": would block an executor's thread (co_await it there)");
    for (std::uintptr_t v = state_.load(std::memory_order_acquire); v != kEnded;
         v = state_.load(std::memory_order_acquire))
      state_.wait(v, std::memory_order_acquire);
  }

 private:
  std::atomic<std::uintptr_t> state_{kEmpty};
};

}  // namespace uring::detail
