// resolver_pool.hpp — the process-wide, bounded pool of threads that run blocking name look-ups.
//
// Provides: net::resolver_pool. Threads: submit() from any thread; jobs run on the pool's threads.
//
// getaddrinfo cannot be made non-blocking or interrupted, so it runs here, never on an executor's thread.
// At most kMaxThreads threads (named "uring-resolve"), started when a job finds no idle one; a thread idle
// for kIdleExit ends, and the next submit() joins it (it keeps its place in the bound until then). At most
// kMaxQueued jobs wait: submit() refuses more with EAGAIN rather than block. The pool is never destroyed (a
// look-up may still run when the process exits); a forked child starts with an empty pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace uring::net {

class resolver_pool {
 public:
  static constexpr std::size_t kMaxThreads = 4;
  static constexpr std::size_t kMaxQueued = 256;
  static constexpr std::chrono::seconds kIdleExit{10};

  // The one pool of the process, made on first use.
  static resolver_pool& instance();

  // Queues `job` for a pool thread. Throws std::system_error: EAGAIN when kMaxQueued jobs already wait,
  // or the error of starting a thread when the pool has none. A job must not throw.
  void submit(std::function<void()> job);

  // Threads started and not yet joined, and jobs waiting (not yet started): a snapshot, for tests and
  // diagnostics.
  [[nodiscard]] std::size_t threads() const;
  [[nodiscard]] std::size_t queued() const;
  // Jobs accepted since the process started.
  [[nodiscard]] std::uint64_t submitted() const;

  struct state;

 private:
  resolver_pool() = default;
};

}  // namespace uring::net
