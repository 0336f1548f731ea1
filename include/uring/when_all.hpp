/// @file
/// uring/when_all.hpp — run tasks concurrently and wait for all of them.
///
/// Provides: uring::when_all (a fixed set of tasks of any types, or a vector of tasks of one type).
/// Threads: await it from a coroutine on an executor; the children start on that thread, inline, in order,
/// each running until its first suspension.
///
/// `co_await when_all(a(), b())` yields std::tuple of the results (void results become std::monostate).
/// If a child throws, the others are stopped through their stop token (their pending operations are
/// cancelled), all are awaited, and the first exception is rethrown: no child outlives the co_await.
/// A stop request on the awaiting coroutine's own token reaches every child.
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
class [[nodiscard]] when_all_range_awaitable : public range_group<false, T> {
 public:
  using range_group<false, T>::range_group;

  std::vector<when_value_t<T>> await_resume() {
    std::size_t failed = this->finish();
    if (failed != kNoChild) std::rethrow_exception(this->errors_[failed]);
    std::vector<when_value_t<T>> out;
    out.reserve(this->slots_.size());
    for (auto& s : this->slots_) out.push_back(std::move(*s));
    return out;
  }
};

}  // namespace detail

/// Runs `tasks` concurrently and waits for all of them: yields std::tuple of the results (void results
/// become std::monostate). If a child throws, the others are stopped through their stop token, all are
/// awaited, and the first exception is rethrown: no child outlives the co_await.
/// Threads: await it from a coroutine on an executor; the children start on that thread, inline, in order.
template <class... T>
requires(sizeof...(T) > 0) detail::when_all_awaitable<T...> when_all(task<T>... tasks) {
  return detail::when_all_awaitable<T...>(std::move(tasks)...);
}

/// The same for any number of tasks of one type: yields a vector of results in the tasks' order.
template <class T>
detail::when_all_range_awaitable<T> when_all(std::vector<task<T>> tasks) {
  return detail::when_all_range_awaitable<T>(std::move(tasks));
}

}  // namespace uring
