/// @file
/// uring/sync/wait_list.hpp — what the primitives of uring/sync/ share: a FIFO of waiters under a small
/// lock, each a coroutine on any executor or a blocked plain thread, and the awaitable a coroutine waits
/// with.
///
/// Provides: sync::detail::waiter, sync::detail::waitable, sync::detail::gate, sync::detail::wait_awaitable.
/// Threads: any. A waitable's state changes under its spin lock; a waiter is ended (granted or cancelled)
/// once, under that lock.
///
/// A coroutine's waiter lives in its frame (the awaitable) and a plain thread's on its stack: waiting
/// allocates nothing. Granting a coroutine posts its resumption to the executor it waits on (its mailbox:
/// it resumes there on a later turn, never on the granting thread); granting a thread sets the waiter's
/// own futex word and wakes it (futex(2)), so nothing spins. A waiter cancelled by its stop token leaves
/// the queue under the lock, so a grant and a cancel never both happen: a cancel that comes after the
/// grant loses, and the coroutine resumes with what it was granted. A waiter granted but never resumed (its
/// executor shut down, refusing the resumption or dropping it) gives what it got back: the next waiter
/// has it.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "uring/detail/io_awaitable.hpp"
#include "uring/detail/remote.hpp"
#include "uring/detail/spin_lock.hpp"
#include "uring/error.hpp"

struct timespec;

namespace uring {
class executor;
}

namespace uring::sync::detail {

class awaiter_base;

struct waiter : uring::detail::remote_node {
  enum class state : std::uint8_t { waiting, granted, cancelled };
  waiter* before = nullptr;  ///< the queue's links
  waiter* after = nullptr;
  executor* ex = nullptr;  ///< the coroutine's executor; null: a plain thread blocked on `word`
  std::coroutine_handle<> coro;
  std::atomic<std::uint32_t> word{0};  ///< a plain thread's: 1 once its wait ended
  state st = state::waiting;           ///< under the waitable's lock
};

/// A primitive, as its waiters see it: a lock, a FIFO of waiters, and what they wait for.
class waitable {
 public:
  waitable() = default;
  waitable(const waitable&) = delete;
  waitable& operator=(const waitable&) = delete;

  /// Under the lock: takes what a waiter waits for if it can be had now (a permit; an open gate).
  virtual bool take_locked() noexcept = 0;
  /// Under the lock: a waiter was granted and will never run: give back what it got.
  virtual void give_back_locked() noexcept = 0;

  /// A plain thread waits (blocking) until granted. block_for gives up after `d`: true if granted.
  void block() { (void)block_until(nullptr); }
  bool block_for(std::chrono::nanoseconds d);

  /// How many wait now (coroutines and threads).
  [[nodiscard]] std::size_t waiting() const noexcept;

  mutable uring::detail::spin_lock lock_;

 protected:
  ~waitable() = default;
  [[nodiscard]] bool has_waiters() const noexcept { return head_ != nullptr; }
  /// Under the lock: ends the first waiter's wait, granted (its coroutine's resumption posted, or its thread
  /// woken). False if its executor no longer takes work: the waiter got nothing (its frame is freed with
  /// that executor) and has left the queue all the same.
  bool grant_first_locked() noexcept;

 private:
  friend class awaiter_base;
  /// `deadline`: CLOCK_MONOTONIC, absolute; null: none.
  bool block_until(const timespec* deadline);
  void push_locked(waiter& w) noexcept;
  void remove_locked(waiter& w) noexcept;
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
  std::size_t waiting_ = 0;
};

/// What a wait yields when granted, for the primitives whose waits yield nothing.
struct no_value {
  void operator()() const noexcept {}
};

/// The part of the awaitable that does not depend on its result (src/sync/wait_list.cpp).
class awaiter_base : protected waiter {
 public:
  awaiter_base(waitable& target, std::stop_token token, const char* name) noexcept
      : target_(target), token_(std::move(token)), name_(name) {}
  awaiter_base(const awaiter_base&) = delete;
  awaiter_base& operator=(const awaiter_base&) = delete;
  ~awaiter_base();

