// uring/detail/owner_call.hpp — run a small function on an executor's own thread and bring its result back.
//
// Provides: detail::owner_call<F>.
// Threads: await it from a coroutine on any executor; `fn` runs on the target's thread.
//
// For ring settings that only the ring's owner may change (IORING_SETUP_SINGLE_ISSUER). Awaited on the
// target itself it runs inline and never suspends; from elsewhere it makes one hop there and one back
// (MSG_RING or the mailbox), allocating nothing: the hand-off node lives in the awaitable. A target that
// no longer accepts work, or that shuts down before running it, makes the await throw
// std::system_error(ESHUTDOWN). Unlike submit_to, `fn` must be a plain function (no task).
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"

namespace uring::detail {

template <class F>
class [[nodiscard]] owner_call : private remote_node {
 public:
  using result_type = std::invoke_result_t<F&>;

  // A null target runs `fn` inline, wherever it is awaited.
  owner_call(executor* to, F fn) noexcept(std::is_nothrow_move_constructible_v<F>)
      : target_(to), fn_(std::move(fn)) {}
  owner_call(owner_call&&) = default;  // only until awaited

  bool await_ready() {
    if (target_ != nullptr && running_executor() != target_) return false;
    invoke();
    return true;
  }

  void await_suspend(std::coroutine_handle<> h) {
    waiter_ = h;
    home_ = &executor_access::current("uring: a call on another executor");
    run = [](remote_node* n) noexcept {
      auto* self = static_cast<owner_call*>(n);
      self->invoke();
      self->go_home(false);
    };
    // The target is shutting down: the call did not run; say so at home (the mailbox is safe here).
    discard = [](remote_node* n) noexcept {
      auto* self = static_cast<owner_call*>(n);
      self->error_ = std::make_exception_ptr(std::system_error(
          ESHUTDOWN, std::system_category(), "uring: the target executor shut down before the call ran"));
      self->go_home(true);
    };
    if (!executor_access::send(*target_, *this)) {
      throw std::system_error(ESHUTDOWN, std::system_category(),
                              "uring: the target executor no longer accepts work");
    }
  }

  result_type await_resume() {
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<result_type>) return std::move(*result_);
  }

 private:
  void invoke() noexcept {
    try {
      if constexpr (std::is_void_v<result_type>) {
        fn_();
      } else {
        result_.emplace(fn_());
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  // Back to the awaiting coroutine's executor. If that one refuses (it is shutting down), its shutdown
  // frees the waiting frame, and this awaitable with it.
  void go_home(bool by_mailbox) noexcept {
    run = [](remote_node* n) noexcept { static_cast<owner_call*>(n)->waiter_.resume(); };
    discard = [](remote_node*) noexcept {};
    if (by_mailbox) {
      (void)executor_access::try_post(*home_, *this);
    } else {
      (void)executor_access::send(*home_, *this);
    }
  }

  executor* target_;
  executor* home_ = nullptr;
  std::coroutine_handle<> waiter_;
  F fn_;
  std::optional<std::conditional_t<std::is_void_v<result_type>, char, result_type>> result_;
  std::exception_ptr error_;
};

}  // namespace uring::detail
