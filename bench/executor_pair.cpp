#include "executor_pair.hpp"

namespace uring::bench {

const char* mode_suffix(run_mode m) {
  switch (m) {
    case run_mode::native:
      return "";
    case run_mode::defer:
      return "_defer";
    case run_mode::emulated:
      return "_emulated";
    case run_mode::busy:
      return "_busy";
  }
  return "?";
}

namespace {

executor_options options_for(run_mode m) {
  executor_options o;
  o.backend = m == run_mode::emulated ? backend_kind::emulated : backend_kind::native;
  // As tests/backends.hpp and uring-msgbench --mode defer ask for it.
  if (m == run_mode::defer) o.flags = ring_flags::single_issuer | ring_flags::defer_taskrun;
  if (m == run_mode::busy) o.busy_poll = kBusyPollWindow;
  return o;
}

}  // namespace

executor_pair::executor_pair(run_mode m) : group_(std::make_unique<executor_group>(2, options_for(m))) {}

executor_pair::~executor_pair() = default;  // the group stops and joins its workers

executor& executor_pair::at(int i) { return group_->at(static_cast<std::size_t>(i)); }

}  // namespace uring::bench
