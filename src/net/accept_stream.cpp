// accept_stream.cpp — the state of a multishot accept, which may outlive the stream that armed it.
//
// The request in flight holds a reference to its state (`self`), dropped with its final completion: so
// a stream destroyed while the kernel still holds the request leaves the state behind, abandoned, to
// close what still arrives and free itself. The executor hands every completion of a multishot operation
// to on_complete, also during its shutdown (operation::multishot), which is what makes that safe.
#include "uring/net/accept_stream.hpp"
#include "executor/executor_state.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <utility>

#include "net/deadline_timer.hpp"

namespace uring::detail {

struct accept_state : operation {
  explicit accept_state(int fd, bool into_slots = false) : listen_fd(fd), direct(into_slots), timer(*this) {
    complete = &on_complete;
    multishot = true;
  }
  accept_state(const accept_state&) = delete;
  accept_state& operator=(const accept_state&) = delete;
  ~accept_state() { drop_ready(); }

  int listen_fd;
  bool direct;             // connections go into slots of the table (accept_direct_stream)
  executor* ex = nullptr;  // where the request was armed
  std::deque<int> ready;   // accepted, not yet taken by next(): fds, or slots where direct
  int error = 0;           // how the last request ended, for the next next() to throw
  bool abandoned = false;  // the stream is gone
  std::coroutine_handle<> waiter;
  std::uint64_t wait = 0;        // numbers the next() calls that suspended, for state_cancel
  std::uint64_t stopped = 0;     // the wait a stop cancelled the request for (0: none)
  std::int64_t deadline_ns = 0;  // the waiting next()'s deadline (CLOCK_MONOTONIC), 0: none
  bool timed_out = false;        // the last wait ended by its deadline, for state_resume
  deadline_timer<accept_state> timer;
  std::shared_ptr<accept_state> self;

  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }

  // A connection nobody will take: its fd closed, or its slot emptied (owner thread).
  void drop(int got) noexcept {
    if (!direct) {
      ::close(got);
    } else if (ex != nullptr) {
      executor_core::empty_slot(*ex, static_cast<unsigned>(got));
    }
  }
  void drop_ready() noexcept {
    for (int got : ready) drop(got);
    ready.clear();
  }

  void arm(executor& e, std::shared_ptr<accept_state> me) {
    // SOCK_CLOEXEC: for plain fds, and for the emulation's dups in slots (the kernel takes no flags there).
    request = {.code = direct ? op_code::accept_multishot_direct : op_code::accept_multishot,
               .fd = listen_fd,
               .op_flags = SOCK_CLOEXEC};
    executor_access::submit(e, *this);
    ex = &e;
    self = std::move(me);
  }

  void cancel() noexcept {
    if (in_flight() && ex != nullptr) executor_access::cancel(*ex, *this);
  }

  void cancel_timer() noexcept {
    if (ex != nullptr) timer.cancel(*ex);
  }

  // The waiter has its result: resume it on a later turn. A timer left armed fires once for nothing (or a
  // later timed next() reuses it).
  void wake() noexcept {
    deadline_ns = 0;
    executor_access::schedule(*ex, std::exchange(waiter, {}));
  }

  // The waiting next()'s deadline: end that wait once passed (the multishot accept keeps running), else
  // make sure the timer fires by then. `me` keeps the state alive while the timer is armed.
  void check_deadline(const std::shared_ptr<accept_state>& me) noexcept {
    if (!waiter || deadline_ns == 0) return;
    if (monotonic_ns() >= deadline_ns) {
      timed_out = true;
      wake();
      return;
    }
    timer.ensure_by(*ex, deadline_ns, me);
  }
  // Fired or cancelled: the waiting next()'s time is up, or re-arm for it.
  void on_timer(const std::shared_ptr<accept_state>& me) noexcept { check_deadline(me); }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<accept_state*>(op);
    const bool final = (s->cqe_flags & kCqeMore) == 0;
    // A stop's cancel reaches the kernel some time after it was asked for (an SQPOLL ring's poller takes
    // it later still); by then the stopped wait may have had a connection and a later one, under no stop,
    // may be waiting. The request ended for that earlier wait: the later one does not fail for it.
    // Only while the executor takes work, so that the wait can be armed again; a shutdown ends it anyway.
    const bool stale_stop = s->res == -ECANCELED && s->stopped != 0 &&
                            !(s->waiter && s->wait == s->stopped) && !s->abandoned && s->ex != nullptr &&
                            executor_core::accepting(*s->ex);
    if (s->res >= 0) {
      if (s->abandoned) {
        s->drop(s->res);
      } else {
        s->ready.push_back(s->res);
      }
    } else if (!stale_stop) {
      s->error = -s->res;
    }
    // A request that ended after a connection is re-armed by the next next() that finds nothing ready:
    // not from here, which may run while the executor shuts down.
    if (s->waiter && (!s->ready.empty() || s->error != 0)) s->wake();
    if (final) {
      s->stopped = 0;
      // Ended by the executor's shutdown: the executor may be gone before the stream is, so forget it;
      // slots not taken close with its table.
      if (s->ex != nullptr && !executor_core::accepting(*s->ex)) {
        if (s->direct) s->ready.clear();
        s->ex = nullptr;
      }
      std::shared_ptr<accept_state> last = std::move(s->self);  // may free *s: nothing may follow
      // A later wait left without a request by a stale stop: armed again for it.
      if (stale_stop && s->waiter) s->arm(*s->ex, std::move(last));
    }
  }
};

