// sync/wait_list.cpp — the waiting side of uring/sync/ (uring/sync/wait_list.hpp): the FIFO, granting a
// coroutine (posted to its executor) or a thread (its futex word), blocking a thread, and the awaitable's
// suspension, cancellation and end.
#include "uring/sync/wait_list.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

#include "ops/futex_calls.hpp"
#include "uring/executor.hpp"
#include "uring/futex.hpp"

namespace uring::sync::detail {

namespace {

void resume_coroutine(uring::detail::remote_node* n) noexcept { static_cast<waiter*>(n)->coro.resume(); }
// A shutting-down executor drops the resumption: the frame is freed with it, and the awaitable's
// destructor gives back what was granted.
void drop(uring::detail::remote_node*) noexcept {}

// Under the lock: ends `w`'s wait as `how`. For a coroutine, false if its executor refuses the resumption.
bool end_wait(waiter& w, waiter::state how) noexcept {
  w.st = how;
  if (w.ex != nullptr) return uring::detail::executor_access::try_post(*w.ex, w);
  // Woken under the lock, and the thread takes the lock once before it returns: its word outlives this.
  w.word.store(1, std::memory_order_release);
  (void)uring::detail::futex_wake_all_kinds(uring::detail::word_address(w.word), 1, futex_match_any);
  return true;
}

}  // namespace

void waitable::push_locked(waiter& w) noexcept {
  w.st = waiter::state::waiting;
  w.after = nullptr;
  w.before = tail_;
  if (tail_ != nullptr) {
    tail_->after = &w;
  } else {
    head_ = &w;
  }
  tail_ = &w;
  ++waiting_;
}

void waitable::remove_locked(waiter& w) noexcept {
  (w.before != nullptr ? w.before->after : head_) = w.after;
  (w.after != nullptr ? w.after->before : tail_) = w.before;
  w.before = w.after = nullptr;
  --waiting_;
}

std::size_t waitable::waiting() const noexcept {
  std::lock_guard lock(lock_);
  return waiting_;
}

bool waitable::grant_first_locked() noexcept {
  waiter& w = *head_;
  remove_locked(w);
  if (end_wait(w, waiter::state::granted)) return true;
  w.st = waiter::state::cancelled;  // nothing posted: the frame goes with its executor, owing nothing
  return false;
}

void gate::open_locked() noexcept {
  open_ = true;
  while (has_waiters()) (void)grant_first_locked();
}

bool waitable::block_for(std::chrono::nanoseconds d) {
  timespec deadline{};
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  const auto ns = std::max<std::int64_t>(0, d.count()) + deadline.tv_nsec;
  deadline.tv_sec += static_cast<time_t>(ns / 1'000'000'000);
  deadline.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return block_until(&deadline);
}

bool waitable::block_until(const timespec* deadline) {
  waiter w;
  {
    std::lock_guard lock(lock_);
    if (take_locked()) return true;
    push_locked(w);
  }
  for (;;) {
    if (w.word.load(std::memory_order_acquire) != 0) break;
    const int rc =
        uring::detail::futex_wait_kernel(uring::detail::word_address(w.word), 0, futex_match_any, deadline);
    if (rc != -ETIMEDOUT) continue;  // woken, EAGAIN (granted meanwhile) or a signal: look again
    std::lock_guard lock(lock_);
    if (w.st == waiter::state::waiting) {
      remove_locked(w);
      return false;
    }
    break;  // granted as the time ran out
  }
  std::lock_guard lock(lock_);  // the granter's wake, made under the lock, is over: `w` may go
  return w.st == waiter::state::granted;
}

awaiter_base::~awaiter_base() {
  callback_.reset();
  if (!queued_ || resumed_) return;
  // Destroyed while it waits, or granted but never resumed (its executor shut down).
  std::lock_guard lock(target_.lock_);
  if (st == state::waiting) {
    target_.remove_locked(*this);
    st = state::cancelled;
  } else if (st == state::granted) {
    target_.give_back_locked();
  }
}

bool awaiter_base::await_ready() noexcept {
  std::lock_guard lock(target_.lock_);
  granted_ = target_.take_locked();
  return granted_;
}

bool awaiter_base::suspend(std::coroutine_handle<> h) {
  ex = executor::current();
  if (ex == nullptr)
    throw std::logic_error(std::string(name_) + ": co_await needs an executor running on this thread");
  coro = h;
  run = &resume_coroutine;
  discard = &drop;
  {
    std::lock_guard lock(target_.lock_);
    if (target_.take_locked()) {
      granted_ = true;
      return false;
    }
    if (token_.stop_requested()) return false;  // cancelled before it waited
    target_.push_locked(*this);
    queued_ = true;
  }
  // From here the coroutine may be resumed as soon as this returns (its executor runs the posted node on
  // this thread, later). A stop already requested runs on_stop now.
  if (token_.stop_possible()) callback_.emplace(token_, on_stop{this});
  return true;
}

void awaiter_base::on_stop::operator()() const noexcept {
  std::lock_guard lock(self->target_.lock_);
  if (self->st != state::waiting) return;  // granted first: the grant stands
  self->target_.remove_locked(*self);
  (void)end_wait(*self, state::cancelled);  // refused: the frame is freed with its executor
}

bool awaiter_base::finish() noexcept {
  callback_.reset();  // waits for an on_stop running on another thread
  if (queued_) granted_ = st == state::granted;
  resumed_ = true;
  return granted_;
}

void awaiter_base::throw_cancelled() const {
  throw std::system_error(ECANCELED, std::system_category(), name_);
}

}  // namespace uring::sync::detail
