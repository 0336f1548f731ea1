// bench/bare_coroutine.hpp — the least a coroutine type can be, for the bare-coroutine floors: no result,
// no exception path, suspended at its end until its owner destroys the frame.
#pragma once

#include <coroutine>
#include <exception>
#include <type_traits>

namespace uring::bench {

// Lazy: it waits to be resumed; otherwise it runs at once, up to its first suspension.
template <bool Lazy>
struct bare_coroutine {
  struct promise_type {
    bare_coroutine get_return_object() noexcept {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::conditional_t<Lazy, std::suspend_always, std::suspend_never> initial_suspend() noexcept {
      return {};
    }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

using bare_task = bare_coroutine<false>;

}  // namespace uring::bench
