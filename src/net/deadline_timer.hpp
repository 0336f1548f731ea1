// deadline_timer.hpp — the timer behind timed waits on a long-lived request: a leased receive, an accept
// stream's next().
//
// Provides: detail::deadline_timer<Owner>.
// Threads: the owner's executor only.
//
// One timeout operation per state, armed at a CLOCK_MONOTONIC deadline. It stays armed after a wait is
// served (a later timed wait reuses it, or it fires once for nothing), and is cancelled when a wait needs an
// earlier deadline: its completion re-arms. While in flight it holds a reference to its owner. Flagged
// multishot as the owners are: its completion must drop that reference, also during a shutdown.
// Owner provides `bool abandoned` and `void on_timer(const std::shared_ptr<Owner>&) noexcept` (the timer
// fired or was cancelled: end the waiting wait if its time is up, else call ensure_by again).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "executor/executor_state.hpp"
#include "uring/detail/operation.hpp"
#include "uring/executor.hpp"

namespace uring::detail {

template <class Owner>
class deadline_timer final : public operation {
 public:
  explicit deadline_timer(Owner& o) : owner_(&o) {
    complete = &on_complete;
    multishot = true;
  }

  [[nodiscard]] bool in_flight() const noexcept { return state != op_state::idle; }

  // Makes sure the timer fires by `deadline_ns`: arms it, or cancels one armed for later. Nothing once
  // the executor takes no new operations (it is shutting down: the wait ends anyway).
  void ensure_by(executor& ex, std::int64_t deadline_ns, std::shared_ptr<Owner> me) noexcept {
    if (in_flight()) {
      if (at_ns_ > deadline_ns) cancel(ex);
      return;
    }
    if (!executor_core::accepting(ex)) return;
    at_ns_ = deadline_ns;
    at_ = timespec_of_ns(deadline_ns);
    request = {.code = op_code::timeout, .op_flags = kTimeoutAbsolute, .addr = &at_};
    keep_ = std::move(me);
    executor_access::submit(ex, *this);
  }

  void cancel(executor& ex) noexcept {
    if (!in_flight() || cancelling_) return;
    cancelling_ = true;
    executor_access::cancel(ex, *this);
  }

 private:
  static void on_complete(operation* op) noexcept {
    auto* t = static_cast<deadline_timer*>(op);
    std::shared_ptr<Owner> keep = std::move(t->keep_);  // frees the owner at the end at the latest
    t->cancelling_ = false;
    if (!keep || t->owner_->abandoned) return;
    t->owner_->on_timer(keep);
  }

  Owner* owner_;
  timespec64 at_{};
  std::int64_t at_ns_ = 0;
  bool cancelling_ = false;
  std::shared_ptr<Owner> keep_;  // while in flight
};

}  // namespace uring::detail
