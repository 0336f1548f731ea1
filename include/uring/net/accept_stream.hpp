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

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <stop_token>

#include "uring/detail/state_awaitable.hpp"
#include "uring/executor.hpp"
#include "uring/net/tcp_stream.hpp"

namespace uring::detail {
struct accept_state;  // src/net/accept_stream.cpp
// For state_awaitable (see uring/detail/state_awaitable.hpp).
bool state_ready(const accept_state& s) noexcept;
void state_cancel(accept_state& s, std::uint64_t wait) noexcept;
std::uint64_t state_wait(const accept_state& s) noexcept;
executor* state_suspend(const std::shared_ptr<accept_state>& s, std::coroutine_handle<> h, std::int64_t deadline);
net::tcp_stream state_resume(accept_state& s);
}

namespace uring::net {

class accept_stream {
 public:
  // The connections of the listening socket `listen_fd` (not owned: it must outlive the stream).
  explicit accept_stream(int listen_fd);
  accept_stream(accept_stream&&) noexcept = default;
  accept_stream& operator=(accept_stream&&) noexcept = default;
  ~accept_stream();

  using next_awaitable = detail::state_awaitable<detail::accept_state, tcp_stream>;

  // The next connection. Throws std::system_error("accept: ...") for an error of the request,
  // ECANCELED once the stream is cancelled or `stop` (default: the awaiting task's token) is requested,
  // ETIMEDOUT once the time given by uring::with_timeout(next(), d) has passed. A timeout ends only that
  // wait: the multishot accept keeps running and connections that arrive meanwhile wait for next().
  next_awaitable next(std::stop_token stop = {}) noexcept { return {state_, std::move(stop)}; }

  // Ends the multishot accept (owner thread): the next next() (or the waiting one) throws ECANCELED; the
  // one after it re-arms.
  void cancel() noexcept;

 private:
  std::shared_ptr<detail::accept_state> state_;
};

}  // namespace uring::net

namespace uring {

// accept_stream::next() failing with ETIMEDOUT if no connection has come within `d`.
template <class Rep, class Period>
net::accept_stream::next_awaitable with_timeout(net::accept_stream::next_awaitable op,
                                                std::chrono::duration<Rep, Period> d) noexcept {
  op.set_timeout(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  return op;
}

}  // namespace uring
