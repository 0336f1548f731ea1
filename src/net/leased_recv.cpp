// leased_recv.cpp — a stream's receives into a buffer_pool: one multishot recv over a provided-buffer
// ring, or (without one) a recv per call that takes a pool buffer only once the socket is readable.
//
// One state per stream, driven by its operation's completions. It is flagged multishot so that its
// completion function sees every completion, also those drained while the executor shuts down: buffers
// ride on them and must go back to the pool, and an abandoned state frees itself on the final one. The
// request in flight holds a reference to the state (`self`); nothing else does once the stream is gone.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "net/buffer_pool_state.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/net/leased_recv.hpp"

namespace uring::detail {

struct recv_state final : operation, pool_waiter, std::enable_shared_from_this<recv_state> {
  recv_state(int socket_fd, pool_state& p) : fd(socket_fd), pool(&p), ex(p.ex) {
    p.add_ref();
    complete = &on_complete;
    multishot = true;
  }
  recv_state(const recv_state&) = delete;
  recv_state& operator=(const recv_state&) = delete;
  ~recv_state() {
    give_back_chunks();
    pool->unref();
  }

  struct chunk {
    std::uint16_t id;
    std::uint32_t len;
  };

  int fd;
  pool_state* pool;
  executor* ex;
  // Received, not yet taken (at most the pool's count), from ready[head]. A vector, not a deque: an
  // empty one allocates nothing, and an idle connection should cost as little as possible.
  std::vector<chunk> ready;
  std::size_t head = 0;
  int error = 0;               // for the next recv to throw
  bool eof = false;            // sticky: every later recv yields an empty lease
  bool abandoned = false;      // the stream is gone
  bool hungry = false;         // waiting in the pool for a buffer to come back
  std::uint16_t held = 0;      // no ring: the buffer the recv in flight fills
  std::uint64_t armed_at = 0;  // ring: the pool's return count when the multishot was armed
  bool readable = false;       // no ring: the last poll said so, and nothing was received since
  bool eager = false;          // no ring: the last chunk filled its buffer (receive before polling)
  std::coroutine_handle<> waiter;
  std::shared_ptr<recv_state> self;  // while an operation is in flight

  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }
  [[nodiscard]] bool has_chunk() const noexcept { return head < ready.size(); }
  [[nodiscard]] bool done() const noexcept { return has_chunk() || error != 0 || eof; }
  chunk take_chunk() noexcept {
    chunk c = ready[head++];
    if (head == ready.size()) {
      ready.clear();
      head = 0;
    }
    return c;
  }
  void give_back_chunks() noexcept {
    for (std::size_t i = head; i < ready.size(); ++i) pool->give_back(ready[i].id);
    ready.clear();
    head = 0;
  }

  void wake() noexcept {
    if (waiter) executor_access::schedule(*ex, std::exchange(waiter, {}));
  }

  // Starts receiving for a waiter: arms the multishot, or (no ring) waits for readability, or receives
  // into a free buffer, or waits for one to come back. Never wakes the waiter itself; a failure shows as
  // done().
  void start() noexcept {
    if (pool->closed || !executor_access::accepting(*ex)) {
      error = ECANCELED;
      return;
    }
    if (pool->ring) {
      if (!pool->has_free()) {
        hungry = true;
        pool->wait(*this);
        return;
      }
      armed_at = pool->returns;
      submit({.code = op_code::recv_multishot, .fd = fd, .len = pool->group});
      return;
    }
    // No ring: a buffer is taken only when data is likely there (the socket polled readable, or the last
    // chunk filled its buffer, so more is probably waiting), so an idle stream holds none.
    if (!readable && !eager) {
      submit({.code = op_code::poll, .fd = fd, .op_flags = POLLIN});
    } else if (!pool->has_free()) {
      hungry = true;
      pool->wait(*this);
    } else {
      readable = false;
      held = pool->take();
      submit({.code = op_code::recv,
              .fd = fd,
              .len = pool->size,
              .op_flags = MSG_DONTWAIT,
              .addr = pool->buffer(held)});
    }
  }

  void submit(const io_request& r) noexcept {
    request = r;
    self = shared_from_this();
    executor_access::submit(*ex, *this);  // accepting() was checked: it does not throw
  }

  void on_buffer_returned() noexcept override {
    hungry = false;
    if (abandoned || !waiter) return;
    start();
    if (done()) wake();
  }

