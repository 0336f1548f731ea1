// time/ticker.cpp — a ticker's state: one multishot timeout natively, else a timer per awaited tick.
//
// The multishot request holds a reference to its state (`self`), dropped with its final completion, so
// a ticker destroyed or cancelled while the kernel still holds the request leaves the state behind to
// end by itself. cancel() starts a fresh state rather than re-arming the old one, whose request may still
// be on its way out.
#include "uring/ticker.hpp"

#include <cerrno>
#include <stdexcept>
#include <utility>

#include "executor/executor_state.hpp"
#include "net/deadline_timer.hpp"
#include "uring/error.hpp"
#include "uring/plan.hpp"

namespace uring::detail {

struct ticker_state : operation {
  explicit ticker_state(std::int64_t period) : period_ns(period), timer(*this) {
    complete = &on_complete;
    multishot = true;
    period_ts = timespec_of_ns(period);
  }
  ticker_state(const ticker_state&) = delete;
  ticker_state& operator=(const ticker_state&) = delete;

  std::int64_t period_ns;
  timespec64 period_ts{};
  executor* ex = nullptr;  // where it was armed
  bool armed = false;      // counting periods since origin_ns
  bool repeat = false;     // by one multishot timeout (else: the deadline timer, per wait)
  std::int64_t origin_ns = 0;
  std::uint64_t ended = 0;  // multishot: ticks reaped
  std::uint64_t taken = 0;  // periods next() has yielded
  int error = 0;            // the request's failure, for the waiting next() to throw
  bool cancelled = false;   // the waiting next() ends with ECANCELED
  bool abandoned = false;   // the ticker is gone, or cancelled into a fresh state
  std::coroutine_handle<> waiter;
  std::uint64_t wait = 0;  // numbers the next() calls that suspended, for state_cancel
  deadline_timer<ticker_state> timer;
  std::shared_ptr<ticker_state> self;  // while the multishot request is in flight

  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }

  // Periods ended and not yet yielded, by the clock. A multishot timeout's completions only wake the
  // waiter: the kernel re-arms it from its completion's task work, so a late task work (a busy SQPOLL
  // thread, a DEFER_TASKRUN ring not entered) loses expiries, and counting completions would drift.
  [[nodiscard]] std::uint64_t due() const noexcept {
    if (!armed) return 0;
    const std::int64_t elapsed = monotonic_ns() - origin_ns;
    auto periods = static_cast<std::uint64_t>(elapsed / period_ns);
    if (repeat && ended > periods) periods = ended;  // never fewer than the kernel has reported
    return periods > taken ? periods - taken : 0;
  }

  void arm(executor& e, const std::shared_ptr<ticker_state>& me) {
    ex = &e;
    origin_ns = monotonic_ns();
    ended = taken = 0;
    error = 0;
    repeat = e.plan().multishot_timeout;
    if (repeat) {
      request = {.code = op_code::timeout, .op_flags = kTimeoutRepeat, .addr = &period_ts};
      executor_access::submit(e, *this);
      self = me;
    }
    armed = true;
  }

  // The fallback's timer, at the end of the period the waiter waits for.
  void ensure_timer(const std::shared_ptr<ticker_state>& me) noexcept {
    const auto next = static_cast<std::int64_t>(taken + 1) * period_ns;
    timer.ensure_by(*ex, origin_ns + next, me);
  }

  void wake() noexcept { executor_access::schedule(*ex, std::exchange(waiter, {})); }

  void end() noexcept {
    abandoned = true;
    if (waiter) {
      cancelled = true;
      wake();
    }
    if (ex == nullptr) return;
    if (in_flight()) executor_access::cancel(*ex, *this);
    timer.cancel(*ex);
  }

  // The deadline timer fired or was cancelled.
  void on_timer(const std::shared_ptr<ticker_state>& me) noexcept {
    if (!waiter) return;
    if (due() > 0) {
      wake();
    } else {
      ensure_timer(me);
    }
  }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<ticker_state*>(op);
    const bool final = (s->cqe_flags & kCqeMore) == 0;
    if (s->res == -ETIME) {
      ++s->ended;
    } else if (s->res != -ECANCELED) {
      s->error = -s->res;
    }
    if (final) s->armed = false;
    if (s->waiter && (s->due() > 0 || s->error != 0 || final)) {
      if (final && s->error == 0 && s->due() == 0) s->cancelled = true;  // ended by a shutdown
      s->wake();
    }
    if (final) {
      if (s->ex != nullptr && !executor_core::accepting(*s->ex)) s->ex = nullptr;
      std::shared_ptr<ticker_state> last = std::move(s->self);  // may free *s: nothing may follow
    }
  }
};

bool state_ready(const ticker_state& s) noexcept { return s.error != 0 || s.due() > 0; }

// Only the wait the stop was armed for; the ticker itself keeps ticking.
void state_cancel(ticker_state& s, std::uint64_t wait) noexcept {
  if (!s.waiter || s.wait != wait) return;
  s.cancelled = true;
  s.wake();
}

std::uint64_t state_wait(const ticker_state& s) noexcept { return s.wait; }

executor* state_suspend(const std::shared_ptr<ticker_state>& s, std::coroutine_handle<> h,
                        std::int64_t /*deadline: none, see state_times_out*/) {
  executor& ex = executor_access::current("ticker");
  if (s->armed && s->ex != &ex) {
    throw std::logic_error("ticker: next() on another executor than the one whose first next() armed it");
  }
  if (!s->armed) s->arm(ex, s);
  s->waiter = h;
  ++s->wait;
  if (!s->repeat) s->ensure_timer(s);
  return &ex;
}

std::uint64_t state_resume(ticker_state& s) {
  if (std::exchange(s.cancelled, false)) uring::throw_errno(ECANCELED, "ticker");
  if (const int err = std::exchange(s.error, 0); err != 0) uring::throw_errno(err, "ticker");
  const std::uint64_t n = s.due();
  s.taken += n;
  return n;
}

}  // namespace uring::detail

namespace uring {

ticker::ticker(std::chrono::nanoseconds period) {
  if (period < std::chrono::microseconds(1))
    throw std::invalid_argument("ticker: the period must be 1 us or more");
  state_ = std::make_shared<detail::ticker_state>(period.count());
}

ticker::~ticker() {
  if (state_) state_->end();
}

void ticker::cancel() {
  if (!state_ || !state_->armed) return;
  state_->end();
  state_ = std::make_shared<detail::ticker_state>(state_->period_ns);
}

std::chrono::nanoseconds ticker::period() const noexcept {
  return std::chrono::nanoseconds(state_ ? state_->period_ns : 0);  // moved from: 0
}

}  // namespace uring
