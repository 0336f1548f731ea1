// uring/detail/io_awaitable.hpp — the awaitable behind every single operation (nop, read, sleep_for, ...).
//
// Provides: detail::io_awaitable<Result, Throw>.
// Threads: await it from a coroutine running on an executor; a stop request may come from any thread.
//
// Awaiting queues the operation on the running executor (no SQE is taken before). Cancellation: the
// awaitable takes a std::stop_token given explicitly (with_stop_token) or, failing that, the awaiting
// coroutine's own (a task inherits its awaiter's; when_any hands one to its children). A stop request
// on the owner thread cancels at once; from another thread it is posted to the owner. A linked timeout
// (with_timeout) turns an operation that outlives it into ETIMEDOUT. The awaitable may be moved until it
// is awaited, never after.
//
// An operation whose request points at data it must own (a path, a struct statx to fill) carries that
// data as a Payload: the request is pointed into it only at start(), when the awaitable no longer moves.
// A payload with value() or value(res) makes the throwing form yield that instead of the kernel's result.
// Most operations have none (no_payload: empty, and binding it is a no-op).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "uring/detail/deadline.hpp"
#include "uring/detail/operation.hpp"
#include "uring/detail/remote.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"

namespace uring::detail {

// Coroutine promises that carry a stop token (task's does) expose it so operations can inherit it.
template <class Promise>
concept has_stop_token = requires(const Promise& p) {
  { p.stop_token() } -> std::convertible_to<std::stop_token>;
};

// The payload of an operation that owns nothing.
struct no_payload {
  void bind(io_request& /*request*/) noexcept {}
};

// A Payload: movable without throwing; bind() points the request into it. If it has value(), the
// throwing form of the operation yields that instead of the kernel's result.
template <class P>
concept payload = std::is_nothrow_move_constructible_v<P> && requires(P& p, io_request& r) {
  { p.bind(r) }
  noexcept;
};

// A timeout's own time (sleep_for, sleep_until).
struct timer_payload {
  timespec64 time;
  void bind(io_request& r) noexcept { r.addr = &time; }
};

// Any payload plus a linked timeout (with_timeout): the operation is cancelled when `time` passes first.
template <payload Inner>
struct linked_payload {
  Inner inner;
  timespec64 time;
  void bind(io_request& r) noexcept {
    inner.bind(r);
    r.link_timeout = &time;
  }
  decltype(auto) value() requires requires(Inner& i) { i.value(); }
  { return inner.value(); }
  decltype(auto) value(std::int32_t res) requires requires(Inner& i) { i.value(res); }
  { return inner.value(res); }
};

template <class P>
inline constexpr bool is_linked = false;
template <class P>
inline constexpr bool is_linked<linked_payload<P>> = true;

// The stop token attached to an io_awaitable and, once the operation is started, the stop callback's
// side: cancel on the owner thread, or post the cancel there.
struct op_canceller : remote_node {
  // What a stop cancels when it is more than `self` (a chain's steps): set before arm().
  using cancel_fn = void (*)(operation* self, executor& ex) noexcept;

