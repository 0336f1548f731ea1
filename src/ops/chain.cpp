// ops/chain.cpp — a chain's steps in flight: linked in one submit natively, one at a time emulated, and
// the stop or time-out that cuts them short (uring/chain.hpp).
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>

#include "uring/chain.hpp"

#include "ops/op_table.hpp"
#include "uring/plan.hpp"

namespace uring::detail {

namespace {

// The bytes a read or write asks for, where the kernel fails a link on a short one; 0 where it does not.
std::uint64_t bytes_asked(const io_request& r) noexcept {
  switch (r.code) {
    case op_code::read:
    case op_code::write:
    case op_code::read_fixed:
    case op_code::write_fixed:
      return r.len;
    case op_code::readv:
    case op_code::writev: {
      std::uint64_t total = 0;
      const auto* iov = static_cast<const ::iovec*>(r.addr);
      for (std::uint32_t i = 0; i < r.len; ++i) total += iov[i].iov_len;
      return total;
    }
    case op_code::recv:
    case op_code::send:
    case op_code::send_fixed:
      return (r.op_flags & MSG_WAITALL) != 0 ? r.len : 0;
    default:
      return 0;
  }
}

// Whether the step's completion ends a chain: a negative result, or a short read or write.
bool breaks_link(const chain_node& n) noexcept {
  return n.res < 0 || static_cast<std::uint64_t>(n.res) < bytes_asked(n.request);
}

}  // namespace

bool chain_base::start(executor& ex, std::coroutine_handle<> waiter, const std::stop_token& inherited) {
  if (executor_access::closed(ex)) executor_access::refuse_while_closed();
  ex_ = &ex;
  waiter_ = waiter;
  if (token == std::stop_token{}) token = inherited;
  bool refused = false;
  for (unsigned i = 0; i < count; ++i) refused |= executor_access::refuses(ex, nodes[i].request.code);
  if (refused || token.stop_requested()) {
    // Nothing reaches the kernel: a refused step says EACCES, every other one ECANCELED.
    for (unsigned i = 0; i < count; ++i) {
      nodes[i].res = refused && executor_access::refuses(ex, nodes[i].request.code) ? -EACCES : -ECANCELED;
    }
    return false;
  }
  linked_ = ex.plan().linked_chains;
  pending_ = count;
  for (unsigned i = 0; i < count; ++i) {
    chain_node& n = nodes[i];
    n.owner = this;
    n.complete = &chain_base::on_step;
    n.res = -ECANCELED;  // what a step that never starts says
  }
  start_run(0);
  if (timed) {
    timer_.owner = this;
    timer_.name = "chain";
    timer_.complete = &chain_base::on_timer;
    timer_.request = io_request{.code = op_code::timeout, .addr = &limit};
    executor_access::submit(ex, timer_);
  }
  if (token.stop_possible()) {
    canceller_ = new op_canceller(token);
    canceller_->cancel_all = &chain_base::cancel_chain;
    canceller_->arm(nodes[0], ex);  // may run at once
  }
  return true;
}

void chain_base::bound_by(const deadline& d) noexcept {
  const std::int64_t left = std::max<std::int64_t>(d.at_ns() - monotonic_ns(), 0);
  if (timed && ns_of(limit) <= left) return;
  timed = true;
  limit = timespec_of_ns(left);
}

void chain_base::end() noexcept {
  if (canceller_ != nullptr) {
    if (canceller_->finish()) stopping_ = true;  // frees it
    canceller_ = nullptr;
  }
}

std::int32_t chain_base::result(unsigned i) const noexcept {
  std::int32_t r = nodes[i].res;
  // A step interrupted in an io-wq worker says EINTR: it was cancelled.
  if (r == -EINTR && stopping_) r = -ECANCELED;
  if (r == -ECANCELED && timed_out_) r = -ETIMEDOUT;
  return r;
}

void chain_base::throw_if_failed() const {
  for (unsigned i = 0; i < count; ++i) {
    const std::int32_t r = result(i);
    if (r >= 0) continue;
    std::string what =
        "chain step " + std::to_string(i + 1) + " of " + std::to_string(count) + " (" + nodes[i].name + ")";
    if (r == -ECANCELED && i > 0 && link == kLinkNext && !stopping_ && nodes[i - 1].res >= 0) {
      what += " not run: step " + std::to_string(i) + " (" + nodes[i - 1].name + ") moved " +
              std::to_string(nodes[i - 1].res) + " of " + std::to_string(bytes_asked(nodes[i - 1].request)) +
              " bytes";
    }
    throw std::system_error(-r, std::system_category(), what);
  }
}

void chain_base::on_step(operation* op) noexcept {
  auto* n = static_cast<chain_node*>(op);
  n->owner->step_done(static_cast<unsigned>(n - n->owner->nodes));
}

void chain_base::on_timer(operation* op) noexcept {
  chain_base& c = *static_cast<chain_node*>(op)->owner;
  if (op->res == -ETIME && c.pending_ > 0) {
    c.timed_out_ = true;
    c.cancel_steps();
  }
  c.resume_if_done();
}

void chain_base::cancel_chain(operation* first, executor& /*ex*/) noexcept {
  chain_base& c = *static_cast<chain_node*>(first)->owner;
  if (c.pending_ > 0) c.cancel_steps();
}

// Starts the steps from `first` as one run: linked up to the first step whose failure the kernel would
// not turn into a failed link (or the last step), each step alone where the ring does not link them. The
// run's steps go in one after another, so that the kernel sees them next to each other in the SQ.
void chain_base::start_run(unsigned first) {
  unsigned last = first;
  if (linked_) {
    while (last + 1u < count && (link == kLinkHard || op_info(nodes[last].request.code).fails_link)) ++last;
  }
  run_end_ = last;
  for (unsigned i = first; i <= last; ++i) {
    nodes[i].request.link = i < last ? link : 0;
    nodes[i].request.chain_sqes = i == first ? static_cast<std::uint8_t>(last - first + 1u) : 0;
    executor_access::submit(*ex_, nodes[i]);
  }
}

void chain_base::step_done(unsigned i) noexcept {
  --pending_;
  if (i == run_end_ && i + 1u < count) {
    // The end of a run: the library's link. Start the next run, or end the steps left as the kernel would.
    const bool next =
        !stopping_ && (link == kLinkHard || !breaks_link(nodes[i])) && !executor_access::closed(*ex_);
    if (next) {
      start_run(i + 1u);
    } else {
      pending_ -= count - 1u - i;  // they keep the ECANCELED they were given
    }
  } else if (stopping_ && link == kLinkHard) {
    cancel_steps();  // the kernel starts a hard link's next step whatever happened: cancel it as it starts
  }
  resume_if_done();
}

void chain_base::cancel_steps() noexcept {
  stopping_ = true;
  bool sent = false;
  for (unsigned i = 0; i < count; ++i) {
    if (nodes[i].state != op_state::idle) {
      executor_access::cancel(*ex_, nodes[i]);
      sent = true;
    }
  }
  // Made while completions are delivered: the cancels must reach the kernel before the steps' memory can
  // be reused by whatever the awaiting coroutine does next.
  if (sent) executor_access::flush(*ex_);
}

void chain_base::resume_if_done() noexcept {
  if (pending_ > 0) return;
  if (timed && timer_.state != op_state::idle) {
    if (!timer_.cancel_sent) {
      executor_access::cancel(*ex_, timer_);
      executor_access::flush(*ex_);
    }
    return;  // the timer's own completion resumes
  }
  waiter_.resume();
}

}  // namespace uring::detail
