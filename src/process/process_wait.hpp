// process/process_wait.hpp — the two ways process::wait takes a child's exit through its pidfd.
//
// Provides: detail::wait_by_waitid, detail::wait_by_poll, detail::ring_waits_for_children.
// Threads: await them from a coroutine running on an executor.
#pragma once

#include <signal.h>

#include "uring/task.hpp"

namespace uring::detail {

// IORING_OP_WAITID on the pidfd (the emulation: the pidfd in epoll, then waitid(2) with WNOHANG).
task<siginfo_t> wait_by_waitid(int pidfd);
// For a native ring whose kernel lacks IORING_OP_WAITID (before 6.7): a poll of the pidfd (readable once
// the child has exited, kernel 5.3), then waitid(2) with WNOHANG.
task<siginfo_t> wait_by_poll(int pidfd);
// Whether the running executor can take waitid on its ring (emulated, or a kernel with the opcode).
bool ring_waits_for_children();

}  // namespace uring::detail
