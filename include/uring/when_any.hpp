/// @file
/// uring/when_any.hpp — run tasks concurrently; the first to finish wins, the others are cancelled.
///
/// Provides: uring::when_any (a fixed set of tasks of any types, or a vector of tasks of one type).
/// Threads: await it from a coroutine on an executor; the children start on that thread, inline, in order.
///
/// `co_await when_any(a(), b())` yields a std::variant whose index() is the winner's position and whose
/// alternative is its result (void results become std::monostate). The first child to finish — with a
/// value or an exception — wins; the others are stopped through their stop token, which cancels their
/// pending operations (they typically end with ECANCELED), and are awaited before the co_await returns:
/// no child outlives it. A winner's exception is rethrown; the losers' outcomes are discarded.
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "uring/detail/when_child.hpp"
#include "uring/task.hpp"

namespace uring {

namespace detail {

template <class... T>
class [[nodiscard]] when_any_awaitable : public fixed_group<true, T...> {
 public:
  using result_type = std::variant<when_value_t<T>...>;
  using fixed_group<true, T...>::fixed_group;

  result_type await_resume() {
    std::size_t winner = this->finish();
    if (this->errors_[winner]) std::rethrow_exception(this->errors_[winner]);
    return take(winner, std::index_sequence_for<T...>{});
  }

 private:
  template <std::size_t... I>
  result_type take(std::size_t winner, std::index_sequence<I...>) {
    std::optional<result_type> out;
    ((I == winner ? (out.emplace(std::in_place_index<I>, std::move(*std::get<I>(this->slots_))), 0) : 0),
     ...);
    return std::move(*out);
  }
};

/// The range form: yields the winner's index and its result.
template <class T>
class [[nodiscard]] when_any_range_awaitable : public range_group<true, T> {
 public:
  explicit when_any_range_awaitable(std::vector<task<T>> tasks)
      : range_group<true, T>(check(std::move(tasks))) {}

  std::pair<std::size_t, when_value_t<T>> await_resume() {
    std::size_t winner = this->finish();
    if (this->errors_[winner]) std::rethrow_exception(this->errors_[winner]);
    return {winner, std::move(*this->slots_[winner])};
  }

 private:
  static std::vector<task<T>> check(std::vector<task<T>> tasks) {
    if (tasks.empty()) throw std::invalid_argument("uring::when_any: no tasks (nothing could win)");
    return tasks;
  }
};

}  // namespace detail

/// Runs `tasks` concurrently; the first to finish wins: yields a std::variant whose index() is the winner's
/// position and whose alternative is its result (void results become std::monostate). The others are
/// stopped through their stop token and awaited before the co_await returns; a winner's exception is
/// rethrown. Threads: await it from a coroutine on an executor; the children start on that thread.
template <class... T>
requires(sizeof...(T) > 0) detail::when_any_awaitable<T...> when_any(task<T>... tasks) {
  return detail::when_any_awaitable<T...>(std::move(tasks)...);
}

/// The same for any number of tasks of one type: yields {the winner's index, its result}. Throws
/// std::invalid_argument for an empty vector (no task could win).
template <class T>
detail::when_any_range_awaitable<T> when_any(std::vector<task<T>> tasks) {
  return detail::when_any_range_awaitable<T>(std::move(tasks));
}

}  // namespace uring
