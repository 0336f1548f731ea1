/// @file
/// uring/net/send_queue.hpp — a connection's outgoing bytes, queued without waiting and sent in bundles.
///
/// Provides: uring::net::send_queue.
/// Threads: a queue belongs to the executor it was made on: push, flush and destroy it on that thread; a
/// stop request may come from any thread.
///
/// `co_await q.push(bytes)` copies the bytes into the queue's buffers (count of size bytes each, made once)
/// and makes sure one send is in flight; what is pushed while it is in flight leaves with the next send,
/// so many small messages cost one send operation, not one each, and leave in the order pushed. When the
/// buffers are full a push waits for a send to free some (back-pressure: the queue never holds more than
/// count * size bytes); a message that fits the queue is copied whole or not at all, a larger one in
/// pieces as room comes. `co_await q.flush()` waits until everything pushed before it has been sent (is in
/// the socket). Exactly one send is in flight per queue at any time, which is what keeps the order.
///
/// Natively (kernel 6.10+, probed as send_bundle) the buffers form a provided-buffer ring of the queue's own,
/// and each send is one IORING_OP_SEND with IORING_RECVSEND_BUNDLE that takes every buffer queued in it.
/// Elsewhere (the emulated backend, older kernels, URING_DISABLE=send_bundle or options::use_ring = false)
/// each send is one sendmsg of every queued buffer: the same API, order, bounds and errors.
///
/// Errors: a failed send (EPIPE, ECONNRESET, ...) sticks: the next push or flush throws
/// std::system_error("send_queue: ...") and so does every one after it, and nothing more is sent. A wait
/// (a push for room, a flush) follows the awaiting task's stop token and deadline (uring::with_timeout):
/// stopped, it fails with ECANCELED (ETIMEDOUT under with_timeout) and the queue goes on; a push stopped
/// that way copied nothing, unless it was larger than the queue (then the pieces copied so far stay).
///
/// Lifetime: destroying the queue fails its waits with ECANCELED and cancels the send in flight; the
/// buffers stay mapped (and registered) until the kernel has finished with that send. Bytes not yet sent
/// are dropped. The queue must be destroyed before its executor, and the socket must stay open while a
/// push or flush waits.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <utility>

#include "uring/buffer.hpp"
#include "uring/detail/deadline.hpp"
#include "uring/detail/state_awaitable.hpp"
#include "uring/executor.hpp"

namespace uring::net {
class tcp_stream;
}

namespace uring::detail {

struct send_queue_state;  ///< src/net/send_queue.cpp

/// A push or flush that waits in its queue: it lives in the awaiting coroutine's frame.
struct send_wait {
  std::coroutine_handle<> handle;
  const std::byte* data = nullptr;  ///< push: the bytes not copied yet
  std::size_t left = 0;
  bool flush = false;
  std::uint64_t until = 0;  ///< flush: the pushed total it waits to see sent (set once it is its turn)
  std::uint64_t id = 0;     ///< the wait's number, for a stop request
  int error = 0;            ///< why it failed (0: it did not)
  bool queued = false;      ///< in its queue's lists: a frame destroyed now must take it out

  static send_wait of_push(const void* bytes, std::size_t n) noexcept {
    send_wait w;
    w.data = static_cast<const std::byte*>(bytes);
    w.left = n;
    return w;
  }
  static send_wait of_flush() noexcept {
    send_wait w;
    w.flush = true;
    return w;
  }
};

/// Out of line (src/net/send_queue.cpp), so that the state stays incomplete here.
/// Serves `w` at once if it can (true: no need to wait; w.error says how it ended).
bool send_queue_ready(send_queue_state& s, send_wait& w) noexcept;
/// Queues `w` with handle `h`; returns the executor it waits on.
executor* send_queue_suspend(send_queue_state& s, send_wait& w, std::coroutine_handle<> h);
void state_cancel(send_queue_state& s, std::uint64_t wait) noexcept;  ///< for cancel_on_stop
[[noreturn]] void send_queue_throw(int error);
/// Takes `w` out of its queue's lists: its frame is being destroyed while it waits (an executor's shutdown).
void send_queue_forget(send_queue_state& s, send_wait& w) noexcept;

}  // namespace uring::detail

