// sync/semaphore.cpp — uring::sync::semaphore and uring::sync::mutex, its one-permit form: the count, and
// permits handed to waiters first, in order.
#include "uring/sync/semaphore.hpp"

#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "uring/sync/mutex.hpp"

namespace uring::sync {

semaphore::semaphore(std::uint32_t initial, std::uint32_t max) : count_(initial), max_(max) {
  if (max == 0 || initial > max)
    throw std::invalid_argument("uring::sync::semaphore: need initial <= max, max >= 1");
}

semaphore::~semaphore() {
  if (has_waiters()) {
    std::fputs("uring::sync::semaphore destroyed while waited on\n", stderr);
    std::terminate();
  }
}

bool semaphore::take_locked() noexcept {
  if (count_ == 0 || has_waiters()) return false;  // no overtaking a waiter
  --count_;
  return true;
}

void semaphore::give_back_locked() noexcept { release_locked(1); }

void semaphore::release_locked(std::uint32_t n) noexcept {
  count_ += n;
  // A waiter whose executor no longer takes work gets nothing: its permit goes to the next.
  while (count_ > 0 && has_waiters()) {
    if (grant_first_locked()) --count_;
  }
}

bool semaphore::try_acquire() noexcept {
  std::lock_guard lock(lock_);
  return take_locked();
}

void semaphore::release(std::uint32_t n) {
  std::lock_guard lock(lock_);
  if (n > max_ - count_) throw std::logic_error("uring::sync::semaphore::release: above max");
  release_locked(n);
}

std::uint32_t semaphore::available() const noexcept {
  std::lock_guard lock(lock_);
  return count_;
}

mutex::~mutex() {
  if (is_locked()) {
    std::fputs("uring::sync::mutex destroyed while locked\n", stderr);
    std::terminate();
  }
}

void mutex::unlock() {
  if (!is_locked()) {
    std::fputs("uring::sync::mutex::unlock: the mutex is not locked\n", stderr);
    std::terminate();
  }
  permit_.release(1);
}

}  // namespace uring::sync
