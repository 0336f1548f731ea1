// leased_recv.cpp — a stream's receives into a buffer_pool: a recv that picks its buffer from a
// provided-buffer ring, kept armed while the stream holds less than its share of the pool, or (without a
// ring) a recv per call that takes a pool buffer only once the socket is readable. The same state reads a
// pipe, FIFO or eventfd for a read_stream (uring/read_stream.hpp): read for recv, and with a ring a read
// that picks its buffer (multishot where the plan has it and the stream's share is the whole pool).
//
// One request at a time, each taking at most what is left of the stream's share: that is what makes the
// per-stream limit exact (a multishot recv fills as many buffers as the socket has data for before its
// completions are seen, so a peer that sends without reading would drain the pool in one burst). Where the
// plan has bundles, one receive fills several buffers (natively a bundled recv from the ring, else a
// recvmsg into several free buffers) and each becomes a chunk of its own, in order; else one buffer each.
// An incremental pool takes no bundles: a receive gets at most the rest of one buffer (natively the
// ring's head, else a partly used one), and its chunk is a piece of that buffer (buffer_carving.cpp).
// A multishot read is the exception, used only where the stream's share is the whole pool, so that no
// burst can exceed it; reads take no bundles.
//
// One state per stream, driven by its operation's completions. It is flagged multishot so that its
// completion function sees every completion, also those drained while the executor shuts down: buffers
// ride on them and must go back to the pool, and an abandoned state frees itself on the final one. The
// request in flight holds a reference to the state (`self`); nothing else does once the stream is gone.
//
// A waiting receive that is stopped or times out is *interrupted*: the request in flight is cancelled
// (or the wait for a pool buffer dropped), and its final completion fails the waiter with the reason. A
// chunk that arrives meanwhile is kept: the waiter takes it instead, or it waits for the next receive.
// The timer of timed receives is a second operation of the state (deadline_timer), with its own reference,
// made at the first timed receive: a stream that is never timed does not carry it.
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "executor/executor_state.hpp"
#include "net/buffer_pool_state.hpp"
#include "net/deadline_timer.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/net/leased_recv.hpp"

namespace uring::detail {

struct recv_state;

struct recv_state final : operation, std::enable_shared_from_this<recv_state>, pool_waiter {
  recv_state(int source_fd, pool_state& p, bool reads)
      : fd(source_fd),
        reading(reads),
        multishot_read(reads && p.ex->plan().read_multishot && p.per_stream >= p.count && !p.incremental),
        pool(&p),
        ex(p.ex) {
    p.add_ref();
    complete = &on_complete;
    multishot = true;
  }
  recv_state(const recv_state&) = delete;
  recv_state& operator=(const recv_state&) = delete;
  ~recv_state() {
    watch.reset();  // waits for a stop_watch running on another thread
    give_back_chunks();
    pool->forget(*this);  // its leases still out return to the pool alone
    pool->unref();
  }

  struct chunk {
    std::uint32_t id;  // the buffer's, or (incremental) the piece's
    std::uint32_t len;
    char* data;
  };

