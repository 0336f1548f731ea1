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
class [[nodiscard]] when_any_awaitable {
 public:
  using result_type = std::variant<when_value_t<T>...>;

  explicit when_any_awaitable(task<T>... tasks) : shared_(sizeof...(T)) {
    make_children(std::index_sequence_for<T...>{}, std::move(tasks)...);
  }
  when_any_awaitable(const when_any_awaitable&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    return start_group(parent, shared_, children_, link_);
  }
  result_type await_resume() {
    link_.reset();
    std::size_t winner = shared_.first.load(std::memory_order_acquire);
    if (errors_[winner]) std::rethrow_exception(errors_[winner]);
    return take(winner, std::index_sequence_for<T...>{});
  }

 private:
  template <std::size_t... I>
  void make_children(std::index_sequence<I...>, task<T>... tasks) {
    ((children_[I] = run_child(std::move(tasks), std::get<I>(slots_), errors_[I], shared_, I, true)), ...);
  }
  template <std::size_t... I>
  result_type take(std::size_t winner, std::index_sequence<I...>) {
    std::optional<result_type> out;
    ((I == winner ? (out.emplace(std::in_place_index<I>, std::move(*std::get<I>(slots_))), 0) : 0), ...);
    return std::move(*out);
  }

  when_shared shared_;
  std::tuple<std::optional<when_value_t<T>>...> slots_;
  std::array<std::exception_ptr, sizeof...(T)> errors_;
  std::array<when_child, sizeof...(T)> children_;
  parent_stop_link link_;
};

}  // namespace detail

template <class... T>
  requires(sizeof...(T) > 0)
detail::when_any_awaitable<T...> when_any(task<T>... tasks) {
  return detail::when_any_awaitable<T...>(std::move(tasks)...);
}

}  // namespace uring
