// executor/metrics.cpp — the Prometheus text rendering of executor figures.
#include "uring/metrics.hpp"

#include <cstdint>

#include "uring/op_allowlist.hpp"

namespace uring::metrics {

namespace {

struct counter {
  const char* name;  // uring_<name>_total
  const char* help;
  std::uint64_t executor_stats::*field;
};

constexpr counter kCounters[] = {
    {"enters", "io_uring_enter calls (submit, wait, or both)", &executor_stats::enters},
    {"waits", "enters that waited for a completion", &executor_stats::waits},
    {"sqes", "operations handed to the kernel", &executor_stats::sqes},
    {"cqes", "completions reaped", &executor_stats::cqes},
    {"sq_full_flushes", "early submits: the SQ was full", &executor_stats::sq_full_flushes},
    {"cq_backlogged", "completions parked while the kernel reported a busy CQ",
     &executor_stats::cq_backlogged},
    {"cq_overflows", "reaps that found completions kept aside by the kernel", &executor_stats::cq_overflows},
    {"registered_ring_fallbacks", "rings whose fd could not be registered",
     &executor_stats::registered_ring_fallbacks},
    {"cancels", "cancel requests sent for operations in flight", &executor_stats::cancels},
    {"messages_sent_by_ring", "hand-offs sent to other executors with MSG_RING",
     &executor_stats::messages_sent_by_ring},
    {"messages_received", "MSG_RING hand-offs received", &executor_stats::messages_received},
    {"busy_poll_hits", "idle turns that found work while busy polling", &executor_stats::busy_poll_hits},
    {"doorbells", "mailbox wake-ups that came as a CQE", &executor_stats::doorbells},
    {"raw_messages_sent", "raw messages sent", &executor_stats::raw_messages_sent},
    {"raw_messages_received", "raw messages received", &executor_stats::raw_messages_received},
    {"messages_failed", "raw messages the kernel refused after their send completed",
     &executor_stats::messages_failed},
    {"interest_changes", "emulated backend: epoll_ctl calls arming or disarming waited-on fds",
     &executor_stats::interest_changes},
};

void family_head(std::string& out, const std::string& name, const char* help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// A sample's labels, left open for more: {executor="i" or {executor="i",kind="k".
std::string open_labels(std::size_t executor, const char* kind) {
  std::string labels = "{executor=\"" + std::to_string(executor) + "\"";
  if (kind != nullptr) labels += std::string(",kind=\"") + kind + "\"";
  return labels;
}

void sample_line(std::string& out, const std::string& name, std::size_t executor, const char* kind,
                 std::uint64_t value) {
  out += name + open_labels(executor, kind) + "} " + std::to_string(value) + "\n";
}

// One histogram's samples: cumulative counts at le = 2^k - 1 (the histogram's buckets split exactly
// there), up to the first that holds every value, then +Inf, _sum and _count.
void histogram_lines(std::string& out, const std::string& name, std::size_t executor, const char* kind,
                     const histogram& h) {
  const std::string labels = open_labels(executor, kind);
  for (unsigned k = 0; k <= histogram::kTopBit; ++k) {
    const std::uint64_t le = (std::uint64_t{1} << k) - 1;
    out += name + "_bucket" + labels + ",le=\"" + std::to_string(le) + "\"} " +
           std::to_string(h.count_at_most(le)) + "\n";
    if (le >= h.max()) break;
  }
  out += name + "_bucket" + labels + ",le=\"+Inf\"} " + std::to_string(h.count()) + "\n";
  out += name + "_sum" + labels + "} " + std::to_string(h.sum()) + "\n";
  out += name + "_count" + labels + "} " + std::to_string(h.count()) + "\n";
}

struct loop_histogram {
  const char* name;
  const char* help;
  histogram executor_histograms::*field;
};

constexpr loop_histogram kLoopHistograms[] = {
    {"uring_sqes_per_submit", "SQEs handed to the kernel per turn that handed any",
     &executor_histograms::sqes_per_submit},
    {"uring_cqes_per_reap", "completions reaped per turn that reaped any",
     &executor_histograms::cqes_per_reap},
    {"uring_asleep_microseconds", "time the loop waited in the kernel with nothing else to run, per sleep",
     &executor_histograms::asleep_us},
    {"uring_turn_user_microseconds", "time a turn spent resuming coroutines", &executor_histograms::user_us},
    {"uring_hop_microseconds",
     "time from another executor's turn that sent a hand-off to its run here "
     "(histograms on both)",
     &executor_histograms::hop_us},
};

}  // namespace

executor_sample sample_of(const executor& ex) {
  return {ex.stats(), ex.operations_in_flight(), ex.histograms()};
}

std::string render(std::span<const executor_sample> executors) {
  std::string out;
  for (const counter& c : kCounters) {
    const std::string name = std::string("uring_") + c.name + "_total";
    family_head(out, name, c.help, "counter");
    for (std::size_t i = 0; i < executors.size(); ++i)
      sample_line(out, name, i, nullptr, executors[i].stats.*c.field);
  }
  family_head(out, "uring_operations_started_total", "operations started, by kind", "counter");
  for (std::size_t i = 0; i < executors.size(); ++i) {
    for (std::size_t k = 0; k < detail::kOpCodeCount; ++k) {
      if (executors[i].stats.ops[k] == 0) continue;  // kinds never started are left out, as Prometheus allows
      sample_line(out, "uring_operations_started_total", i, to_string(op_kind(k)), executors[i].stats.ops[k]);
    }
  }
  family_head(out, "uring_operations_in_flight",
              "operations awaited whose final completion is not reaped yet", "gauge");
  for (std::size_t i = 0; i < executors.size(); ++i)
    sample_line(out, "uring_operations_in_flight", i, nullptr, executors[i].in_flight);
  for (const loop_histogram& h : kLoopHistograms) {
    family_head(out, h.name, h.help, "histogram");
    for (std::size_t i = 0; i < executors.size(); ++i)
      histogram_lines(out, h.name, i, nullptr, executors[i].histograms.*h.field);
  }
  const std::string latency = "uring_operation_latency_microseconds";
  family_head(out, latency,
              "time from the turn that started an operation to the reap of its final completion, by kind",
              "histogram");
  for (std::size_t i = 0; i < executors.size(); ++i) {
    const auto& by_kind = executors[i].histograms.latency_us;
    for (std::size_t k = 0; k < by_kind.size(); ++k) {
      if (by_kind[k].count() == 0) continue;  // kinds never completed are left out, as for the counters
      histogram_lines(out, latency, i, to_string(op_kind(k)), by_kind[k]);
    }
  }
  return out;
}

}  // namespace uring::metrics
