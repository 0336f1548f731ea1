// executor/histograms.cpp — the loop's and the operations' histograms (uring/executor_histograms.hpp).
#include "executor/executor_state.hpp"

namespace uring {

std::uint32_t executor::impl::fine_now_us() noexcept {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(detail::monotonic_ns()) / 1000);
}

void executor::impl::note_final(const detail::operation& op) noexcept {
  if (watch_stalls && op.complete == nullptr) note_resumed(op.waiter);
  if (!keeping_histograms) return;
  // The fine clock's 32 bits wrap every 71 minutes: an operation older than an hour is timed by the
  // coarse clock instead.
  constexpr std::uint32_t kHourMs = 3'600'000;
  const std::uint32_t age_ms = queue.now_ms - op.since_ms;
  const std::uint64_t us = age_ms >= kHourMs ? std::uint64_t{age_ms} * 1000 : reap_us - op.since_us;
  histograms.latency_us[static_cast<std::size_t>(op.request.code)].record(us);
}

executor_histograms executor::histograms() const {
  impl_->check_owner("executor::histograms");
  return impl_->histograms;
}

}  // namespace uring
