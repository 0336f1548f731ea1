// uring/detail/when_child.hpp — the machinery shared by when_all and when_any.
//
// Provides: detail::when_shared, detail::when_child, detail::run_child, detail::when_value_t,
// detail::group_base, detail::fixed_group, detail::range_group.
// Threads: children may finish on any thread (a child may hop executors); the counter is atomic and the
// last child to finish resumes the parent by symmetric transfer.
//
// Each child is a small coroutine that awaits one task, stores its value or exception, and counts down.
// Its promise carries the group's stop token, which the awaited task inherits (uring/task.hpp), so
// stopping the group cancels every operation the children are waiting on.
#pragma once

#include <array>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <limits>
#include <optional>
#include <stop_token>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "uring/task.hpp"

namespace uring::detail {

// What a child's slot holds: void results become std::monostate.
template <class T>
using when_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

inline constexpr std::size_t kNoChild = std::numeric_limits<std::size_t>::max();

struct when_shared {
  explicit when_shared(std::size_t children) : remaining(children + 1) {}  // +1: the parent's own start-up
  std::atomic<std::size_t> remaining;
  std::coroutine_handle<> parent;
  std::stop_source stop;
  deadline* limit = nullptr;                 // the parent's (with_timeout): its children live under it too
  std::atomic<std::size_t> first{kNoChild};  // when_any: the winner; when_all: the first to fail

  // The parent's last step of start-up. True if it must suspend (some child is still running).
  bool parent_should_suspend() noexcept { return remaining.fetch_sub(1, std::memory_order_acq_rel) != 1; }
  // Records `index` as first if nobody was, and stops the others.
  void claim_first(std::size_t index) noexcept {
    std::size_t expected = kNoChild;
    if (first.compare_exchange_strong(expected, index, std::memory_order_acq_rel)) stop.request_stop();
  }
};

class when_child {
 public:
  struct promise_type {
    when_shared* shared = nullptr;
    std::stop_token token;

    when_child get_return_object() noexcept {
      return when_child(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    struct final_awaiter {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) const noexcept {
        when_shared& s = *h.promise().shared;
        if (s.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) return s.parent;
        return std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // run_child catches everything
    [[nodiscard]] const std::stop_token& stop_token() const noexcept { return token; }
    [[nodiscard]] detail::deadline* deadline() const noexcept { return shared->limit; }
  };

  when_child() = default;
  explicit when_child(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  when_child(when_child&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  when_child& operator=(when_child&& o) noexcept {
    if (this != &o) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  when_child(const when_child&) = delete;
  ~when_child() {
    if (handle_) handle_.destroy();
  }

  void start(when_shared& shared) {
    handle_.promise().shared = &shared;
    handle_.promise().token = shared.stop.get_token();
    handle_.resume();
  }

 private:
  std::coroutine_handle<promise_type> handle_;
};

// Awaits `t`, keeps its outcome in `slot` / `error`. With `first_wins` (when_any) the first child to
// finish claims the group; otherwise (when_all) the first to fail does. Either way the rest are stopped.
template <class T>
when_child run_child(task<T> t, std::optional<when_value_t<T>>& slot, std::exception_ptr& error,
                     when_shared& shared, std::size_t index, bool first_wins) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      slot.emplace();
    } else {
      slot.emplace(co_await std::move(t));
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (first_wins || error) shared.claim_first(index);
}

// Forwards a stop request of the awaiting coroutine's own token to the group.
struct stop_forwarder {
  when_shared* shared;
  void operator()() const noexcept { shared->stop.request_stop(); }
};
using parent_stop_link = std::optional<std::stop_callback<stop_forwarder>>;

// The parent's side of starting a group: remember it, tie its stop token to the group's, start every
// child. Returns whether the parent must suspend.
template <class Promise, class Children>
bool start_group(std::coroutine_handle<Promise> parent, when_shared& shared, Children& children,
                 parent_stop_link& link) {
  shared.parent = parent;
  shared.limit = deadline_of(parent.promise());
  if constexpr (requires { parent.promise().stop_token(); }) {
    const std::stop_token& own = parent.promise().stop_token();
    if (own.stop_possible()) link.emplace(own, stop_forwarder{&shared});
  }
  for (auto& child : children) child.start(shared);
  return shared.parent_should_suspend();
}

// What every group shares: the parent's side of starting the children and of finishing.
// `Children` is an array (a fixed set) or a vector (a range) of when_child.
template <class Children>
class group_base {
 public:
  explicit group_base(std::size_t n) : shared_(n) {}
  group_base(const group_base&) = delete;

  bool await_ready() const noexcept { return children_.empty(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    return start_group(parent, shared_, children_, link_);
  }

 protected:
  // The child that claimed the group (kNoChild if none), once all have finished.
  std::size_t finish() noexcept {
    link_.reset();
    return shared_.first.load(std::memory_order_acquire);
  }

  when_shared shared_;
  Children children_;

 private:
  parent_stop_link link_;
};

// A fixed set of children of any types: what when_all and when_any share. `FirstWins`: the first child
// to finish claims the group (when_any); otherwise the first to fail does (when_all).
template <bool FirstWins, class... T>
class fixed_group : public group_base<std::array<when_child, sizeof...(T)>> {
 public:
  explicit fixed_group(task<T>... tasks) : group_base<std::array<when_child, sizeof...(T)>>(sizeof...(T)) {
    make_children(std::index_sequence_for<T...>{}, std::move(tasks)...);
  }

 protected:
  std::tuple<std::optional<when_value_t<T>>...> slots_;
  std::array<std::exception_ptr, sizeof...(T)> errors_;

 private:
  template <std::size_t... I>
  void make_children(std::index_sequence<I...>, task<T>... tasks) {
    ((this->children_[I] =
          run_child(std::move(tasks), std::get<I>(slots_), errors_[I], this->shared_, I, FirstWins)),
     ...);
  }
};

// Any number of children of one type: what the range forms of when_all and when_any share.
template <bool FirstWins, class T>
class range_group : public group_base<std::vector<when_child>> {
 public:
  explicit range_group(std::vector<task<T>> tasks)
      : group_base<std::vector<when_child>>(tasks.size()), slots_(tasks.size()), errors_(tasks.size()) {
    this->children_.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      this->children_.push_back(
          run_child(std::move(tasks[i]), slots_[i], errors_[i], this->shared_, i, FirstWins));
    }
  }

 protected:
  std::vector<std::optional<when_value_t<T>>> slots_;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace uring::detail
