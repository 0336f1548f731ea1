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

#include "net/deadline_timer.hpp"

namespace uring::detail {

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
  deadline_timer<accept_state> timer;
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