  // Ordered so that the fields pack after the bases (this state is part of every connection's cost).
  int fd;
  bool reading;  // read(2) from a pipe, FIFO or eventfd rather than recv(2) from a socket
  // Ring: one multishot read stays armed (else one read per chunk). Only where the stream may hold the
  // whole pool: the kernel fills a buffer per chunk for as long as the fd has data and the ring has
  // buffers, before any completion is seen, so a smaller share could not hold (nor any share where chunks
  // share buffers: incremental pools).
  bool multishot_read;
  bool eof = false;         // sticky: every later recv yields an empty lease
  bool abandoned = false;   // the stream is gone
  bool hungry = false;      // waiting in the pool for a buffer to come back
  bool cancelling = false;  // we asked for the request in flight to be cancelled
  bool capped = false;      // holds its limit of buffers: receives again when one of them comes back
  // Ring: the last receive took less than it had room for, so the socket is probably empty and the next
  // one polls first (kPollFirst). A server re-arms right after each request arrives, before the client
  // can have sent the next: there a first try would only fail.
  bool drained = false;
  pool_state* pool;
  executor* ex;
  // Received, not yet taken (at most the pool's per-stream limit), from ready[head]. A vector, not a
  // deque: an empty one allocates nothing, and an idle connection should cost as little as possible.
  std::vector<chunk> ready;
  std::uint32_t head = 0;
  int error = 0;  // for the next recv to throw
  // No ring: the buffers a bundled receive in flight fills, in order, and the recvmsg over them. Made for
  // a bundle and dropped when the stream next waits for readability, so an idle stream carries none.
  struct fill_state {
    std::vector<std::uint16_t> ids;
    std::vector<iovec> iovs;
    msghdr msg{};
  };
  std::unique_ptr<fill_state> fill;
  std::uint64_t armed_at = 0;  // ring: the pool's return count when the recv was armed
  bool readable = false;       // no ring: the last poll said so, and nothing was received since
  bool eager = false;          // no ring: the last chunk filled its buffer (receive before polling)
  std::uint16_t one_id = 0;    // no ring: the buffer a receive of one buffer fills (a bundle's are in `fill`)
  int stop_reason = 0;         // the waiting receive was interrupted: ECANCELED or ETIMEDOUT
  std::coroutine_handle<> waiter;
  std::int64_t deadline_ns = 0;  // the waiting receive's deadline (CLOCK_MONOTONIC), 0: none
  std::unique_ptr<deadline_timer<recv_state>> timer;  // from the first timed receive on
  std::shared_ptr<recv_state> self;                   // while an operation is in flight
  // The stop token of the waits, watched while they keep using it: one registration serves every wait
  // under the same token (a server's connection waits under its scope's each time), where one per wait
  // would lock the token's state twice a wait. Empty while the waits have none.
  struct stop_watch {
    recv_state* s;
    void operator()() const noexcept;  // on any thread, once the token is stopped
  };
  std::stop_token watched;
  std::optional<std::stop_callback<stop_watch>> watch;

  [[nodiscard]] const char* name() const noexcept { return reading ? "read_stream" : "recv"; }
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
    for (std::size_t i = head; i < ready.size(); ++i) pool->drop_chunk(ready[i].id);
    ready.clear();
    head = 0;
  }
  // Incremental: `len` bytes at buffer `id`'s fill point are a chunk of ours (once gone: consumed, no chunk).
  void push_piece(std::uint16_t id, std::uint32_t len) noexcept {
    char* at = nullptr;
    const std::uint32_t p = pool->carve(id, len, abandoned ? nullptr : this, &at);
    if (!abandoned) ready.push_back({p, len, at});
  }

  // The waiting receive has its result: resume it on a later turn. Its stop reason and deadline go with it
  // (the timer stays armed: a later timed receive reuses it, or it fires once for nothing).
  void wake() noexcept {
    stop_reason = 0;
    deadline_ns = 0;
    if (waiter) executor_access::schedule(*ex, std::exchange(waiter, {}));
  }

  // Starts receiving: arms a recv that picks a ring buffer, or (no ring) waits for readability, or
  // receives into a free buffer, or waits for one to come back; nothing while the stream holds its limit.
  // Never wakes the waiter itself; a failure shows as done().
  void start() noexcept {
    if (pool->closed || !executor_core::accepting(*ex)) {
      error = ECANCELED;
      return;
    }
    if (pool->ring) {
      if (!pool->has_free()) {
        hungry = true;
        pool->wait(*this);
        return;
      }
      if (pool->at_limit(*this)) {
        capped = true;
        return;
      }
      armed_at = pool->returns;
      if (reading) {
        submit({.code = op_code::read_multishot,
                .fd = fd,
                .len = pool->group,
                .aux = multishot_read ? 0 : kOneChunk});
        return;
      }
      const std::uint32_t bytes = pool->bundle ? pool->bundle_bytes(room()) : 0;
      submit({.code = op_code::recv_multishot,
              .fd = fd,
              .len = pool->group,
              .offset = bytes,
              .aux = (bytes != 0 ? kBundle : kOneChunk) | (drained ? kPollFirst : 0)});
      return;
    }
    // No ring: a buffer is taken only when data is likely there (the socket polled readable, or the last
    // chunk filled its buffer, so more is probably waiting), so an idle stream holds none.
    if (!readable && !eager) {
      fill.reset();
      submit({.code = op_code::poll, .fd = fd, .op_flags = POLLIN});
    } else if (!pool->has_free()) {
      hungry = true;
      pool->wait(*this);
    } else if (pool->at_limit(*this)) {
      capped = true;
    } else {
      readable = false;
      // A bundle only after a chunk that filled its buffer: a short message needs one buffer, and taking
      // the stream's share to give all but one back costs more than the one recv.
      const std::uint32_t n =
          pool->bundle && !reading && eager && !pool->incremental ? std::min(room(), pool->available()) : 1;
      if (n == 1) {
        if (pool->incremental) {
          one_id = pool->reserve();  // its chunk counts once carved
        } else {
          one_id = pool->take();
          pool->own(one_id, *this);
        }
        submit({.code = reading ? op_code::read : op_code::recv,
                .fd = fd,
                .len = pool->space(one_id),
                .op_flags = reading ? 0u : std::uint32_t{MSG_DONTWAIT},
                .offset = reading ? kCurrentPosition : 0,
                .addr = pool->fill_point(one_id)});
        return;
      }
      if (!fill) fill = std::make_unique<fill_state>();
      for (std::uint32_t i = 0; i < n; ++i) {
        fill->ids.push_back(pool->take());
        pool->own(fill->ids.back(), *this);
      }
      fill->iovs.clear();
      for (std::uint16_t id : fill->ids) fill->iovs.push_back({pool->buffer(id), pool->size});
      fill->msg = {};
      fill->msg.msg_iov = fill->iovs.data();
      fill->msg.msg_iovlen = fill->iovs.size();
      submit({.code = op_code::recvmsg, .fd = fd, .op_flags = MSG_DONTWAIT, .addr = &fill->msg});
    }
  }