  struct on_stop {
    op_canceller* c;
    void operator()() const noexcept {
      if (running_executor() == c->ex) {
        c->cancel_now();
      } else {
        c->posted.store(true, std::memory_order_release);
        executor_access::post_remote(*c->ex, *c);
      }
    }
  };
  explicit op_canceller(std::stop_token t) noexcept : token(std::move(t)) {
    run = [](remote_node* n) noexcept { static_cast<op_canceller*>(n)->cancel_now(); };
  }
  // From a small per-thread cache of freed cancellers (src/ops/op_canceller.cpp): an operation with a stop
  // token allocates one each time, and malloc's free path costs more than the rest of the canceller.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
  // On the owner thread.
  void cancel_now() noexcept {
    if (cancel_all != nullptr) {
      cancel_all(self, *ex);
    } else if (self->state != op_state::idle) {
      if (!in_sq || !executor_access::withdraw(*ex, *self, sq_at)) executor_access::cancel(*ex, *self);
    }
  }
  void arm(operation& op, executor& e) {
    self = &op;
    ex = &e;
    callback.emplace(token, on_stop{this});  // may run at once
  }
  // The operation went straight into the SQ at position `at`: a stop before the enter withdraws it.
  void arm_in_sq(operation& op, executor& e, unsigned at) {
    in_sq = true;
    sq_at = at;
    arm(op, e);
  }
  // After the completion: true if a stop was requested. Frees this.
  bool finish() noexcept {
    callback.reset();  // waits for a callback running on another thread
    // A cancel posted from another thread still sits in the owner's queue, pointing at this object:
    // run the queue now (the operation has completed, so the cancel does nothing) before it dies.
    if (posted.load(std::memory_order_acquire)) executor_access::drain_remote(*ex);
    const bool stopped = token.stop_requested();
    delete this;
    return stopped;
  }
  std::stop_token token;
  cancel_fn cancel_all = nullptr;
  operation* self = nullptr;
  executor* ex = nullptr;
  std::atomic<bool> posted{false};
  bool in_sq = false;  // started by start_inline, at SQ position sq_at
  unsigned sq_at = 0;
  std::optional<std::stop_callback<on_stop>> callback;
};

template <class Result, bool Throw = true, payload Payload = no_payload>
class [[nodiscard]] io_awaitable : private operation {
 public:
  io_awaitable(const char* name, const io_request& req) noexcept : name_(name) { request = req; }
  io_awaitable(const char* name, const io_request& req, Payload p) noexcept
      : name_(name), payload_(std::move(p)) {
    request = req;
  }
  io_awaitable(io_awaitable&& o) noexcept
      : operation(o),
        name_(o.name_),
        cancel_(std::exchange(o.cancel_, nullptr)),
        payload_(std::move(o.payload_)) {}
  io_awaitable& operator=(io_awaitable&&) = delete;
  ~io_awaitable() {
#ifndef NDEBUG
    // The kernel (or the emulation) still holds this operation's address: freeing it now means a later
    // completion writes into freed memory, which ASan cannot see. The executor never does this (it
    // drains before freeing frames); destroying a suspended coroutine by hand does. Fail loudly instead.
    if (state != op_state::idle) in_flight_operation_destroyed(name_);
#endif
    delete cancel_;  // set only while a stop token is attached: one test when it is not
  }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  [[gnu::always_inline]] bool await_suspend(std::coroutine_handle<Promise> h) {
    waiter = h;
    if constexpr (has_stop_token<Promise>) {
      // Any token at all (one pointer test); start_following asks whether it can be stopped.
      const std::stop_token& inherited = h.promise().stop_token();
      deadline* limit = deadline_of(h.promise());
      if (inherited != std::stop_token{} || limit != nullptr) [[unlikely]]
        return start_following(inherited, limit);
    }
    if (!std::is_same_v<Payload, no_payload> || cancel_ != nullptr) [[unlikely]] {
      return start_special(executor_access::current(name_));
    }
    // The common case (no stop token, no time, no owned data) goes straight into the SQ: keep it inline.
    executor* ex = running_executor();
    if (ex == nullptr) [[unlikely]]
      executor_access::no_executor(name_);  // name_ read only here
    if (!executor_access::start_inline(*ex, *this)) [[unlikely]]
      executor_access::submit(*ex, *this);
    return true;
  }

  auto await_resume() {
    bool stopped = false;  // a stop was requested (plain operations pay nothing to find out)
    if (cancel_ != nullptr) [[unlikely]] {
      stopped = cancel_->finish();
      cancel_ = nullptr;  // cleared after the call, so the destructor's test folds on both paths
      // An operation cancelled while it blocked in an io-wq worker (a unix-domain connect to a full
      // queue, a splice into a full socket) says EINTR or the kernel's internal ERESTARTSYS (512) to
      // ERESTART_RESTARTBLOCK (516), the worker's interrupted syscall: report the cancel as such.
      if (stopped && (res == -EINTR || (res <= -512 && res >= -516))) res = -ECANCELED;
    }
    std::int32_t r = res;
    if (r < 0) [[unlikely]]
      r = failure(r, stopped);
    if constexpr (!Throw) {
      return io_result{r};
    } else {
      if (r < 0) executor_access::throw_op_error(-r, name_, request.code);
      if constexpr (requires { payload_.value(r); }) {
        return payload_.value(r);  // a result built from the payload and the kernel's answer (recv_from)
      } else if constexpr (requires { payload_.value(); }) {
        return payload_.value();
      } else if constexpr (!std::is_void_v<Result>) {
        return static_cast<Result>(r);
      }
    }
  }

  // The same operation, awaited without exceptions: yields io_result.
  io_awaitable<Result, false, Payload> nothrow() && noexcept requires Throw {
    return io_awaitable<Result, false, Payload>(std::move(*this), std::move(payload_));
  }

