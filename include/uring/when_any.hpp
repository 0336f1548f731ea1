// uring/when_any.hpp — run tasks concurrently; the first to finish wins, the others are cancelled.
//
// Provides: uring::when_any.
// Threads: await it from a coroutine on an executor; the children start on that thread, inline, in order.
//
// `co_await when_any(a(), b())` yields a std::variant whose index() is the winner's position and whose
// alternative is its result (void results become std::monostate). The first child to finish — with a
// value or an exception — wins; the others are stopped through their stop token, which cancels their
// pending operations (they typically end with ECANCELED), and are awaited before the co_await returns:
// no child outlives it. A winner's exception is rethrown; the losers' outcomes are discarded.
// Typical use, a deadline on a whole task: when_any(work(), [](auto d) -> task<void> { co_await
// uring::sleep_for(d); }(1s)).
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>

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

}  // namespace detail

template <class... T>
requires(sizeof...(T) > 0) detail::when_any_awaitable<T...> when_any(task<T>... tasks) {
  return detail::when_any_awaitable<T...>(std::move(tasks)...);
}

}  // namespace uring
