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

struct accept_state : operation {
  explicit accept_state(int fd) : listen_fd(fd) {
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
    if (s->waiter && (!s->ready.empty() || s->error != 0)) {
      executor_access::schedule(*s->ex, std::exchange(s->waiter, {}));
    }
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
}

void accept_stream::cancel() noexcept {
  if (state_) state_->cancel();
}

bool accept_stream::next_awaitable::await_ready() const noexcept {
  return !state_->ready.empty() || state_->error != 0;
}

bool accept_stream::next_awaitable::suspend(std::coroutine_handle<> h) {
  executor& ex = detail::executor_access::current("accept");
  if (!state_->in_flight()) state_->arm(ex, state_);
  state_->waiter = h;
  if (token_.stop_possible()) callback_.emplace(token_, on_stop{state_, &ex});  // may cancel at once
  return true;
}

tcp_stream accept_stream::next_awaitable::await_resume() {
  callback_.reset();
  if (!state_->ready.empty()) {
    int fd = state_->ready.front();
    state_->ready.pop_front();
    return tcp_stream(fd);
  }
  const int err = std::exchange(state_->error, 0);
  detail::executor_access::throw_op_error(err != 0 ? err : ECANCELED, "accept", detail::op_code::accept_multishot);
}

void accept_stream::next_awaitable::on_stop::operator()() const noexcept {
  if (executor::current() == owner) {
    if (auto s = state.lock()) s->cancel();
    return;
  }
  try {
    owner->post([w = state] {
      if (auto s = w.lock()) s->cancel();
    });
  } catch (...) {
    // The executor no longer takes work: it is shutting down, which cancels the request anyway.
  }
}

}  // namespace uring::net
