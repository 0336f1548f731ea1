// zc_shutdown.hpp — what an executor's shutdown does about zero-copy sends whose notification does not come.
//
// Provides: detail::zero_copy_sends_waiting, detail::reset_zero_copy_sends, detail::orphan_zero_copy_sends.
// Threads: the executor's owner thread (the sends are listed per thread: uring/detail/send_zc.hpp).
//
// A cancel does not end a zero-copy send whose bytes are queued: its notification comes when the kernel
// frees the pages, and over TCP that waits for the peer to read them (loopback too: the data stays in the
// sender's queue while the peer's window is full). A shutdown that has waited long enough resets those
// connections; if notifications are still missing after that, it closes its ring without them.
#pragma once

#include <cstddef>

namespace uring {
class executor;
}

namespace uring::detail {

// How many of `ex`'s zero-copy sends wait for their last completion.
std::size_t zero_copy_sends_waiting(const executor& ex) noexcept;
// Resets the connections of `ex`'s waiting zero-copy sends (connect(AF_UNSPEC): the queued data is
// dropped, the pages freed, and the notifications follow), skipping a send whose fd was closed (and
// perhaps reused) since: its notification waits for the kernel, and the ring is closed without it.
// Returns how many sends were waiting.
std::size_t reset_zero_copy_sends(executor& ex) noexcept;
// `ex` closed its ring: its listed sends will never complete; each puts its state at rest and drops what
// the request held (the kernel keeps the pages pinned until it frees them itself).
void orphan_zero_copy_sends(executor& ex) noexcept;

}  // namespace uring::detail
