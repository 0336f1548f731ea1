// sync/gates.cpp — uring::sync::latch and uring::sync::event: a gate that opens at zero, and one that
// opens and closes on demand.
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "uring/sync/event.hpp"
#include "uring/sync/latch.hpp"

namespace uring::sync {

namespace {
[[noreturn]] void destroyed_waited_on(const char* what) noexcept {
  std::fprintf(stderr, "uring::sync::%s destroyed while waited on\n", what);
  std::terminate();
}
}  // namespace

latch::latch(std::uint32_t count) : gate("latch wait"), count_(count) {
  if (count == 0) open_locked();  // nobody waits yet: no lock needed
}

latch::~latch() {
  if (has_waiters()) destroyed_waited_on("latch");
}

void latch::count_down(std::uint32_t n) {
  std::lock_guard lock(lock_);
  if (n > count_) throw std::logic_error("uring::sync::latch::count_down: below zero");
  count_ -= n;
  if (count_ == 0 && n > 0) open_locked();
}

bool latch::try_wait() const noexcept {
  std::lock_guard lock(lock_);
  return open_now();
}

std::uint32_t latch::remaining() const noexcept {
  std::lock_guard lock(lock_);
  return count_;
}

event::event(bool set) : gate("event wait") {
  if (set) open_locked();
}

event::~event() {
  if (has_waiters()) destroyed_waited_on("event");
}

void event::set() {
  std::lock_guard lock(lock_);
  open_locked();
}

void event::reset() noexcept {
  std::lock_guard lock(lock_);
  close_locked();
}

bool event::is_set() const noexcept {
  std::lock_guard lock(lock_);
  return open_now();
}

}  // namespace uring::sync
