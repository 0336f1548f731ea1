/// @file
/// uring/executor_histograms.hpp — how an executor's turns and operations are distributed over time.
///
/// Provides: uring::executor_histograms (executor::histograms() returns one; metrics::render exports it).
/// Threads: a copy, taken on the executor's owner thread; read it anywhere.
///
/// Kept only with executor_options::histograms (all empty otherwise): SQEs per submit, CQEs per reap,
/// the time asleep, the time spent resuming coroutines per turn, hops from other executors, and each
/// operation's latency by kind. They cost clock reads per turn, sleep and reap, and a bucket increment per
/// operation (bench/README.md, "Histograms"); off, a test per turn and per completion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "uring/detail/op_code.hpp"
#include "uring/histogram.hpp"

namespace uring {

/// How an executor's turns and operations are distributed over time, kept only with
/// executor_options::histograms (all empty otherwise). Threads: a copy, taken on the executor's owner
/// thread; read it anywhere.
struct executor_histograms {
  /// Per turn that handed operations to the kernel: how many SQEs (natively one io_uring_enter carries
  /// them, unless the SQ filled up; messages flushed between turns count with the next turn's).
  histogram sqes_per_submit;
  /// Per turn that reaped completions: how many.
  histogram cqes_per_reap;
  /// Per sleep (the loop waited in the kernel with nothing else to run): its length, in microseconds.
  histogram asleep_us;
  /// Per turn that resumed coroutines: the microseconds they ran.
  histogram user_us;
  /// By operation kind (indexed by detail::op_code): microseconds from the operation's start (the loop's
  /// clock, read as each turn starts and after its wait) to the reap that delivered its final completion.
  /// Empty without the option.
  std::vector<histogram> latency_us;
  /// Per hand-off from another executor that keeps histograms too (resume_on, submit_to, a spawn there, a
  /// channel's wake-up): microseconds from the sender's turn to the hand-off's run here.
  histogram hop_us;

  /// The latency histogram of `kind`, or nullptr without the option.
  [[nodiscard]] const histogram* latency(detail::op_code kind) const noexcept {
    const auto i = static_cast<std::size_t>(kind);
    return i < latency_us.size() ? &latency_us[i] : nullptr;
  }

  /// Adds `other`'s counts: a group's figures are the sum of its executors'.
  void merge(const executor_histograms& other) {
    sqes_per_submit.merge(other.sqes_per_submit);
    cqes_per_reap.merge(other.cqes_per_reap);
    asleep_us.merge(other.asleep_us);
    user_us.merge(other.user_us);
    hop_us.merge(other.hop_us);
    if (latency_us.size() < other.latency_us.size()) latency_us.resize(other.latency_us.size());
    for (std::size_t i = 0; i < other.latency_us.size(); ++i) latency_us[i].merge(other.latency_us[i]);
  }
};

}  // namespace uring