  void cancel() noexcept {
    if (in_flight()) {
      executor_access::cancel(*ex, *this);
    } else if (hungry) {
      pool->stop_waiting(*this);
      hungry = false;
      error = ECANCELED;
      wake();
    }
  }

  void abandon() noexcept {
    abandoned = true;
    waiter = {};
    give_back_chunks();
    if (hungry) {
      pool->stop_waiting(*this);
      hungry = false;
    }
    if (in_flight()) executor_access::cancel(*ex, *this);
  }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<recv_state*>(op);
    // The final completion drops the request's reference; held here, it frees *s at the end at the latest.
    std::shared_ptr<recv_state> keep = (s->cqe_flags & kCqeMore) == 0 ? std::move(s->self) : nullptr;
    switch (s->request.code) {
      case op_code::recv_multishot:
        s->on_chunk((s->cqe_flags & kCqeMore) == 0);
        break;
      case op_code::recv:
        s->on_recv();
        break;
      default:  // poll
        s->on_readable();
        break;
    }
  }

  // Ring: one completion of the multishot recv.
  void on_chunk(bool final) noexcept {
    if (cqe_flags & kCqeBuffer) {
      const auto id = static_cast<std::uint16_t>(cqe_flags >> kCqeBufferShift);
      pool->picked();
      if (res > 0 && !abandoned) {
        ready.push_back({id, static_cast<std::uint32_t>(res)});
      } else {
        pool->give_back(id);
      }
    }
    if (abandoned) return;
    if (res == 0) {
      eof = true;
    } else if (res == -ENOBUFS) {
      // Every buffer was out when data came; it waits in the socket. Try again once one is back: at once
      // if one came back since the request was armed (the ring may hold it now), else when one does.
      if (final && waiter && !has_chunk()) {
        if (pool->returns != armed_at && pool->has_free()) {
          start();
        } else {
          hungry = true;
          pool->wait(*this);
        }
      }
    } else if (res < 0) {
      error = -res;
    }
    if (done()) wake();
  }

  // No ring: the recv into `held` completed.
  void on_recv() noexcept {
    if (res > 0 && !abandoned) {
      eager = static_cast<std::uint32_t>(res) == pool->size;
      ready.push_back({held, static_cast<std::uint32_t>(res)});
      wake();
      return;
    }
    pool->give_back(held);
    if (abandoned) return;
    if (res == -EAGAIN) {  // nothing there after all: wait for readability, holding no buffer
      eager = false;
      if (waiter) start();
    } else if (res == 0) {
      eof = true;
    } else {
      error = -res;
    }
    if (done()) wake();
  }

  // No ring: the socket is readable (or the poll failed).
  void on_readable() noexcept {
    if (abandoned) return;
    if (res < 0) {
      error = -res;
    } else {
      readable = true;
      if (waiter) start();
    }
    if (done()) wake();
  }
};

}  // namespace uring::detail

namespace uring::net {

recv_awaitable leased_receiver::recv(int fd, buffer_pool& pool, std::stop_token stop) {
  detail::pool_state& p = pool.state();
  if (!state_ || state_->fd != fd || state_->pool != &p) {
    abandon();
    state_ = std::make_shared<detail::recv_state>(fd, p);
  }
  return {state_, std::move(stop)};
}

void leased_receiver::abandon() noexcept {
  if (state_) std::exchange(state_, nullptr)->abandon();
}

}  // namespace uring::net

namespace uring::detail {

bool state_ready(const recv_state& s) noexcept { return s.done(); }

void state_cancel(recv_state& s) noexcept { s.cancel(); }

executor* state_suspend(const std::shared_ptr<recv_state>& state, std::coroutine_handle<> h) {
  executor& ex = executor_access::current("recv");
  recv_state& s = *state;
  if (&ex != s.ex) throw std::logic_error("recv: the buffer pool belongs to another executor");
  if (!s.in_flight() && !s.hungry) s.start();
  if (s.done()) return nullptr;  // the pool is closed: nothing was started
  s.waiter = h;
  return &ex;
}

net::leased_buffer state_resume(recv_state& s) {
  if (s.has_chunk()) {
    const auto c = s.take_chunk();
    if (s.error == ECANCELED) s.error = 0;  // a stop that came with data: the data wins
    s.pool->add_ref();
    return net::leased_buffer(s.pool, c.id, s.pool->buffer(c.id), c.len);
  }
  if (s.error != 0) throw_errno(std::exchange(s.error, 0), "recv");
  return {};  // end of stream
}

}  // namespace uring::detail
