// resolver_pool.cpp — the look-up threads: started lazily, bounded, idle ones exit.
#include "net/resolver_pool.hpp"

#include <pthread.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace uring::net {

struct resolver_pool::state {
  std::mutex m;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  // A thread counts in `threads` until joined: one that has ended marks its slot, and the next submit
  // joins it, so the count never falls below the threads the kernel still runs. Fixed slots: starting or
  // ending a thread allocates nothing.
  std::array<std::thread, kMaxThreads> workers;
  std::array<bool, kMaxThreads> ended{};
  std::size_t threads = 0;
  std::size_t idle = 0;
  std::uint64_t submitted = 0;
};

namespace {

// Never destroyed: a thread may still use it while the process exits.
resolver_pool::state& shared() {
  static auto* s = [] {
    auto* st = new resolver_pool::state;
    // A forked child has none of the parent's threads: it starts afresh (its queue is dropped).
    ::pthread_atfork([] { shared().m.lock(); }, [] { shared().m.unlock(); },
                     [] {
                       auto& c = shared();
                       c.m.unlock();
                       // The parent's threads do not exist here: their handles are kept, never joined.
                       static auto* orphans = new std::vector<std::thread>;
                       for (auto& t : c.workers)
                         if (t.joinable()) orphans->push_back(std::move(t));
                       c.ended.fill(false);
                       c.jobs.clear();
                       c.threads = 0;
                       c.idle = 0;
                     });
    return st;
  }();
  return *s;
}

void work(std::size_t slot) {
  ::pthread_setname_np(::pthread_self(), "uring-resolve");
  auto& s = shared();
  std::unique_lock lock(s.m);
  for (;;) {
    if (s.jobs.empty()) {
      ++s.idle;
      const bool woken = s.wake.wait_for(lock, resolver_pool::kIdleExit, [&] { return !s.jobs.empty(); });
      --s.idle;
      if (!woken) {
        s.ended[slot] = true;
        return;
      }
    }
    std::function<void()> job = std::move(s.jobs.front());
    s.jobs.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // what it holds goes before the lock is taken again
    lock.lock();
  }
}

}  // namespace

resolver_pool& resolver_pool::instance() {
  static resolver_pool pool;
  (void)shared();
  return pool;
}

void resolver_pool::submit(std::function<void()> job) {
  auto& s = shared();
  std::unique_lock lock(s.m);
  if (s.jobs.size() >= kMaxQueued)
    throw std::system_error(EAGAIN, std::system_category(), "resolve: the look-up queue is full");
  s.jobs.push_back(std::move(job));
  ++s.submitted;
  for (std::size_t i = 0; i < kMaxThreads; ++i) {
    if (!s.ended[i]) continue;
    s.workers[i].join();  // it has released the lock for good and only returns: the join is brief
    s.ended[i] = false;
    --s.threads;
  }
  if (s.jobs.size() > s.idle && s.threads < kMaxThreads) {
    std::size_t slot = 0;
    while (s.workers[slot].joinable()) ++slot;
    try {
      s.workers[slot] = std::thread(work, slot);
      ++s.threads;
    } catch (...) {
      if (s.threads == 0) {  // nobody would ever run it
        s.jobs.pop_back();
        --s.submitted;
        throw;
      }
    }
  }
  lock.unlock();
  s.wake.notify_one();
}

std::size_t resolver_pool::threads() const {
  auto& s = shared();
  std::lock_guard lock(s.m);
  return s.threads;
}

std::size_t resolver_pool::queued() const {
  auto& s = shared();
  std::lock_guard lock(s.m);
  return s.jobs.size();
}

std::uint64_t resolver_pool::submitted() const {
  auto& s = shared();
  std::lock_guard lock(s.m);
  return s.submitted;
}

}  // namespace uring::net