  bool await_ready() noexcept;
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    if constexpr (uring::detail::has_stop_token<Promise>) {
      if (!token_.stop_possible()) {  // none of its own: the task's, and its deadline's
        follow_.follow(h.promise());
        token_ = follow_.token();
      }
    }
    return suspend(h);
  }

 protected:
  /// After the resumption: true if granted, false if cancelled.
  bool finish() noexcept;
  [[noreturn]] void throw_cancelled() const;

  waitable& target_;
  std::stop_token token_;
  uring::detail::wait_stop follow_;
  const char* name_;

 private:
  struct on_stop {
    awaiter_base* self;
    void operator()() const noexcept;
  };
  bool suspend(std::coroutine_handle<> h);

  bool queued_ = false;   ///< it joined the queue (else it took at once, or was stopped before)
  bool granted_ = false;  ///< the result, once known
  bool resumed_ = false;  ///< finish() ran
  std::optional<std::stop_callback<on_stop>> callback_;
};

/// What a co_await on a primitive yields: Make() once granted (void, or the mutex's lock), or an
/// std::system_error(ECANCELED) naming the wait if its stop token was triggered first. `.nothrow()`
/// yields uring::io_result (res 0 or -ECANCELED) where Make yields void, else Make's value or an empty one.
template <class Make, bool Throw = true>
class [[nodiscard]] wait_awaitable : public awaiter_base {
 public:
  wait_awaitable(waitable& target, std::stop_token token, const char* name, Make make) noexcept
      : awaiter_base(target, std::move(token), name), make_(std::move(make)) {}

  auto await_resume() {
    const bool granted = finish();
    using value = decltype(make_());
    if constexpr (Throw) {
      if (!granted) throw_cancelled();
      return make_();
    } else if constexpr (std::is_void_v<value>) {
      if (granted) make_();
      return io_result{granted ? 0 : -ECANCELED};
    } else {
      return granted ? make_() : value{};
    }
  }

  /// The same wait, yielding rather than throwing (not after it was awaited).
  wait_awaitable<Make, false> nothrow() && noexcept requires Throw {
    return wait_awaitable<Make, false>(target_, std::move(token_), name_, std::move(make_));
  }
  /// The same wait, following `t` (see uring::with_stop_token).
  wait_awaitable stopped_by(std::stop_token t) && noexcept {
    return wait_awaitable(target_, std::move(t), name_, std::move(make_));
  }

 private:
  Make make_;
};

/// A waitable that is open or closed: open, every waiter is granted and every wait passes at once (a
/// latch at zero, an event that is set).
class gate : public waitable {
 public:
  using wait_awaitable = detail::wait_awaitable<no_value>;

  explicit gate(const char* wait_name) noexcept : wait_name_(wait_name) {}

  bool take_locked() noexcept final { return open_; }
  void give_back_locked() noexcept final {}  ///< an open gate is not used up

  /// Awaiting ends when the gate is open.
  wait_awaitable async_wait() noexcept { return {*this, std::stop_token{}, wait_name_, {}}; }
  /// Blocks this thread until the gate is open.
  void wait() { block(); }
  /// Blocks at most `d`; true if the gate opened.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) {
    return block_for(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  }

 protected:
  ~gate() = default;
  /// Under the lock: opens the gate and grants every waiter.
  void open_locked() noexcept;
  void close_locked() noexcept { open_ = false; }
  [[nodiscard]] bool open_now() const noexcept { return open_; }

 private:
  const char* wait_name_;
  bool open_ = false;
};

}  // namespace uring::sync::detail

namespace uring {

/// A wait on a sync:: primitive (async_lock, async_acquire, async_wait), cancelled (ECANCELED) when
/// `token` is stopped, from any thread, in place of the awaiting coroutine's token.
template <class Make, bool Throw>
sync::detail::wait_awaitable<Make, Throw> with_stop_token(sync::detail::wait_awaitable<Make, Throw>&& w,
                                                          std::stop_token token) noexcept {
  return std::move(w).stopped_by(std::move(token));
}

}  // namespace uring
