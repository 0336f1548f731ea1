// message_util.hpp — the two sides of a raw-message stream that its target stops mid-way, shared by the
// tests that send through an executor& (message_test) and through an executor_handle (handle_test).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include <uring/executor.hpp>
#include <uring/message.hpp>
#include <uring/task.hpp>

namespace uring::test {

// Receives on the running executor, counting into `n`; stops the executor after `stop_after` messages.
inline task<void> receive_then_stop(std::atomic<long>& n, long stop_after) {
  inbox in(*executor::current());
  for (;;) {
    (void)co_await in.receive();
    if (n.fetch_add(1) + 1 == stop_after) executor::current()->stop();
  }
}

// Sends to *to (an executor or an executor_handle) until a send is refused, which must be ESHUTDOWN or
// EPIPE; yields how many sends succeeded.
template <class Target>
task<long> send_until_refused(Target* to) {
  long ok = 0;
  try {
    for (;;) {
      co_await uring::send(*to, 1, static_cast<std::uint64_t>(ok));
      ++ok;
    }
  } catch (const std::system_error& e) {
    EXPECT_TRUE(e.code().value() == ESHUTDOWN || e.code().value() == EPIPE) << e.what();
  }
  co_return ok;
}

}  // namespace uring::test
