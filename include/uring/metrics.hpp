/// @file
/// uring/metrics.hpp — an executor's figures in the Prometheus text format, for a /metrics endpoint.
///
/// Provides: uring::metrics::executor_sample, uring::metrics::sample_of, uring::metrics::render.
/// Threads: sample_of on the executor's own thread (from a coroutine on it, or submit_to it); render
/// anywhere.
///
/// render() writes the text exposition format (version 0.0.4, "text/plain; version=0.0.4"): every counter of
/// executor_stats as a family `uring_<name>_total`, operations started by kind as
/// `uring_operations_started_total{kind="read"}`, and the operations in flight as the gauge
/// `uring_operations_in_flight`; the histograms of executor_histograms as Prometheus histograms
/// (`uring_sqes_per_submit`, `uring_cqes_per_reap`, `uring_asleep_microseconds`,
/// `uring_turn_user_microseconds`, `uring_hop_microseconds`, and
/// `uring_operation_latency_microseconds{kind="read"}` for each kind completed), their buckets at le="0",
/// "1", "3", "7", ... (2^k - 1, where the histogram's own buckets split exactly) up to the first that holds
/// every value, then "+Inf"; each sample labelled with its executor's index, executor="0", "1", ...
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "uring/executor.hpp"

namespace uring::metrics {

/// One executor's figures at one moment, for render(). Threads: a plain value, taken by sample_of on the
/// executor's own thread.
struct executor_sample {
  /// executor::stats()
  executor_stats stats;
  std::size_t in_flight = 0;       ///< executor::operations_in_flight()
  executor_histograms histograms;  ///< executor::histograms()
};

/// `ex`'s figures now. Owner thread.
executor_sample sample_of(const executor& ex);

/// The figures of `executors` (the i-th labelled executor="i"), in the Prometheus text format.
std::string render(std::span<const executor_sample> executors);

}  // namespace uring::metrics