  // Buffers the stream may still take before it holds its share (at least 1 where it is not at it).
  [[nodiscard]] std::uint32_t room() const noexcept { return pool->per_stream - held; }

  void submit(const io_request& r) noexcept {
    request = r;
    self = shared_from_this();
    executor_access::submit(*ex, *this);  // accepting() was checked: it does not throw
  }

  // Whether to receive now: for a waiter without a result, or (ring) ahead of the next receive.
  [[nodiscard]] bool wants_data() const noexcept {
    if (abandoned || eof || error != 0) return false;
    return pool->ring || (waiter && !done());
  }

  // The request ended (its final completion): a waiter without a result fails with its stop reason, or
  // the stream receives again. `ran_dry`: the recv failed for want of buffers.
  void after_final(bool ran_dry) noexcept {
    if (waiter && !done() && stop_reason != 0) {
      error = stop_reason;
      return;
    }
    if (!wants_data()) return;
    // Ran dry: try again at once if a buffer came back since the request was armed (the ring may hold it
    // now), else when one does.
    if (ran_dry && (pool->returns == armed_at || !pool->has_free())) {
      hungry = true;
      pool->wait(*this);
      return;
    }
    start();
  }

  // The pool's calls (pool_waiter).
  void buffer_came_back() noexcept {
    hungry = false;
    resume_receiving();
  }
  void own_came_back() noexcept {
    if (!capped) return;
    capped = false;
    resume_receiving();
  }

  // After a wait for a buffer (the pool's, or one of its own): receives again if it still wants to.
  void resume_receiving() noexcept {
    if (in_flight() || hungry || !wants_data()) return;
    start();
    if (waiter && done()) wake();
  }

  // Ends the waiting receive with `reason` (ECANCELED, ETIMEDOUT) unless a result is there first.
  void interrupt(int reason) noexcept {
    if (!waiter || done()) return;
    stop_reason = reason;
    if (in_flight()) {
      if (!cancelling) {
        cancelling = true;
        executor_access::cancel(*ex, *this);  // the final completion fails the waiter
      }
    } else if (hungry || capped) {
      if (hungry) pool->stop_waiting(*this);
      hungry = false;
      error = reason;
      wake();
    }
  }

  // The wait that begins watches `stop` (registering only when it is another token than the last wait's),
  // and is interrupted at once if the token is stopped already.
  void watch_stop(const std::stop_token& stop) {
    if (!stop.stop_possible()) {
      unwatch();
      return;
    }
    if (!watch || watched != stop) {
      watch.reset();
      watched = stop;
      watch.emplace(watched, stop_watch{this});
    }
    stopped_watch();
  }
  void unwatch() noexcept {
    if (!watch) return;
    watch.reset();
    watched = {};
  }
  // On the owner thread: the watched token is stopped, so the wait under it (if one waits) ends. A stop
  // posted late finds the token of the wait there now, which it interrupts only if that one is stopped.
  void stopped_watch() noexcept {
    if (watched.stop_requested()) interrupt(ECANCELED);
  }

  // The waiting receive's deadline: interrupt it once passed, else make sure the timer fires by then.
  void check_deadline() noexcept {
    if (!waiter || deadline_ns == 0 || done()) return;
    if (monotonic_ns() >= deadline_ns) {
      interrupt(ETIMEDOUT);
      return;
    }
    if (!timer) timer = std::make_unique<deadline_timer<recv_state>>(*this);
    timer->ensure_by(*ex, deadline_ns, shared_from_this());
  }
  // Fired or cancelled: the waiting receive's time is up, or re-arm for it.
  void on_timer(const std::shared_ptr<recv_state>& /*keep*/) noexcept { check_deadline(); }

