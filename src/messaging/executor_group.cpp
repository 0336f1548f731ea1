// executor_group.cpp — worker threads, each owning one executor, with a two-phase stop.
#include "uring/executor_group.hpp"
#include "executor/executor_state.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace uring {

struct executor_group::shared {
  explicit shared(std::size_t n)
      : ready(static_cast<std::ptrdiff_t>(n)),
        quiesced(static_cast<std::ptrdiff_t>(n)),
        released(static_cast<std::ptrdiff_t>(n)) {}

  std::vector<executor*> executors;
  std::vector<std::thread> threads;
  std::latch ready;         // every executor exists
  std::latch quiesced;      // every executor has drained its ring: frames may be freed
  std::latch released;      // every executor has freed its frames: join() may return
  std::latch dismissed{1};  // the group is going away: executors may be destroyed (they refuse posts until)
  std::atomic<std::size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::exception_ptr startup_error;
  bool joined = false;

  std::atomic<bool> stopping{false};  // set before any member is stopped (executor_access::try_post_home)

  void stop_all() noexcept {
    stopping.store(true, std::memory_order_release);
    for (executor* ex : executors) {
      if (ex != nullptr) ex->stop();
    }
  }
};

namespace {

void pin_to_cpu(std::size_t index) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int count = CPU_COUNT(&allowed);
  if (count == 0) return;
  int wanted = static_cast<int>(index % static_cast<std::size_t>(count));
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (wanted-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      return;
    }
  }
}

}  // namespace

executor_group::executor_group(std::size_t n, const executor_options& opts, bool pin_threads)
    : shared_(std::make_unique<shared>(n)) {
  if (n == 0) throw std::invalid_argument("executor_group: needs at least one executor");
  shared& sh = *shared_;
  sh.executors.assign(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    sh.threads.emplace_back([&sh, i, opts, pin_threads] {
      if (pin_threads) pin_to_cpu(i);
      std::unique_ptr<executor> ex;
      try {
        ex = std::make_unique<executor>(opts);
        detail::executor_core::defer_frame_release(*ex, sh.stopping);
      } catch (...) {
        std::lock_guard lock(sh.error_mutex);
        if (!sh.startup_error) sh.startup_error = std::current_exception();
      }
      sh.executors[i] = ex.get();
      sh.ready.count_down();
      if (ex) {
        try {
          ex->run();
        } catch (...) {
          {
            std::lock_guard lock(sh.error_mutex);
            if (!sh.error) sh.error = std::current_exception();
          }
          sh.stop_all();  // one worker failed: the group stops
        }
      }
      sh.quiesced.arrive_and_wait();
      // Every ring is drained now: free this executor's frames. The executor itself lives on (refusing
      // posts with ESHUTDOWN, not dangling) until the group is destroyed, and dies on its own thread.
      if (ex) detail::executor_core::release_frames(*ex);
      sh.released.count_down();
      sh.dismissed.wait();
    });
  }
  sh.ready.wait();
  if (sh.startup_error) {
    sh.stop_all();
    sh.dismissed.count_down();
    for (auto& t : sh.threads) t.join();
    sh.joined = true;
    std::rethrow_exception(sh.startup_error);
  }
}

executor_group::~executor_group() {
  if (shared_->joined) return;
  stop();
  try {
    join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring: executor_group: a worker failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "uring: executor_group: a worker failed\n");
  }
  shared_->dismissed.count_down();
  for (auto& t : shared_->threads) t.join();
  shared_->joined = true;
}

std::size_t executor_group::size() const noexcept { return shared_->executors.size(); }

executor& executor_group::at(std::size_t i) {
  if (i >= shared_->executors.size()) {
    throw std::out_of_range("executor_group::at: " + std::to_string(i) + " of " + std::to_string(size()));
  }
  return *shared_->executors[i];
}

executor& executor_group::next() noexcept {
  std::size_t i = shared_->next.fetch_add(1, std::memory_order_relaxed) % shared_->executors.size();
  return *shared_->executors[i];
}

void executor_group::stop() noexcept { shared_->stop_all(); }

void executor_group::join() {
  shared& sh = *shared_;
  sh.released.wait();
  std::lock_guard lock(sh.error_mutex);
  if (sh.error) std::rethrow_exception(std::exchange(sh.error, nullptr));
}

}  // namespace uring
