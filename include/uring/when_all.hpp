// uring/when_all.hpp — run tasks concurrently and wait for all of them.
//
// Provides: uring::when_all (a fixed set of tasks of any types, or a vector of tasks of one type).
// Threads: await it from a coroutine on an executor; the children start on that thread, inline, in order,
// each running until its first suspension.
//
// `co_await when_all(a(), b())` yields std::tuple of the results (void results become std::monostate).
// If a child throws, the others are stopped through their stop token (their pending operations are
// cancelled), all are awaited, and the first exception is rethrown: no child outlives the co_await.
// A stop request on the awaiting coroutine's own token reaches every child.
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "uring/detail/when_child.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {

template <class... T>
class [[nodiscard]] when_all_awaitable : public fixed_group<false, T...> {
 public:
  using fixed_group<false, T...>::fixed_group;

  std::tuple<when_value_t<T>...> await_resume() {
    std::size_t failed = this->finish();
    if (failed != kNoChild) std::rethrow_exception(this->errors_[failed]);
    return take(std::index_sequence_for<T...>{});
  }

 private:
  template <std::size_t... I>
  std::tuple<when_value_t<T>...> take(std::index_sequence<I...>) {
    return std::tuple<when_value_t<T>...>(std::move(*std::get<I>(this->slots_))...);
  }
};

template <class T>
class [[nodiscard]] when_all_range_awaitable {
 public:
  explicit when_all_range_awaitable(std::vector<task<T>> tasks)
      : shared_(tasks.size()), slots_(tasks.size()), errors_(tasks.size()) {
    children_.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      children_.push_back(run_child(std::move(tasks[i]), slots_[i], errors_[i], shared_, i, false));
    }
  }
  when_all_range_awaitable(const when_all_range_awaitable&) = delete;

  bool await_ready() const noexcept { return children_.empty(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    return start_group(parent, shared_, children_, link_);
  }
  std::vector<when_value_t<T>> await_resume() {
    link_.reset();
    std::size_t failed = shared_.first.load(std::memory_order_acquire);
    if (failed != kNoChild) std::rethrow_exception(errors_[failed]);
    std::vector<when_value_t<T>> out;
    out.reserve(slots_.size());
    for (auto& s : slots_) out.push_back(std::move(*s));
    return out;
  }

 private:
  when_shared shared_;
  std::vector<std::optional<when_value_t<T>>> slots_;
  std::vector<std::exception_ptr> errors_;
  std::vector<when_child> children_;
  parent_stop_link link_;
};

}  // namespace detail

template <class... T>
requires(sizeof...(T) > 0) detail::when_all_awaitable<T...> when_all(task<T>... tasks) {
  return detail::when_all_awaitable<T...>(std::move(tasks)...);
}

// The same for any number of tasks of one type: yields a vector of results in the tasks' order.
template <class T>
detail::when_all_range_awaitable<T> when_all(std::vector<task<T>> tasks) {
  return detail::when_all_range_awaitable<T>(std::move(tasks));
}

}  // namespace uring
