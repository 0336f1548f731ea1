// send_zc.cpp — a zero-copy send as one operation with two completions.
//
// The operation is flagged multishot so that the executor hands the first completion (flagged kCqeMore)
// to on_complete rather than ending the operation there, and so that both reach it during a shutdown too
// (the frame then stays alive until the notification is drained, as for any operation in flight).
#include "uring/detail/send_zc.hpp"

#include <cerrno>
#include <utility>

#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/io.hpp"

namespace uring::detail {

send_zc_awaitable::send_zc_awaitable(int fd, const_buffer buf, std::uint32_t msg_flags) noexcept {
  complete = &on_complete;
  multishot = true;
  request = {.code = op_code::send_zc,
             .fd = fd,
             .len = clamp_len(buf.size()),
             .op_flags = msg_flags,
             .addr = const_cast<void*>(buf.data())};
}

bool send_zc_awaitable::await_suspend(std::coroutine_handle<> h) {
  executor& ex = executor_access::current("send_zc");
  if (!executor_access::zero_copy_send(ex)) request.code = op_code::send;  // one completion, same result
  ex_ = &ex;
  waiter = h;
  executor_access::submit(ex, *this);
  return true;
}

std::size_t send_zc_awaitable::await_resume() {
  if (res < 0) throw_errno(-res, "send_zc");
  return static_cast<std::size_t>(res);
}

void send_zc_awaitable::on_complete(operation* self) noexcept {
  auto* me = static_cast<send_zc_awaitable*>(self);
  if (me->cqe_flags & kCqeMore) {  // the count; the notification follows
    me->sent_ = me->res;
    return;
  }
  if (me->cqe_flags & kCqeNotif) me->res = me->sent_;
  // Sockets without zero-copy support (unix-domain ones) refuse the op: send a copy instead.
  if (me->res == -EOPNOTSUPP && me->request.code == op_code::send_zc &&
      executor_access::accepting(*me->ex_)) {
    me->request.code = op_code::send;
    executor_access::submit(*me->ex_, *me);
    return;
  }
  // Possibly during a shutdown: schedule, never resume from here.
  executor_access::schedule(*me->ex_, me->waiter);
}

}  // namespace uring::detail
