#include "executor_pair.hpp"

#include <cstdint>
#include <stdexcept>

#include "peer_queues.hpp"

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
  return o;
}

// Waits (spinning: only the busy mode uses it, whose threads spin anyway) until `v` reaches `want`.
void await_count(std::atomic<int>& v, int want, const char* what) {
  spin_guard guard(what);
  while (v.load(std::memory_order_acquire) < want) guard.tick();
}

}  // namespace

executor_pair::executor_pair(run_mode m) {
  if (m != run_mode::busy) {
    group_ = std::make_unique<executor_group>(2, options_for(m));
    return;
  }
  for (int i = 0; i < 2; ++i) spinners_[static_cast<std::size_t>(i)] = std::thread([this, i] { spin(i); });
  for (auto& e : spun_) {
    spin_guard guard("executor_pair start");
    while (e.load(std::memory_order_acquire) == nullptr) {
      std::this_thread::yield();
      guard.tick();
    }
  }
}

// Both threads poll until told to stop, and destroy their executors only once neither polls any more:
// a last poll may still hand a message to the other ring.
void executor_pair::spin(int i) {
  executor ex(options_for(run_mode::busy));
  spun_[static_cast<std::size_t>(i)].store(&ex, std::memory_order_release);
  std::uint64_t idle = 0;
  while (phase_.load(std::memory_order_acquire) == 0) {
    if (ex.poll() != 0) {
      idle = 0;
    } else if (++idle % 64 == 0) {
      std::this_thread::yield();  // as spin_guard: a spinner must not starve its peer on a shared core
    }
  }
  parked_.fetch_add(1, std::memory_order_acq_rel);
  await_count(parked_, 2, "executor_pair stop");
  while (ex.poll() != 0) {
  }
  parked_.fetch_add(1, std::memory_order_acq_rel);
  await_count(parked_, 4, "executor_pair drain");
}

executor_pair::~executor_pair() {
  if (group_) return;  // the group stops and joins its workers
  phase_.store(1, std::memory_order_release);
  for (auto& t : spinners_) t.join();
}

executor& executor_pair::at(int i) {
  if (group_) return group_->at(static_cast<std::size_t>(i));
  executor* e = spun_.at(static_cast<std::size_t>(i)).load(std::memory_order_acquire);
  if (e == nullptr) throw std::logic_error("executor_pair::at: not started");
  return *e;
}

}  // namespace uring::bench
