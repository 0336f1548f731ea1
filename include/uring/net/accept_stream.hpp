// uring/net/accept_stream.hpp — the connections of a listener, from one multishot accept.
//
// Provides: uring::net::accept_stream.
// Threads: use it from coroutines of one executor (the one whose ring holds the accept); a stop request
// for next() may come from any thread.
//
// One IORING_OP_ACCEPT with IORING_ACCEPT_MULTISHOT (kernel 5.19) delivers every new connection as its own
// completion, flagged IORING_CQE_F_MORE while the kernel keeps the request armed; connections that
// arrive while nobody awaits next() wait in the stream. When a completion comes without the flag the
// request has ended: after a connection the stream re-arms at once; after an error (EMFILE, ...)
// next() throws it and the following next() re-arms. The emulated backend keeps a poller armed in epoll
// and accepts everything that is waiting each time the listener is readable.
//
// The request is armed by the first next(), not before. cancel(), a stop request, or destroying the
// stream ends it: a waiting next() throws ECANCELED, and connections accepted but not taken are closed.
// next() has no timeout of its own: for a time limit, race it against uring::sleep_for with when_any
// (the loser's stop token cancels the accept; the stream re-arms on the following next()).
#pragma once

#include <coroutine>
#include <memory>
#include <optional>
#include <stop_token>

#include "uring/executor.hpp"
#include "uring/net/tcp_stream.hpp"

namespace uring::detail {
struct accept_state;  // src/net/accept_stream.cpp
}

namespace uring::net {

class accept_stream {
 public:
  // The connections of the listening socket `listen_fd` (not owned: it must outlive the stream).
  explicit accept_stream(int listen_fd);
  accept_stream(accept_stream&&) noexcept = default;
  accept_stream& operator=(accept_stream&&) noexcept = default;
  ~accept_stream();

  class [[nodiscard]] next_awaitable {
   public:
    next_awaitable(std::shared_ptr<detail::accept_state> s, std::stop_token t) noexcept
        : state_(std::move(s)), token_(std::move(t)) {}
    // Movable until it is awaited (g++ may move it into the coroutine frame).
    next_awaitable(next_awaitable&& o) noexcept : state_(std::move(o.state_)), token_(std::move(o.token_)) {}
    next_awaitable& operator=(next_awaitable&&) = delete;
    bool await_ready() const noexcept;
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> h) {
      if constexpr (requires { h.promise().stop_token(); }) {
        if (!token_.stop_possible()) token_ = h.promise().stop_token();
      }
      return suspend(h);
    }
    tcp_stream await_resume();

   private:
    struct on_stop {
      std::weak_ptr<detail::accept_state> state;  // it may be gone by the time a posted cancel runs
      executor* owner;
      void operator()() const noexcept;
    };
    bool suspend(std::coroutine_handle<> h);
    std::shared_ptr<detail::accept_state> state_;
    std::stop_token token_;
    std::optional<std::stop_callback<on_stop>> callback_;
  };

  // The next connection. Throws std::system_error("accept: ...") for an error of the request,
  // ECANCELED once the stream is cancelled or `stop` (default: the awaiting task's token) is requested.
  next_awaitable next(std::stop_token stop = {}) noexcept { return {state_, std::move(stop)}; }

  // Ends the multishot accept (owner thread): the next next() (or the waiting one) throws ECANCELED; the
  // one after it re-arms.
  void cancel() noexcept;

 private:
  std::shared_ptr<detail::accept_state> state_;
};

}  // namespace uring::net