  // The same operation, labelled `text` in the executor's in-flight snapshot (executor::inflight), e.g.
  // `co_await uring::read(fd, buf).tag("client 42 read")`. The text is not copied: it must outlive the
  // operation (a string literal does).
  io_awaitable tag(const char* text) && noexcept {
    label = text;
    return std::move(*this);
  }

  // The same operation with a linked timeout (see with_timeout).
  io_awaitable<Result, Throw, linked_payload<Payload>> linked_to(timespec64 t) && noexcept {
    return io_awaitable<Result, Throw, linked_payload<Payload>>(
        std::move(*this), linked_payload<Payload>{std::move(payload_), t});
  }

  // Attaches `t` (replacing one attached before); a token that can never be stopped attaches nothing.
  // Allocates the canceller that will hold it (std::bad_alloc).
  void set_stop_token(std::stop_token t) {
    if (!t.stop_possible()) return;
    op_canceller* c = new op_canceller(std::move(t));
    delete std::exchange(cancel_, c);
  }

 private:
  template <class, bool, payload>
  friend class io_awaitable;
  friend struct chain_access;
  // The same operation, re-typed (nothrow, linked timeout) with `p` as its payload.
  template <bool OtherThrow, payload OtherPayload>
  io_awaitable(io_awaitable<Result, OtherThrow, OtherPayload>&& o, Payload p) noexcept
      : operation(o), name_(o.name_), cancel_(std::exchange(o.cancel_, nullptr)), payload_(std::move(p)) {}

  // A failed result as the caller sees it: a sleep that ran its course succeeded; an operation its
  // linked timeout (with_timeout, or the task's deadline) cut short timed out.
  std::int32_t failure(std::int32_t r, bool stopped) const noexcept {
    if constexpr (std::is_same_v<Payload, timer_payload> ||
                  std::is_same_v<Payload, linked_payload<timer_payload>>) {
      if (r == -ETIME) return 0;  // (within its linked timeout, if any)
    }
    if (request.link_timeout != nullptr) {
      if (r == -EINTR) r = -ECANCELED;
      if (r == -ECANCELED && !stopped) r = -ETIMEDOUT;
    }
    return r;
  }

  // An operation awaited by a coroutine that has a token or a deadline: without a token of its own, it
  // follows the coroutine's (unless no source can stop it any more).
  [[gnu::noinline]] bool start_following(const std::stop_token& t, deadline* limit) {
    if (cancel_ == nullptr && t.stop_possible()) cancel_ = new op_canceller(t);
    return start_special(executor_access::current(name_), limit);
  }

  [[gnu::noinline]] bool start_special(executor& ex, deadline* limit = nullptr) {
    if (cancel_ != nullptr && cancel_->token.stop_requested()) {
      res = -ECANCELED;
      return false;  // resume at once: nothing was started (await_resume frees the canceller)
    }
    payload_.bind(request);  // pointers into this object are taken only now, when it no longer moves
    if (limit != nullptr && !within(*limit)) {
      res = -ETIMEDOUT;
      return false;
    }
    // With no payload and no deadline nothing is linked to it: a nop, read or write may go straight into
    // the SQ, as a plain one does (a stop before the enter withdraws it there).
    if (std::is_same_v<Payload, no_payload> && limit == nullptr && executor_access::start_inline(ex, *this)) {
      if (cancel_ != nullptr) cancel_->arm_in_sq(*this, ex, executor_access::last_inline_position(ex));
      return true;
    }
    executor_access::submit(ex, *this);
    if (cancel_ != nullptr) cancel_->arm(*this, ex);
    return true;
  }

  // Puts the operation under the task's deadline: a linked timeout at it, unless the operation's own
  // ends sooner. False: the deadline has passed.
  bool within(const deadline& limit) noexcept {
    const std::int64_t now = monotonic_ns();
    if (now >= limit.at_ns()) return false;
    if (const timespec64* own = request.link_timeout; own != nullptr) {
      if (now + ns_of(*own) <= limit.at_ns()) return true;
    }
    request.link_timeout = as_absolute(limit.at());
    return true;
  }

  const char* name_;
  // Owned; exists only while a stop token is attached (with_stop_token, or the awaiting task's), so a
  // plain operation pays one pointer test to know it has none.
  op_canceller* cancel_ = nullptr;
  [[no_unique_address]] Payload payload_;
};

}  // namespace uring::detail
