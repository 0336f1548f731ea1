// executor/watchdog.cpp — the stuck-operation watchdog: a timer of the executor's own that, each time it
// expires, reports the listed operations older than executor_options::stuck_after, once each.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "executor/executor_state.hpp"

namespace uring {

void executor::impl::on_watchdog_tick(detail::operation* op) noexcept {
  impl& im = *static_cast<watchdog_op*>(op)->owner;
  if (op->res == -ETIME) {
    im.report_stuck();  // the loop arms the next tick
  } else if (op->res != -ECANCELED) {
    std::fprintf(stderr, "uring: the stuck-operation watchdog stops: its timer failed (%s)\n",
                 std::strerror(-op->res));
    im.stuck_after = std::chrono::milliseconds{0};
  }
}

void executor::impl::arm_watchdog() noexcept {
  if (queue.closed) return;
  const auto period = std::max(stuck_after / 4, std::chrono::milliseconds{10});
  watchdog_period = {period.count() / 1000, (period.count() % 1000) * 1'000'000};
  watchdog_tick.owner = this;
  watchdog_tick.complete = &on_watchdog_tick;
  watchdog_tick.request = {.code = detail::op_code::timeout, .addr = &watchdog_period};
  queue.push(watchdog_tick);
}

void executor::impl::report_stuck() noexcept {
  const std::uint32_t now = detail::coarse_now_ms();
  const auto limit = static_cast<std::uint32_t>(stuck_after.count());
  try {
    // Gathered first: a report may start or cancel operations, which moves entries of the registry.
    std::vector<inflight_op> stuck;
    queue.live.for_each([&](detail::operation& op) {
      // A timer's age is what it was asked for, not a sign of trouble.
      if (op.reported || op.request.code == detail::op_code::timeout || now - op.since_ms < limit) return;
      op.reported = true;
      stuck.push_back(detail::describe(op, now));
    });
    for (const inflight_op& op : stuck) {
      if (on_stuck) {
        on_stuck(op);
      } else {
        std::fprintf(stderr, "uring: operation in flight past %lldms: %s\n",
                     static_cast<long long>(stuck_after.count()), to_string(op).c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring: the stuck-operation report failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "uring: the stuck-operation report failed\n");
  }
}

}  // namespace uring
