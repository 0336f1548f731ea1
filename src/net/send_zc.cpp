// send_zc.cpp — a zero-copy send as one operation with two completions: tcp_stream::send_zc, and write_all's
// step for large sends (zc_step.hpp).
//
// The operation is flagged multishot so that the executor hands the first completion (flagged kCqeMore)
// to on_complete rather than ending the operation there, and so that both reach it during a shutdown too
// (the frame then stays alive until the notification is drained, as for any operation in flight).
#include "uring/detail/send_zc.hpp"
#include "executor/executor_state.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "net/zc_shutdown.hpp"
#include "net/zc_step.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/io.hpp"

namespace uring::detail {

namespace {
thread_local zc_watch* t_watched = nullptr;  // the thread's listed sends, newest first

// The send that copies, for a zero-copy one: the same buffer, registered or not.
op_code copying(op_code zc) noexcept {
  return zc == op_code::send_zc_fixed ? op_code::send_fixed : op_code::send;
}
}  // namespace

void zc_watch::list(executor& e, operation& send) noexcept {
  unlist();
  ex = &e;
  op = &send;
  struct stat st {};
  inode = ::fstat(send.request.fd, &st) == 0 ? st.st_ino : 0;
  prev = nullptr;
  next = t_watched;
  if (next != nullptr) next->prev = this;
  t_watched = this;
  listed = true;
}

void zc_watch::unlist() noexcept {
  if (!listed) return;
  (prev != nullptr ? prev->next : t_watched) = next;
  if (next != nullptr) next->prev = prev;
  prev = next = nullptr;
  listed = false;
}

std::size_t zero_copy_sends_waiting(const executor& ex) noexcept {
  std::size_t n = 0;
  for (const zc_watch* w = t_watched; w != nullptr; w = w->next) n += w->ex == &ex ? 1 : 0;
  return n;
}

std::size_t reset_zero_copy_sends(executor& ex) noexcept {
  std::size_t n = 0;
  for (const zc_watch* w = t_watched; w != nullptr; w = w->next) {
    if (w->ex != &ex) continue;
    ++n;
    // Not a socket that took the number of one closed meanwhile (its send is the ring's to end).
    struct stat st {};
    if (::fstat(w->op->request.fd, &st) != 0 || st.st_ino != w->inode) continue;
    sockaddr none{};
    none.sa_family = AF_UNSPEC;
    (void)::connect(w->op->request.fd, &none, sizeof none);  // drops the queued data: its pages are freed
  }
  return n;
}

void orphan_zero_copy_sends(executor& ex) noexcept {
  for (zc_watch* w = t_watched; w != nullptr;) {
    zc_watch* next = w->next;  // an orphaned send may free itself (and its node)
    if (w->ex == &ex) {
      w->unlist();
      w->orphan(w->op);
    }
    w = next;
  }
}

// One completion of a zero-copy send: the count, flagged kCqeMore (kept in `sent`; false: the notification
// follows), or the last one (true), whose res is then the count (after a notification) or the result.
bool zc_completion(operation& op, std::int32_t& sent) noexcept {
  if (op.cqe_flags & kCqeMore) {
    sent = op.res;
    return false;
  }
  if (op.cqe_flags & kCqeNotif) op.res = sent;
  return true;
}

send_zc_awaitable::send_zc_awaitable(int fd, const_buffer buf, std::uint32_t msg_flags) noexcept {
  complete = &on_complete;
  multishot = true;
  // Its frame goes with the executor's: nothing to free, only the state to put at rest.
  watch_.orphan = [](operation* op) noexcept { op->state = op_state::idle; };
  request = {.code = op_code::send_zc,
             .fd = fd,
             .len = clamp_len(buf.size()),
             .op_flags = msg_flags,
             .addr = const_cast<void*>(buf.data())};
}

bool send_zc_awaitable::await_suspend(std::coroutine_handle<> h) {
  executor& ex = executor_access::current("send_zc");
  if (!executor_core::zero_copy_send(ex))
    request.code = copying(request.code);  // one completion, same result
  ex_ = &ex;
  waiter = h;
  executor_access::submit(ex, *this);
  if (request.code == op_code::send_zc || request.code == op_code::send_zc_fixed) watch_.list(ex, *this);
  return true;
}

std::size_t send_zc_awaitable::await_resume() {
  if (res < 0) throw_errno(-res, "send_zc");
  return static_cast<std::size_t>(res);
}

void send_zc_awaitable::on_complete(operation* self) noexcept {
  auto* me = static_cast<send_zc_awaitable*>(self);
  if (!zc_completion(*me, me->sent_)) return;
  me->watch_.unlist();
  // Sockets without zero-copy support (unix-domain ones) refuse the op: send a copy instead.
  const op_code code = me->request.code;
  if (me->res == -EOPNOTSUPP && (code == op_code::send_zc || code == op_code::send_zc_fixed) &&
      executor_core::accepting(*me->ex_)) {
    me->request.code = copying(code);
    executor_access::submit(*me->ex_, *me);
    return;
  }
  // Possibly during a shutdown: schedule, never resume from here.
  executor_access::schedule(*me->ex_, me->waiter);
}

}  // namespace uring::detail

