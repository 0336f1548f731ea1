// peer_queues.hpp — the plain thread-to-thread queues our messaging is compared with (bench only).
//
// Provides: uring::bench::eventfd_queue<T>, spsc_ring<T>, spin_guard.
// Threads: eventfd_queue: push from any thread, pop_all from one consumer thread. spsc_ring: push from one
// producer thread, pop from one consumer thread. spin_guard: one thread each.
//
// They are written the way an application without an io_uring library would write them, so that the
// figures say what our executor costs over the obvious alternative.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace uring::bench {

// Bounds a spin loop: a benchmark whose other side stopped answering aborts with a message after
// `limit` without progress instead of hanging the whole run. Every 64th idle spin also yields the CPU: on
// a core of its own that returns at once, but where the two spinning threads share one core (a loaded
// 2-core machine) a pure spinner would burn its whole time slice waiting for the peer it keeps off that core.
class spin_guard {
 public:
  explicit spin_guard(const char* what, std::chrono::seconds limit = std::chrono::seconds(60))
      : what_(what), limit_(limit) {}
  // Call once per idle spin. The clock is read only every 4096 idle spins in a row.
  void tick() {
    ++idle_;
    if ((idle_ & 63) == 0) std::this_thread::yield();
    if ((idle_ & 0xfff) != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (idle_ == 0x1000) {
      deadline_ = now + limit_;  // armed at the first check after progress
    } else if (now > deadline_) {
      std::fprintf(stderr, "uring-bench: %s made no progress for too long; aborting\n", what_);
      std::abort();
    }
  }
  // Call when the loop got something done.
  void progress() { idle_ = 0; }

 private:
  const char* what_;
  std::chrono::seconds limit_;
  std::chrono::steady_clock::time_point deadline_{};
  std::uint64_t idle_ = 0;
};

// Many producers, one consumer: a vector under a mutex, and an eventfd that a producer writes only when
// the consumer has announced (under the same mutex) that it is going to block on it. A busy consumer
// therefore costs producers no syscall; a sleeping one costs the producer one write(2) and itself one
// read(2).
template <class T>
class eventfd_queue {
 public:
  eventfd_queue() : fd_(::eventfd(0, EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::system_category(), "eventfd");
  }
  eventfd_queue(const eventfd_queue&) = delete;
  eventfd_queue& operator=(const eventfd_queue&) = delete;
  ~eventfd_queue() { ::close(fd_); }

  void push(T value) {
    bool wake;
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(value));
      wake = std::exchange(sleeping_, false);
    }
    if (wake) {
      std::uint64_t one = 1;
      if (::write(fd_, &one, sizeof one) != sizeof one) std::abort();  // an eventfd write cannot fail here
    }
  }

  // Swaps everything queued into `out` (which it clears first). With `block`, waits in read(eventfd)
  // while the queue is empty; otherwise returns with `out` empty.
  void pop_all(std::vector<T>& out, bool block) {
    out.clear();
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (!items_.empty() || !block) {
          out.swap(items_);
          return;
        }
        sleeping_ = true;  // the next push writes the eventfd
      }
      std::uint64_t v;
      if (::read(fd_, &v, sizeof v) != sizeof v && errno != EINTR) std::abort();
    }
  }

 private:
  int fd_;
  std::mutex mutex_;
  std::vector<T> items_;
  bool sleeping_ = false;  // guarded by mutex_
};

// One producer, one consumer, `capacity` (a power of two) slots; both sides spin, nobody sleeps. Head
// and tail sit on their own cache lines, and each side caches the other's index to touch the shared
// line only when its cached view runs out.
template <class T>
class spsc_ring {
 public:
  explicit spsc_ring(std::size_t capacity) : mask_(capacity - 1), slots_(std::make_unique<T[]>(capacity)) {
    if (capacity == 0 || (capacity & mask_) != 0) std::abort();
  }

  // Producer: false when full.
  bool try_push(T value) {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail - head_cache_ > mask_) return false;
    }
    slots_[tail & mask_] = std::move(value);
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer: false when empty.
  bool try_pop(T& out) {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cache_) return false;
    }
    out = std::move(slots_[head & mask_]);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

 private:
  const std::size_t mask_;
  std::unique_ptr<T[]> slots_;
  alignas(64) std::atomic<std::size_t> head_{0};  // consumer's
  std::size_t tail_cache_ = 0;                    // consumer's view of tail_
  alignas(64) std::atomic<std::size_t> tail_{0};  // producer's
  std::size_t head_cache_ = 0;                    // producer's view of head_
};

}  // namespace uring::bench
