// zc_step.hpp — one zero-copy send that can be stopped and timed out: write_all's step for large sends.
//
// Provides: detail::zc_step, detail::zc_step_awaitable, detail::send_zc_step. Threads: the awaiting
// coroutine's executor; a stop request may come from any thread.
//
// tcp_stream::send_zc (detail::send_zc_awaitable) lives in the coroutine frame and cannot be cancelled. The
// step write_all needs follows the awaiting task's limits: its deadline (a timer of its own: a linked timeout
// ends with the send's first completion, and the wait for the notification can last as long as the peer does
// not read) and its stop token; see zc_step::interrupt for what they do. A stop from another thread is posted
// to the owner, where it may run after the step has finished, so the step is kept by shared_ptr and the
// posted cancel holds it weakly (detail::state_awaitable). One allocation per step is nothing next to the >=
// 16 KiB it sends.
#pragma once

#include <coroutine>
#include <cstdint>
#include <memory>
#include <stop_token>

#include "uring/buffer.hpp"
#include "uring/detail/operation.hpp"
#include "uring/detail/send_zc.hpp"
#include "uring/detail/state_awaitable.hpp"
#include "uring/error.hpp"

namespace uring::detail {

struct zc_step;

// The step's deadline: a timeout operation at an absolute CLOCK_MONOTONIC time. Flagged multishot so that
// its completion drops `keep` also during a shutdown.
struct zc_timer final : operation {
  zc_step* owner = nullptr;
  timespec64 at{};
  std::shared_ptr<zc_step> keep;  // while in flight
  static void on_complete(operation* op) noexcept;
};

struct zc_step final : operation, std::enable_shared_from_this<zc_step> {
  zc_step(int fd, const_buffer buf) noexcept;
  executor* ex = nullptr;
  std::int64_t deadline_ns = 0;  // CLOCK_MONOTONIC, 0: none
  std::int32_t sent = 0;         // the count, once it came (the notification is still to come)
  bool counted = false;
  int reason = 0;        // ETIMEDOUT or ECANCELED once interrupted
  bool aborted = false;  // interrupted after the count: the connection was reset to get the pages back
  zc_timer timer;
  zc_watch watch;
  std::shared_ptr<zc_step> self;  // while in flight
  // Ends the step with `reason`: before the count, by cancelling the send; after it, the kernel holds the
  // pages until the peer has acknowledged them, which a peer that does not read never does, so the
  // connection is reset (connect(AF_UNSPEC): the queued data is dropped and the notification comes).
  void interrupt(int why) noexcept;
  static void on_complete(operation* op) noexcept;
};

bool state_ready(const zc_step& s) noexcept;
// A step is one send, awaited once: every stop names that one wait.
void state_cancel(zc_step& s, std::uint64_t wait) noexcept;
inline std::uint64_t state_wait(const zc_step& /*s*/) noexcept { return 0; }
// `deadline` (the task's) arms the step's own timer: a linked timeout would end with the send's first
// completion.
executor* state_suspend(const std::shared_ptr<zc_step>& s, std::coroutine_handle<> h, std::int64_t deadline);
// The bytes sent, or -errno: -ETIMEDOUT, -ECANCELED, -EOPNOTSUPP (the socket refuses zero-copy:
// unix-domain), ...
io_result state_resume(zc_step& s) noexcept;

using zc_step_awaitable = state_awaitable<zc_step, io_result>;

bool zc_completion(operation& op, std::int32_t& sent) noexcept;  // send_zc.cpp

// Sends up to buf.size() bytes of `fd` by IORING_OP_SEND_ZC (MSG_NOSIGNAL), by the awaiting task's
// deadline, unless its stop token is stopped; resumes once the kernel has let go of the buffer.
inline zc_step_awaitable send_zc_step(int fd, const_buffer buf) {
  return {std::make_shared<zc_step>(fd, buf), std::stop_token{}};
}

}  // namespace uring::detail
