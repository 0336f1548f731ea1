// uring/net/leased_recv.hpp — the awaitable behind tcp_stream::recv(pool), and the per-stream state it keeps.
//
// Provides: uring::net::recv_awaitable, uring::net::leased_receiver.
// Threads: await from a coroutine on the pool's executor; a stop request may come from any thread.
//
// A stream that receives with a pool keeps a small state between calls (leased_receiver): the multishot
// recv it armed, and chunks received before they were asked for. The state may outlive the stream: a
// request the kernel still holds keeps it, and it frees itself (returning any buffers) with the request's
// final completion. See uring/net/buffer_pool.hpp for the semantics.
#pragma once

#include <coroutine>
#include <memory>
#include <stop_token>

#include "uring/detail/state_awaitable.hpp"
#include "uring/net/buffer_pool.hpp"

namespace uring::detail {
struct recv_state;  // src/net/leased_recv.cpp
// For state_awaitable (see uring/detail/state_awaitable.hpp).
bool state_ready(const recv_state& s) noexcept;
void state_cancel(recv_state& s) noexcept;
executor* state_suspend(const std::shared_ptr<recv_state>& s, std::coroutine_handle<> h);
net::leased_buffer state_resume(recv_state& s);
}  // namespace uring::detail

namespace uring::net {

// What `co_await stream.recv(pool)` awaits: yields a leased_buffer (empty at end of stream); throws
// std::system_error("recv: ...") for an error, ECANCELED when its stop token (default: the awaiting
// task's) is requested. Movable until it is awaited.
using recv_awaitable = detail::state_awaitable<detail::recv_state, leased_buffer>;

// A stream's leased-receive state, created by its first recv(pool). Destroying it (with the stream) ends
// the armed request and returns the chunks nobody took.
class leased_receiver {
 public:
  leased_receiver() noexcept = default;
  leased_receiver(leased_receiver&& o) noexcept = default;
  leased_receiver& operator=(leased_receiver&& o) noexcept {
    if (this != &o) {
      abandon();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ~leased_receiver() { abandon(); }

  // The next chunk of `fd` in a buffer of `pool` (binding this receiver to both on first use).
  recv_awaitable recv(int fd, buffer_pool& pool, std::stop_token stop);

 private:
  void abandon() noexcept;
  std::shared_ptr<detail::recv_state> state_;
};

}  // namespace uring::net