  void abandon() noexcept {
    abandoned = true;
    unwatch();
    waiter = {};
    give_back_chunks();
    if (hungry) {
      pool->stop_waiting(*this);
      hungry = false;
    }
    capped = false;
    if (in_flight() && !cancelling) {
      cancelling = true;
      executor_access::cancel(*ex, *this);
    }
    if (timer) timer->cancel(*ex);
  }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<recv_state*>(op);
    // The final completion drops the request's reference; held here, it frees *s at the end at the latest.
    const bool final = (s->cqe_flags & kCqeMore) == 0;
    std::shared_ptr<recv_state> keep = final ? std::move(s->self) : nullptr;
    switch (s->request.code) {
      case op_code::recv_multishot:
      case op_code::read_multishot:
        s->on_chunk(final);
        break;
      case op_code::recv:
      case op_code::read:
      case op_code::recvmsg:
        s->on_recv();
        break;
      default:  // poll
        s->on_readable();
        break;
    }
  }

  // A failure of the request, unless it is the echo of our own cancel (which is no error of the stream).
  void failed(int res_errno) noexcept {
    if (res_errno == ECANCELED && cancelling) return;
    error = res_errno;
  }

  // Ring: the recv completed (with a chunk, or a bundle of them, end of stream, ENOBUFS or an error).
  void on_chunk(bool final) noexcept {
    if ((cqe_flags & kCqeBuffer) && pool->incremental) {
      // One buffer's next bytes; the kernel keeps the buffer while it says IORING_CQE_F_BUF_MORE.
      const auto id = static_cast<std::uint16_t>(cqe_flags >> kCqeBufferShift);
      if (res > 0) push_piece(id, static_cast<std::uint32_t>(res));
      if (res > 0 && !abandoned) ++pool->receives;
      if ((cqe_flags & kCqeBufMore) == 0) pool->kernel_done(id);
    } else if (cqe_flags & kCqeBuffer) {
      const auto first = static_cast<std::uint16_t>(cqe_flags >> kCqeBufferShift);
      // A bundle's bytes fill its buffers in ring order, each whole but the last.
      const std::uint32_t bytes = res > 0 ? static_cast<std::uint32_t>(res) : 0;
      const std::uint32_t n = bytes > 0 ? (bytes + pool->size - 1) / pool->size : 1;
      const std::uint64_t room = (request.aux & kBundle) != 0 ? request.offset : pool->size;
      drained = bytes > 0 && bytes < room;
      if (bytes > 0 && !abandoned) {
        ++pool->receives;
        for (std::uint32_t i = 0; i < n; ++i) {
          const std::uint16_t id = pool->ring_next(first, i);
          pool->picked();
          pool->own(id, *this);
          ++pool->filled;
          ready.push_back({id, std::min(bytes - i * pool->size, pool->size), pool->buffer(id)});
        }
      } else {
        // Every id first: a buffer given back may take a slot the later ones are read from.
        const std::size_t from = ready.size();
        for (std::uint32_t i = 0; i < n; ++i) ready.push_back({pool->ring_next(first, i), 0, nullptr});
        for (std::size_t i = from; i < ready.size(); ++i) {
          pool->picked();
          pool->give_back(static_cast<std::uint16_t>(ready[i].id));
        }
        ready.resize(from);
      }
    }
    if (abandoned) return;
    if (res == 0) {
      eof = true;
    } else if (res < 0 && res != -ENOBUFS) {
      failed(-res);
    }
    if (final) {
      cancelling = false;
      after_final(res == -ENOBUFS);
    }
    if (done()) wake();
  }

  // No ring: the recv into `one_id`, or a bundle's into `fill->ids`, completed. The bytes fill those
  // buffers in order; the rest go back.
  void on_recv() noexcept {
    const std::uint32_t bytes = res > 0 && !abandoned ? static_cast<std::uint32_t>(res) : 0;
    std::uint32_t room_for = 0;  // the bytes the receive could take
    if (pool->incremental) {
      room_for = pool->space(one_id);
      if (bytes > 0) push_piece(one_id, bytes);
      pool->unreserve(one_id);
    } else {
      const bool bundled = fill && !fill->ids.empty();
      const std::span<const std::uint16_t> ids = bundled ? std::span(fill->ids) : std::span(&one_id, 1);
      room_for = static_cast<std::uint32_t>(ids.size()) * pool->size;
      std::uint32_t used = 0;
      for (; used < ids.size() && used * pool->size < bytes; ++used) {
        ++pool->filled;
        ready.push_back(
            {ids[used], std::min(bytes - used * pool->size, pool->size), pool->buffer(ids[used])});
      }
      for (std::size_t i = used; i < ids.size(); ++i) pool->drop_chunk(ids[i]);
      if (bundled) fill->ids.clear();
    }
    if (bytes > 0) {
      ++pool->receives;
      eager = bytes == room_for;  // every byte of room filled: more is probably waiting
    } else {
      if (abandoned) return;
      if (res == -EAGAIN) {  // nothing there after all: wait for readability, holding no buffer
        eager = false;
      } else if (res == 0) {
        eof = true;
      } else if (res < 0) {
        failed(-res);
      }
    }
    cancelling = false;
    after_final(false);
    if (done()) wake();
  }

  // No ring: the socket is readable (or the poll failed, or was cancelled).
  void on_readable() noexcept {
    if (abandoned) return;
    if (res < 0) {
      failed(-res);
    } else {
      readable = true;
    }
    cancelling = false;
    after_final(false);
    if (done()) wake();
  }
};