struct accept_direct_state : accept_state {
  explicit accept_direct_state(int fd) : accept_state(fd, true) {}
};

}  // namespace uring::detail

namespace uring::net {

template <class Result>
basic_accept_stream<Result>::basic_accept_stream(int listen_fd)
    : state_(std::make_shared<state_type>(listen_fd)) {}

template <class Result>
basic_accept_stream<Result>::~basic_accept_stream() {
  if (!state_) return;  // moved from
  state_->abandoned = true;
  state_->drop_ready();
  state_->cancel();
  state_->cancel_timer();
}

template <class Result>
void basic_accept_stream<Result>::cancel() noexcept {
  if (state_) state_->cancel();
}

template class basic_accept_stream<tcp_stream>;
template class basic_accept_stream<direct_fd>;

}  // namespace uring::net

namespace uring::detail {

bool state_ready(const accept_state& s) noexcept { return !s.ready.empty() || s.error != 0; }

// Only the wait the stop was armed for: a cancel posted from another thread may arrive after that
// next() got its connection, while a later one (under another token, or none) waits.
void state_cancel(accept_state& s, std::uint64_t wait) noexcept {
  if (s.waiter && s.wait == wait && s.in_flight()) {
    s.stopped = wait;
    s.cancel();
  }
}

std::uint64_t state_wait(const accept_state& s) noexcept { return s.wait; }

executor* state_suspend(const std::shared_ptr<accept_state>& s, std::coroutine_handle<> h,
                        std::int64_t deadline) {
  executor& ex = executor_access::current("accept");
  if (s->direct && executor_core::direct_files(ex) == 0) {  // the kernel would say ENFILE
    throw_direct_error(ENXIO, "accept_all_direct", s->listen_fd, nullptr);
  }
  if (!s->in_flight()) s->arm(ex, s);
  s->waiter = h;
  ++s->wait;
  s->deadline_ns = deadline;
  s->check_deadline(s);  // a deadline already passed (a timeout of 0) ends the wait on a later turn
  return &ex;
}

namespace {
// The next connection taken (its fd or slot), or the error that ends this wait thrown.
int take(accept_state& s) {
  const bool timed_out = std::exchange(s.timed_out, false);
  if (!s.ready.empty()) {  // a connection that came with the deadline wins over it
    const int got = s.ready.front();
    s.ready.pop_front();
    return got;
  }
  const op_code code = s.request.code;
  if (timed_out) executor_access::throw_op_error(ETIMEDOUT, "accept", code);
  const int err = std::exchange(s.error, 0);
  executor_access::throw_op_error(err != 0 ? err : ECANCELED, "accept", code);
}
}  // namespace

net::tcp_stream state_resume(accept_state& s) { return net::tcp_stream(take(s)); }

bool state_ready(const accept_direct_state& s) noexcept {
  return state_ready(static_cast<const accept_state&>(s));
}
void state_cancel(accept_direct_state& s, std::uint64_t wait) noexcept {
  state_cancel(static_cast<accept_state&>(s), wait);
}
std::uint64_t state_wait(const accept_direct_state& s) noexcept { return s.wait; }
executor* state_suspend(const std::shared_ptr<accept_direct_state>& s, std::coroutine_handle<> h,
                        std::int64_t deadline) {
  return state_suspend(std::shared_ptr<accept_state>(s), h, deadline);
}
direct_fd state_resume(accept_direct_state& s) { return direct_fd{static_cast<std::uint32_t>(take(s))}; }

}  // namespace uring::detail
