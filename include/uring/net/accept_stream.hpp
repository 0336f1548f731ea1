/// @file
/// uring/net/accept_stream.hpp — the connections of a listener, from one multishot accept.
///
/// Provides: uring::net::accept_stream, and uring::net::accept_direct_stream (each connection in a slot
/// of the executor's table of direct descriptors, uring/direct.hpp).
/// Threads: use it from coroutines of one executor (the one whose ring holds the accept); a stop request
/// for next() may come from any thread.
///
/// One IORING_OP_ACCEPT with IORING_ACCEPT_MULTISHOT (kernel 5.19) delivers every new connection as its own
/// completion, flagged IORING_CQE_F_MORE while the kernel keeps the request armed; connections that
/// arrive while nobody awaits next() wait in the stream. When a completion comes without the flag the
/// request has ended: after a connection the stream re-arms at once; after an error (EMFILE, ...)
/// next() throws it and the following next() re-arms. The emulated backend keeps a poller armed in epoll
/// and accepts everything that is waiting each time the listener is readable.
///
/// accept_direct_stream is the same with IORING_FILE_INDEX_ALLOC: next() yields the slot each connection
/// was put in; no plain fd is made. A full table closes the connection and ends the request (next()
/// throws ENFILE; the following next() re-arms); an executor without a table: ENXIO. Slots accepted but
/// not taken are emptied when the stream goes.
///
/// The request is armed by the first next(), not before. cancel(), a stop request, or destroying the
/// stream ends it: a waiting next() throws ECANCELED, and connections accepted but not taken are closed.
/// with_timeout(next(), d) bounds one wait (the request keeps running), and with_stop_token(next(), t)
/// gives the wait a token of its own in place of the awaiting task's.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <stop_token>

#include "uring/detail/state_awaitable.hpp"
#include "uring/direct.hpp"
#include "uring/executor.hpp"
#include "uring/net/tcp_stream.hpp"

namespace uring::detail {
struct accept_state;         ///< src/net/accept_stream.cpp
struct accept_direct_state;  ///< the same, into slots
/// For state_awaitable (see uring/detail/state_awaitable.hpp).
bool state_ready(const accept_state& s) noexcept;
void state_cancel(accept_state& s, std::uint64_t wait) noexcept;
std::uint64_t state_wait(const accept_state& s) noexcept;
executor* state_suspend(const std::shared_ptr<accept_state>& s, std::coroutine_handle<> h,
                        std::int64_t deadline);
net::tcp_stream state_resume(accept_state& s);
/// The same for the stream into slots (its state type is incomplete here, so it has its own overloads).
bool state_ready(const accept_direct_state& s) noexcept;
void state_cancel(accept_direct_state& s, std::uint64_t wait) noexcept;
std::uint64_t state_wait(const accept_direct_state& s) noexcept;
executor* state_suspend(const std::shared_ptr<accept_direct_state>& s, std::coroutine_handle<> h,
                        std::int64_t deadline);
direct_fd state_resume(accept_direct_state& s);
}  // namespace uring::detail

namespace uring::net {

/// The connections of a listener, from one multishot accept (IORING_ACCEPT_MULTISHOT, kernel 5.19; the
/// emulated backend keeps a poller armed in epoll). Result: tcp_stream (accept_stream) or direct_fd
/// (accept_direct_stream).
///
/// Threads: use it from coroutines of one executor (the one whose ring holds the accept); a stop request
/// for next() may come from any thread.
template <class Result>
class basic_accept_stream {
  using state_type = std::conditional_t<std::is_same_v<Result, direct_fd>, detail::accept_direct_state,
                                        detail::accept_state>;

 public:
  /// The connections of the listening socket `listen_fd` (not owned: it must outlive the stream).
  explicit basic_accept_stream(int listen_fd);
  ///@{
  /// Moves the stream; the moved-from one holds nothing.
  basic_accept_stream(basic_accept_stream&&) noexcept = default;
  basic_accept_stream& operator=(basic_accept_stream&&) noexcept = default;
  ///@}
  /// Ends the multishot accept.
  ~basic_accept_stream();

  /// What next() returns: awaited, it yields the next connection.
  using next_awaitable = detail::state_awaitable<state_type, Result>;

  /// The next connection. Throws std::system_error("accept: ...") for an error of the request,
  /// ECANCELED once the stream is cancelled or the stop token (the awaiting task's, or with_stop_token's)
  /// is requested, ETIMEDOUT once the time given by uring::with_timeout(next(), d) has passed. A timeout
  /// ends only that wait: the multishot accept keeps running and connections that arrive meanwhile wait
  /// for next().
  next_awaitable next() noexcept { return {state_, std::stop_token{}}; }

  /// Ends the multishot accept (owner thread): the next next() (or the waiting one) throws ECANCELED; the
  /// one after it re-arms.
  void cancel() noexcept;

 private:
  std::shared_ptr<state_type> state_;
};

/// The connections of a listener as tcp_stream.
using accept_stream = basic_accept_stream<tcp_stream>;
/// The connections of a listener, each in a slot of the executor's table of direct descriptors
/// (uring/direct.hpp).
using accept_direct_stream = basic_accept_stream<direct_fd>;
extern template class basic_accept_stream<tcp_stream>;
extern template class basic_accept_stream<direct_fd>;

}  // namespace uring::net

namespace uring {

/// accept_stream::next() (or accept_direct_stream's) failing with ETIMEDOUT if no connection has come
/// within `d`. (A ticker's next() is a state_awaitable too, but takes no time-out: uring/ticker.hpp.)
template <class State, class Result, class Rep, class Period>
requires detail::state_times_out<State> detail::state_awaitable<State, Result> with_timeout(
    detail::state_awaitable<State, Result> op, std::chrono::duration<Rep, Period> d)
noexcept {
  op.set_timeout(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  return op;
}

}  // namespace uring