// A pool_waiter is always a recv_state's.
void pool_waiter::on_buffer_returned() noexcept { static_cast<recv_state*>(this)->buffer_came_back(); }
void pool_waiter::on_own_returned() noexcept { static_cast<recv_state*>(this)->own_came_back(); }

}  // namespace uring::detail

namespace uring::net {

recv_awaitable leased_receiver::next(int fd, buffer_pool& pool, std::stop_token stop, bool reading) {
  detail::pool_state& p = pool.state();
  if (!state_ || state_->fd != fd || state_->pool != &p || state_->reading != reading) {
    abandon();
    state_ = std::make_shared<detail::recv_state>(fd, p, reading);
  }
  return {state_, std::move(stop)};
}

void leased_receiver::abandon() noexcept {
  if (state_) std::exchange(state_, nullptr)->abandon();
}

}  // namespace uring::net

namespace uring::detail {

bool recv_ready(const recv_state& s) noexcept { return s.done(); }

bool recv_suspend(const std::shared_ptr<recv_state>& state, std::coroutine_handle<> h,
                  std::int64_t deadline_ns, const std::stop_token& stop) {
  executor& ex = executor_access::current("recv");
  recv_state& s = *state;
  if (&ex != s.ex)
    throw std::logic_error(std::string(s.name()) + ": the buffer pool belongs to another executor");
  // A request still in flight keeps going (an earlier receive's, or one being cancelled: its final
  // completion re-arms for this waiter).
  if (!s.in_flight() && !s.hungry) s.start();
  if (s.done()) return false;  // the pool is closed: nothing was started
  s.waiter = h;
  s.deadline_ns = deadline_ns;
  // Either may end the wait at once (a timeout of 0, a token already stopped): it then resumes on a later
  // turn.
  s.check_deadline();
  s.watch_stop(stop);
  return true;
}

void recv_state::stop_watch::operator()() const noexcept {
  if (running_executor() == s->ex) {
    s->stopped_watch();
    return;
  }
  try {
    s->ex->post([w = s->weak_from_this()] {
      if (auto st = w.lock()) st->stopped_watch();
    });
  } catch (...) {
    // The executor no longer takes work: it is shutting down, which ends the request anyway.
  }
}

namespace {
// The next chunk as a lease, or null (error or end of stream) with the error in `err` (0: end of stream).
net::leased_buffer take(recv_state& s, int& err) noexcept {
  if (s.has_chunk()) {
    const auto c = s.take_chunk();
    s.pool->add_ref();
    err = 0;
    return net::leased_buffer(s.pool, c.id, c.data, c.len);
  }
  err = std::exchange(s.error, 0);
  return {};
}
}  // namespace

net::leased_buffer recv_resume(recv_state& s) {
  int err = 0;
  net::leased_buffer b = take(s, err);
  if (err != 0) throw_errno(err, s.name());
  return b;  // empty: end of stream
}

net::recv_result recv_resume_nothrow(recv_state& s) noexcept {
  int err = 0;
  net::leased_buffer b = take(s, err);
  const auto n = err != 0 ? -err : static_cast<std::int32_t>(b.size());
  return {std::move(b), n};
}

}  // namespace uring::detail
