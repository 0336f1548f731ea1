// signal_storm.hpp — SIGALRM at every thread of the test process, every millisecond, with SA_RESTART off,
// so that every blocking system call the library makes (io_uring_enter, epoll_pwait2, a futex, a read)
// sees EINTR over and over. A test run inside the storm must give exactly the result it gives without it.
//
// Provides (namespace uring::test):
//   signal_storm                          RAII: the handler and the storm for its lifetime; fired() counts
//   with_and_without_signal_storm(list)   each backend configuration twice: quiet, and "<name>_sigalrm"
//   storm_backend_test                    backend_test that runs its test inside a storm when the
//                                         configuration asks (and checks the storm hit)
// Threads: construct and destroy a signal_storm on one thread, at most one at a time per process.
//
// Why not setitimer(ITIMER_REAL) alone: its SIGALRM is process-directed, and the kernel hands such a
// signal to the main thread whenever that thread does not block it, so executors on threads of their own
// (executor_group) would almost never be interrupted. The storm's own thread instead sends SIGALRM to
// each thread by tgkill, each millisecond (one tick of a 1 ms interval timer, read from a timerfd).
//
// ThreadSanitizer (clang 14's runtime) deadlocks on itself when a signal lands in pthread_join while glibc
// frees a cached thread stack there: its handler wrapper waits for a lock its own free() holds
// (google/sanitizers#1540; seen here as a soak test hanging in ~executor_group once in ~800 runs). glibc
// frees stacks only once its cache of them passes glibc.pthread.stack_cache_size (40 MiB), so the tsan
// test preset raises that far beyond what a test keeps; under TSan a storm refuses to start without it.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends.hpp"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define URING_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define URING_TEST_TSAN 1
#endif

namespace uring::test {

class signal_storm {
 public:
  signal_storm() {
#ifdef URING_TEST_TSAN
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables == nullptr ||
        std::string(tunables).find("glibc.pthread.stack_cache_size=") == std::string::npos) {
      throw std::runtime_error(
          "signal_storm under TSan needs GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0x100000000 (the tsan "
          "test preset sets it): without it TSan can deadlock in pthread_join (see signal_storm.hpp)");
    }
#endif
    struct sigaction sa {};
    sa.sa_handler = &on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: interrupted calls fail with EINTR instead of restarting
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (timer_fd_ < 0) throw std::system_error(errno, std::system_category(), "timerfd_create");
    if (::sigaction(SIGALRM, &sa, nullptr) != 0) {
      int err = errno;
      ::close(timer_fd_);
      throw std::system_error(err, std::system_category(), "sigaction");
    }
    itimerspec every_ms{{0, 1'000'000}, {0, 1'000'000}};
    ::timerfd_settime(timer_fd_, 0, &every_ms, nullptr);
    fired_.store(0);
    storm_ = std::thread([this] { blow(); });
  }
  signal_storm(const signal_storm&) = delete;
  signal_storm& operator=(const signal_storm&) = delete;
  ~signal_storm() {
    stop_.store(true);
    storm_.join();
    ::close(timer_fd_);
    // Signals already sent may still be pending on their threads (delivered on each one's next return to
    // user space): the previous disposition, SIG_DFL, would end the process with one. SIG_IGN discards
    // them, and nothing in a test process waits for SIGALRM afterwards.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGALRM, &ignore, nullptr);
  }

  // Handler runs so far (all threads together).
  [[nodiscard]] static long fired() noexcept { return fired_.load(std::memory_order_relaxed); }
  // Signals sent so far.
  [[nodiscard]] long sent() const noexcept { return sent_.load(std::memory_order_relaxed); }

 private:
  static void on_signal(int) noexcept { fired_.fetch_add(1, std::memory_order_relaxed); }

  // Each tick of the timer: SIGALRM to every other thread of the process.
  void blow() {
    const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
    const pid_t pid = ::getpid();
    while (!stop_.load()) {
      std::uint64_t ticks = 0;
      if (::read(timer_fd_, &ticks, sizeof ticks) < 0 && errno != EINTR) return;
      for (pid_t tid : threads()) {
        if (tid != self && ::syscall(SYS_tgkill, pid, tid, SIGALRM) == 0) sent_.fetch_add(1);
      }
    }
  }

  static std::vector<pid_t> threads() {
    std::vector<pid_t> tids;
    if (DIR* d = ::opendir("/proc/self/task")) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
      }
      ::closedir(d);
    }
    return tids;
  }

  static inline std::atomic<long> fired_{0};
  int timer_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<long> sent_{0};
  std::thread storm_;
};

// Every configuration of `configs` as it is, then again under the storm (named "<name>_sigalrm").
inline std::vector<backend_config> with_and_without_signal_storm(std::vector<backend_config> configs) {
  const std::size_t n = configs.size();
  for (std::size_t i = 0; i < n; ++i) {
    backend_config stormy = configs[i];
    stormy.name += "_sigalrm";
    stormy.signal_storm = true;
    configs.push_back(std::move(stormy));
  }
  return configs;
}

// A backend_test whose test body runs inside a storm when its configuration says signal_storm; at the end
// it checks that signals really arrived during the test.
class storm_backend_test : public backend_test {
 protected:
  storm_backend_test() {
    if (GetParam().signal_storm) storm_.emplace();
  }
  ~storm_backend_test() override {
    if (!storm_) return;
    long fired = signal_storm::fired();
    storm_.reset();
    RecordProperty("sigalrm_handled", std::to_string(fired));
    EXPECT_GT(fired, 0) << "the test ended before the storm sent a signal";
  }

 private:
  std::optional<signal_storm> storm_;
};

}  // namespace uring::test

// Instantiates `suite` (a storm_backend_test) over `configs`, each quiet and under the storm.
#define INSTANTIATE_STORM_BACKENDS(suite, configs)                                                   \
  INSTANTIATE_TEST_SUITE_P(Backends, suite,                                                          \
                           ::testing::ValuesIn(uring::test::with_and_without_signal_storm(configs)), \
                           [](const auto& test_info) { return test_info.param.name; })