namespace uring::net {

/// A connection's outgoing bytes, queued without waiting and sent in bundles: `co_await q.push(bytes)`
/// copies them into the queue's buffers and makes sure one send is in flight; what is pushed meanwhile
/// leaves with the next send, in the order pushed. Natively a bundled send from a buffer ring of the
/// queue's own (kernel 6.10+, probed as send_bundle); elsewhere one sendmsg of the queued buffers per
/// send (the file's comment has the back-pressure and both roads).
///
/// Threads: a queue belongs to the executor it was made on: push, flush and destroy it on that thread; a
/// stop request may come from any thread.
class send_queue {
 public:
  /// The queue's buffers and road.
  struct options {
    std::uint32_t count = 64;    ///< buffers, 1 to 32768
    std::uint32_t size = 16384;  ///< bytes each
    /// Bundled sends from a buffer ring where the executor's plan has them. False: always one sendmsg of
    /// the queued buffers per send, to compare or to test it.
    bool use_ring = true;
    bool direct = false;  ///< the fd is a slot of the executor's table of direct descriptors
  };

  /// The awaitable of push and flush: yields nothing, throws std::system_error("send_queue: ...").
  class [[nodiscard]] awaitable {
   public:
    ///@{
    /// For push and flush: the wait `w` on queue state `s`. Movable until it is awaited.
    awaitable(std::shared_ptr<detail::send_queue_state> s, detail::send_wait w) noexcept
        : state_(std::move(s)), wait_(w) {}
    awaitable(awaitable&& o) noexcept : state_(std::move(o.state_)), wait_(o.wait_) {}
    ///@}
    awaitable& operator=(awaitable&&) = delete;
    ~awaitable() {
      if (wait_.queued) detail::send_queue_forget(*state_, wait_);
    }

    ///@{
    /// The awaiter protocol, called by `co_await`.
    bool await_ready() noexcept { return detail::send_queue_ready(*state_, wait_); }
    template <class Promise>
    void await_suspend(std::coroutine_handle<Promise> h) {
      follow_.follow(h.promise());  // the task's stop token, and its deadline's
      executor* ex = detail::send_queue_suspend(*state_, wait_, h);
      if (!follow_.empty()) {
        callback_.emplace(follow_.token(),
                          detail::cancel_on_stop<detail::send_queue_state>{state_, ex, wait_.id});
      }
    }
    void await_resume() {
      callback_.reset();  // waits for a callback running on another thread
      if (wait_.error != 0) detail::send_queue_throw(wait_.error);
    }
    ///@}

   private:
    std::shared_ptr<detail::send_queue_state> state_;
    detail::send_wait wait_;
    detail::wait_stop follow_;
    std::optional<std::stop_callback<detail::cancel_on_stop<detail::send_queue_state>>> callback_;
  };

  ///@{
  /// A queue sending to `stream` on the running executor (a std::logic_error if none runs on this thread).
  explicit send_queue(const tcp_stream& stream) : send_queue(stream, options{}) {}
  send_queue(const tcp_stream& stream, options opts);
  ///@}
  /// A queue sending to the connected stream socket `fd` (not owned) on `ex`, from its owner thread.
  send_queue(executor& ex, int fd, options opts);
  send_queue(const send_queue&) = delete;
  send_queue& operator=(const send_queue&) = delete;
  ~send_queue();

  /// Copies `bytes` into the queue (waiting for room) and makes sure a send is under way.
  awaitable push(const_buffer bytes) {
    return {state_, detail::send_wait::of_push(bytes.data(), bytes.size())};
  }
  /// Waits until every byte pushed before it has been sent.
  awaitable flush() { return {state_, detail::send_wait::of_flush()}; }

  [[nodiscard]] std::size_t capacity() const noexcept;  ///< count * size
  [[nodiscard]] std::size_t queued() const noexcept;    ///< bytes pushed and not yet sent
  [[nodiscard]] std::uint64_t sends() const noexcept;   ///< send operations started so far
  /// Whether the sends are bundled sends from a buffer ring (else one sendmsg each).
  [[nodiscard]] bool uses_bundles() const noexcept;

 private:
  std::shared_ptr<detail::send_queue_state> state_;
};

}  // namespace uring::net