namespace uring::detail {

zc_step::zc_step(int fd, const_buffer buf) noexcept {
  complete = &on_complete;
  multishot = true;  // two completions, both seen (also during a shutdown)
  request = {.code = op_code::send_zc,
             .fd = fd,
             .len = clamp_len(buf.size()),
             .op_flags = MSG_NOSIGNAL,
             .addr = const_cast<void*>(buf.data())};
  timer.owner = this;
  timer.complete = &zc_timer::on_complete;
  timer.multishot = true;
  // The ring is gone: no completion will drop the request's reference.
  watch.orphan = [](operation* op) noexcept {
    auto* me = static_cast<zc_step*>(op);
    me->state = op_state::idle;
    me->timer.state = op_state::idle;
    me->timer.keep.reset();
    std::shared_ptr<zc_step> keep = std::move(me->self);
  };
}

void zc_step::interrupt(int why) noexcept {
  if (state == op_state::idle || reason != 0) return;  // done, or being ended already
  reason = why;
  if (!counted) {
    executor_access::cancel(*ex, *this);
    return;
  }
  aborted = true;
  sockaddr none{};
  none.sa_family = AF_UNSPEC;
  (void)::connect(request.fd, &none, sizeof none);
}

void zc_step::on_complete(operation* op) noexcept {
  auto* me = static_cast<zc_step*>(op);
  if (me->cqe_flags & kCqeMore) me->counted = true;
  if (!zc_completion(*me, me->sent)) return;
  me->watch.unlist();
  std::shared_ptr<zc_step> keep = std::move(me->self);  // frees it at the end at the latest
  if (me->timer.state != op_state::idle) executor_access::cancel(*me->ex, me->timer);
  if (me->waiter) executor_access::schedule(*me->ex, std::exchange(me->waiter, {}));
}

void zc_timer::on_complete(operation* op) noexcept {
  auto* me = static_cast<zc_timer*>(op);
  std::shared_ptr<zc_step> keep = std::move(me->keep);
  if (me->res == -ETIME) me->owner->interrupt(ETIMEDOUT);
}

bool state_ready(const zc_step& /*s*/) noexcept { return false; }

void state_cancel(zc_step& s, std::uint64_t /*wait*/) noexcept { s.interrupt(ECANCELED); }

executor* state_suspend(const std::shared_ptr<zc_step>& s, std::coroutine_handle<> h, std::int64_t deadline) {
  executor& ex = executor_access::current("write_all");
  s->ex = &ex;
  s->deadline_ns = deadline;
  s->waiter = h;
  s->self = s;
  executor_access::submit(ex, *s);
  s->watch.list(ex, *s);
  if (s->deadline_ns != 0) {
    s->timer.at = timespec_of_ns(s->deadline_ns);
    s->timer.request = {.code = op_code::timeout, .op_flags = kTimeoutAbsolute, .addr = &s->timer.at};
    s->timer.keep = s;
    executor_access::submit(ex, s->timer);
  }
  return &ex;
}

io_result state_resume(zc_step& s) noexcept {
  if (s.aborted || (s.reason != 0 && (s.res == -ECANCELED || s.res == -EINTR))) return io_result{-s.reason};
  return io_result{s.res};
}

}  // namespace uring::detail
