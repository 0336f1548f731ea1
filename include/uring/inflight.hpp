/// @file
/// uring/inflight.hpp — what an executor has in flight: each operation's kind, fd, age, tag and cancel.
///
/// Provides: uring::inflight_op, uring::to_string(const inflight_op&), uring::stall_report;
/// executor::inflight and executor_group::inflight are declared with their classes and usable with this
/// header. Threads: plain values; the snapshot is taken on the executor's own thread (see
/// executor::inflight).
///
/// Every operation a coroutine awaits is listed from the moment it is started until its final completion
/// is reaped: queued for the turn's enter, held by the kernel, or waiting in the emulation. The executor's
/// own requests (its wake-up read, shutdown's grace timer) are not. Ages come from the coarse monotonic
/// clock read once per turn, after the turn's wait in the kernel (so an operation started by a completion
/// that ended a long wait is not aged by the wait): exact to a few milliseconds (the kernel's tick), which is
/// what finding a stuck operation needs, at the cost of two stores per operation. A coroutine that holds
/// the loop for longer (a stall, executor_options::stall_after) ages what the turn starts after it by as
/// much.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "uring/op_allowlist.hpp"

namespace uring {

/// One operation in flight on an executor (executor::inflight): listed from the moment it is started until
/// its final completion is reaped. Threads: a plain value.
struct inflight_op {
  op_kind kind = op_kind::nop;  ///< what operation it is
  int fd = -1;                  ///< the fd it works on, or the slot when `direct` (-1: none, e.g. a timeout)
  bool direct = false;          ///< fd is a slot of the executor's direct descriptor table
  std::chrono::milliseconds age{0};  ///< since it was started
  std::string tag{};                 ///< the label given with .tag(), or empty
  bool cancel_requested = false;     ///< a cancel was asked for and the final completion has not come yet
};

/// One line: `read fd=7 age=1250ms tag="client 42 read" cancelling`.
std::string to_string(const inflight_op& op);

/// What the stall watchdog (executor_options::stall_after) saw: an executor's loop that has not come back
/// from running coroutines for `stalled_for` (a coroutine that blocks the thread, or computes without
/// awaiting), and the coroutine it resumed last: its resume function's symbol where the dynamic symbol
/// table has it, else "MODULE+OFFSET" (addr2line -f -C -e MODULE OFFSET names it).
struct stall_report {
  std::chrono::milliseconds stalled_for{0};  ///< how long the loop has been running coroutines
  std::string last_resumed{};                ///< the coroutine resumed last: symbol, or "MODULE+OFFSET"
};

}  // namespace uring
