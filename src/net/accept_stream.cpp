// accept_stream.cpp — the state of a multishot accept, which may outlive the stream that armed it.
//
// The request in flight holds a reference to its state (`self`), dropped with its final completion: so
// a stream destroyed while the kernel still holds the request leaves the state behind, abandoned, to
// close what still arrives and free itself. The executor hands every completion of a multishot operation
// to on_complete, also during its shutdown (operation::multishot), which is what makes that safe.
#include "uring/net/accept_stream.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <utility>

namespace uring::detail {

struct accept_state;

// The timer behind timed next() calls: one timeout operation, armed at a CLOCK_MONOTONIC deadline.
// Flagged multishot as the state is: its completion must drop `keep`, also during a shutdown.
struct accept_timer final : operation {
  explicit accept_timer(accept_state& s) : owner(&s) {
    complete = &on_complete;
    multishot = true;
  }
  accept_state* owner;
  timespec64 at;
  std::int64_t at_ns = 0;
  bool cancelling = false;
  std::shared_ptr<accept_state> keep;  // while in flight
  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }
  static void on_complete(operation* op) noexcept;
};

struct accept_state : operation {
  explicit accept_state(int fd) : listen_fd(fd), timer(*this) {
    complete = &on_complete;
    multishot = true;
  }
  accept_state(const accept_state&) = delete;
  accept_state& operator=(const accept_state&) = delete;
  ~accept_state() {
    for (int fd : ready) ::close(fd);
  }

  int listen_fd;
  executor* ex = nullptr;       // where the request was armed
  std::deque<int> ready;        // accepted, not yet taken by next()
  int error = 0;                // how the last request ended, for the next next() to throw
  bool abandoned = false;       // the stream is gone
  std::coroutine_handle<> waiter;
  std::uint64_t wait = 0;  // numbers the next() calls that suspended, for state_cancel
  std::int64_t deadline_ns = 0;  // the waiting next()'s deadline (CLOCK_MONOTONIC), 0: none
  bool timed_out = false;        // the last wait ended by its deadline, for state_resume
  accept_timer timer;
  std::shared_ptr<accept_state> self;

  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }

  void arm(executor& e, std::shared_ptr<accept_state> me) {
    request = {.code = op_code::accept_multishot, .fd = listen_fd, .op_flags = SOCK_CLOEXEC};
    executor_access::submit(e, *this);
    ex = &e;
    self = std::move(me);
  }

  void cancel() noexcept {
    if (in_flight() && ex != nullptr) executor_access::cancel(*ex, *this);
  }

  void cancel_timer() noexcept {
    if (timer.in_flight() && !timer.cancelling && ex != nullptr) {
      timer.cancelling = true;
      executor_access::cancel(*ex, timer);
    }
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
    if (timer.in_flight()) {
      // Armed for a later time (an earlier wait's deadline): cancel it; its completion re-arms.
      if (timer.at_ns > deadline_ns) cancel_timer();
      return;
    }
    if (!executor_access::accepting(*ex)) return;
    timer.at_ns = deadline_ns;
    timer.at = {deadline_ns / 1'000'000'000, deadline_ns % 1'000'000'000};
    timer.request = {.code = op_code::timeout, .op_flags = kTimeoutAbsolute, .addr = &timer.at};
    timer.keep = me;
    executor_access::submit(*ex, timer);
  }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<accept_state*>(op);
    const bool final = (s->cqe_flags & kCqeMore) == 0;
    if (s->res >= 0) {
      if (s->abandoned) {
        ::close(s->res);
      } else {
        s->ready.push_back(s->res);
      }
    } else {
      s->error = -s->res;
    }
    // A request that ended after a connection is re-armed by the next next() that finds nothing ready:
    // not from here, which may run while the executor shuts down.
    if (s->waiter && (!s->ready.empty() || s->error != 0)) s->wake();
    if (final) {
      std::shared_ptr<accept_state> last = std::move(s->self);  // may free *s: nothing may follow
    }
  }
};

}  // namespace uring::detail

namespace uring::net {

accept_stream::accept_stream(int listen_fd) : state_(std::make_shared<detail::accept_state>(listen_fd)) {}

accept_stream::~accept_stream() {
  if (!state_) return;  // moved from
  state_->abandoned = true;
  for (int fd : state_->ready) ::close(fd);
  state_->ready.clear();
  state_->cancel();
  state_->cancel_timer();
}

void accept_stream::cancel() noexcept {
  if (state_) state_->cancel();
}

}  // namespace uring::net

namespace uring::detail {

bool state_ready(const accept_state& s) noexcept { return !s.ready.empty() || s.error != 0; }

// Only the wait the stop was armed for: a cancel posted from another thread may arrive after that
// next() got its connection, while a later one (under another token, or none) waits.
void state_cancel(accept_state& s, std::uint64_t wait) noexcept {
  if (s.waiter && s.wait == wait) s.cancel();
}

std::uint64_t state_wait(const accept_state& s) noexcept { return s.wait; }

executor* state_suspend(const std::shared_ptr<accept_state>& s, std::coroutine_handle<> h, std::int64_t deadline) {
  executor& ex = executor_access::current("accept");
  if (!s->in_flight()) s->arm(ex, s);
  s->waiter = h;
  ++s->wait;
  s->deadline_ns = deadline;
  s->check_deadline(s);  // a deadline already passed (a timeout of 0) ends the wait on a later turn
  return &ex;
}

void accept_timer::on_complete(operation* op) noexcept {
  auto* t = static_cast<accept_timer*>(op);
  std::shared_ptr<accept_state> keep = std::move(t->keep);  // frees the state at the end at the latest
  t->cancelling = false;
  if (t->owner->abandoned || !keep) return;
  t->owner->check_deadline(keep);  // fired or cancelled: the waiting next()'s time is up, or re-arm for it
}

net::tcp_stream state_resume(accept_state& s) {
  const bool timed_out = std::exchange(s.timed_out, false);
  if (!s.ready.empty()) {  // a connection that came with the deadline wins over it
    int fd = s.ready.front();
    s.ready.pop_front();
    return net::tcp_stream(fd);
  }
  if (timed_out) detail::executor_access::throw_op_error(ETIMEDOUT, "accept", detail::op_code::accept_multishot);
  const int err = std::exchange(s.error, 0);
  detail::executor_access::throw_op_error(err != 0 ? err : ECANCELED, "accept", detail::op_code::accept_multishot);
}

}  // namespace uring::detail
