// backend/emulated/futex_registry.hpp — futex waits without io_uring: a process-wide list of the waits that
// emulated executors hold, which every wake the library makes reads.
//
// Provides: detail::futex_inbox, detail::futex_register, detail::futex_withdraw, detail::futex_wake_listed.
// Threads: register and withdraw on the waiting executor's thread; wake from any thread.
//
// A futex word cannot be watched with epoll, and a thread blocked in futex(2) for each wait would need a
// signal to be cancelled. So an emulated wait is a record here: registering checks the word against the
// expected value under the list's lock (-EAGAIN, as the kernel), and a wake made through the library
// (futex_wake on an emulated executor, futex_wake_now from any thread) takes the matching records in the
// order they came, up to its count, and hands each operation to its executor's inbox, whose eventfd wakes
// that executor's epoll wait. A wake by a bare futex(2) or by a native ring's FUTEX_WAKE does not see
// these records (docs/sync.md).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "uring/detail/operation.hpp"

namespace uring::detail {

// An emulated backend's side: the waits other threads have woken, taken on its own thread.
class futex_inbox {
 public:
  futex_inbox();
  ~futex_inbox();
  futex_inbox(const futex_inbox&) = delete;
  futex_inbox& operator=(const futex_inbox&) = delete;

  // The eventfd that becomes readable when a wait is woken (the backend watches it in epoll).
  [[nodiscard]] int fd() const noexcept { return fd_; }
  // Any thread, under the registry's lock: `op` was woken.
  void deliver(operation& op) noexcept;
  // Owner thread: the operations woken since the last call, oldest first.
  std::vector<operation*> take();

 private:
  std::mutex mutex_;
  std::vector<operation*> woken_;
  int fd_ = -1;
};

// Registers `op` (a futex_wait: addr, offset = expected, aux = mask) as waiting, woken through `inbox`.
// 0, or -EAGAIN when the word does not hold the expected value, -EINVAL for a zero mask or a misaligned
// word.
int futex_register(operation& op, futex_inbox& inbox);
// Removes `op`'s record: true if it was still waiting; false if a wake took it, in which case it is in
// its inbox already.
bool futex_withdraw(operation& op);
// Wakes up to `count` listed waits on `word` whose mask shares a bit with `mask`, oldest first. Returns
// how many.
int futex_wake_listed(const std::uint32_t* word, std::uint32_t count, std::uint32_t mask);

}  // namespace uring::detail
