// deadline.cpp — with_timeout's limit on a task: its lazily armed timer for waits on other coroutines,
// and the settling that never frees that timer in flight.
#include "uring/detail/deadline.hpp"

#include <cerrno>
#include <exception>
#include <mutex>
#include <system_error>
#include <utility>

#include "uring/detail/spin_lock.hpp"
#include "uring/executor.hpp"
#include "uring/task_adapters.hpp"

namespace uring::detail {

// The timer: a timeout operation at the deadline. Its completion is delivered also while an executor
// shuts down (flagged multishot): a settling frame on another executor waits for it, and an orphaned
// block is freed by it.
struct deadline::timer final : operation {
  explicit timer(deadline& d) noexcept : owner(&d), at(d.at_) {
    complete = &deadline::on_timer;
    multishot = true;
    request = {.code = op_code::timeout, .op_flags = kTimeoutAbsolute, .addr = &at};
  }
  spin_lock lock;
  deadline* owner;    // null once the frame went unsettled (under lock)
  bool done = false;  // its completion came (under lock)
  timespec64 at;
};

deadline::deadline(std::int64_t at_ns, std::stop_token outer) noexcept
    : at_ns_(at_ns), at_(timespec_of_ns(at_ns)), outer_(std::move(outer)) {
  cancel_node_.d = this;
  cancel_node_.run = [](remote_node* n) noexcept {
    deadline* d = static_cast<cancel_node*>(n)->d;
    d->settling_ = true;
    if (d->timer_->state != op_state::idle) {
      executor_access::cancel(*d->timer_home_, *d->timer_);  // its completion wakes the settler
    } else {
      d->wake_settler();  // it completed before the cancel arrived
    }
  };
  cancel_node_.discard = nullptr;  // runs during a shutdown too: the settler must hear of the timer
  resume_node_.d = this;
  resume_node_.run = [](remote_node* n) noexcept { static_cast<resume_node*>(n)->d->settler_.resume(); };
  resume_node_.discard = [](remote_node*) noexcept {};  // the settler's executor frees its frame
}

deadline::~deadline() {
  if (timer_ == nullptr) return;
  {
    std::lock_guard lock(timer_->lock);
    if (!timer_->done) {  // unsettled, in flight on another executor: its completion frees it
      timer_->owner = nullptr;
      return;
    }
  }
  delete timer_;
}

std::stop_token deadline::token() {
  if (!source_.stop_possible()) {
    source_ = std::stop_source();
    if (outer_.stop_possible()) forward_.emplace(outer_, forward_stop{this});
    if (monotonic_ns() >= at_ns_) {
      expired_.store(true, std::memory_order_release);
      source_.request_stop();
    } else {
      executor& ex = executor_access::current("with_timeout");
      timer_home_ = &ex;
      timer_ = new timer(*this);
      executor_access::submit(ex, *timer_);
      armed_.store(true, std::memory_order_release);
    }
  }
  return source_.get_token();
}

void deadline::on_timer(operation* op) noexcept {
  auto* t = static_cast<timer*>(op);
  t->lock.lock();
  t->done = true;
  deadline* d = t->owner;
  if (d == nullptr) {  // the frame went unsettled
    t->lock.unlock();
    delete t;
    return;
  }
  if (t->res == -ETIME) {
    d->expired_.store(true, std::memory_order_release);
    d->source_.request_stop();
  }
  if (d->settling_) d->wake_settler();
  t->lock.unlock();  // the last touch: the frame may free the block from here on
}

bool deadline::settle(std::coroutine_handle<> h) noexcept {
  settler_ = h;
  settler_home_ = running_executor();
  if (settler_home_ == timer_home_) {
    if (timer_->state == op_state::idle) return false;  // completed on this thread already
    settling_ = true;
    executor_access::cancel(*timer_home_, *timer_);
    return true;
  }
  // The task ended on another executor than its timer's: the cancel, and the check whether the timer
  // completed, run on the timer's thread, which then sends the resumption back.
  executor_access::post_remote(*timer_home_, cancel_node_);
  return true;
}

void deadline::wake_settler() noexcept {
  armed_.store(false, std::memory_order_release);
  if (settler_home_ == timer_home_) {
    executor_access::schedule(*settler_home_, settler_);
  } else {
    (void)executor_access::send(*settler_home_, resume_node_);  // refused: that executor frees the frame
  }
}

struct wait_stop::both {
  struct forward {
    std::stop_source* s;
    void operator()() const noexcept { s->request_stop(); }
  };
  std::stop_source source;
  std::stop_callback<forward> from_own;
  std::stop_callback<forward> from_deadline;
  both(const std::stop_token& own, std::stop_token limit)
      : from_own(own, forward{&source}), from_deadline(std::move(limit), forward{&source}) {}
};

void wait_stop::both_deleter::operator()(both* b) const noexcept { delete b; }

void wait_stop::follow_both(deadline& d, const std::stop_token& own) {
  if (own == d.outer()) {
    token_ = d.token();
    return;
  }
  // Built in place: the callbacks hold the source's address.
  both_.reset(new both(own, d.token()));
  token_ = both_->source.get_token();
}

void rethrow_under(const deadline& limit, const std::stop_token& outer, std::exception_ptr e) {
  if (limit.expired() && !outer.stop_requested()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::system_error& err) {
      if (err.code() == std::error_code(ECANCELED, std::system_category()))
        throw std::system_error(ETIMEDOUT, std::system_category(), "with_timeout");
    } catch (...) {
    }
  }
  std::rethrow_exception(e);
}

}  // namespace uring::detail
