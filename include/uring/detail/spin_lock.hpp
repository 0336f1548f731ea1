// uring/detail/spin_lock.hpp — a lock for critical sections of a few dozen instructions.
//
// Provides: detail::spin_lock (Lockable: use with std::lock_guard).
// Threads: any.
//
// Unlocking is a plain release store where std::mutex needs a second atomic read-modify-write: measured on
// a channel stream, the sender spent most of its time in std::mutex's lock and unlock. A waiter spins
// briefly, then yields its time slice, so a holder preempted on a busy machine is not starved by it.
#pragma once

#include <atomic>
#include <thread>

namespace uring::detail {

class spin_lock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0; flag_.exchange(true, std::memory_order_acquire);) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          __builtin_ia32_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !flag_.load(std::memory_order_relaxed) && !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace uring::detail
