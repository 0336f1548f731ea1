/// @file
/// uring/executor_group.hpp — N executors on N threads, one call from main.
///
/// Provides: uring::executor_group.
/// Threads: construct, stop, join and destroy it from one thread; next(), at() and size() from any thread;
/// the executors themselves accept post / spawn(target, ...) / resume_on from any thread.
///
/// Each worker thread constructs its executor (so its ring belongs to that thread, with its fd
/// registered), then runs it until stop(). Stopping is two-phase: every executor first cancels and drains
/// its operations, and only when all have done so does any of them free its coroutine frames, so a
/// coroutine that moved between executors (resume_on) is never freed while another ring still holds one
/// of its operations. An exception escaping a worker's spawned task stops the whole group and is
/// rethrown by join().
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <vector>

#include "uring/executor.hpp"
#include "uring/executor_options.hpp"

namespace uring {

/// N executors on N threads, one call from main; the file's comment describes the two-phase stop.
///
/// Threads: construct, stop, join and destroy it from one thread; next(), at() and size() from any
/// thread; the executors themselves accept post / spawn(target, ...) / resume_on from any thread.
class executor_group {
 public:
  /// Starts `n` (>= 1) threads and returns once every executor is constructed and can take work. With
  /// `pin_threads`, worker i is pinned to CPU i modulo the CPUs this process may use.
  explicit executor_group(std::size_t n, const executor_options& opts = {}, bool pin_threads = false);
  ~executor_group();  ///< stop(), join() (an exception it would rethrow is printed), end the threads
  executor_group(const executor_group&) = delete;
  executor_group& operator=(const executor_group&) = delete;

  /// The number of executors (threads). Any thread.
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] executor& at(std::size_t i);  ///< std::out_of_range past size()
  [[nodiscard]] executor& next() noexcept;    ///< round robin, any thread
  /// executor::inflight of every member, in order (uring/inflight.hpp). Blocks the calling thread while
  /// each member's loop takes its snapshot: call it from a thread outside the group.
  [[nodiscard]] std::vector<std::vector<inflight_op>> inflight(
      std::chrono::milliseconds limit = std::chrono::seconds(5));

  /// Asks every executor to stop; returns at once. Work posted afterwards is refused (ESHUTDOWN).
  void stop() noexcept;
  /// Waits until every executor has stopped and freed its coroutines; rethrows the first exception that
  /// escaped a worker's run(). The executors stay valid (refusing work with ESHUTDOWN) until destruction.
  void join();

 private:
  struct shared;
  std::unique_ptr<shared> shared_;
};

}  // namespace uring
