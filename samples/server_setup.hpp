// samples/server_setup.hpp — what the thread-per-core server samples (uring-echo, uring-kv) do before their
// executors start: block SIGTERM/SIGINT/SIGUSR1 for a signalfd, and bind one SO_REUSEPORT listener per
// executor; and two things their accept loops and banners share: the backoff after a failed accept, and the
// line that says which backend was chosen and why.
//
// Provides: samples::termination_signalfd, samples::wait_for_termination, samples::print_inflight,
// samples::bind_reuseport, samples::parse_backend, samples::accept_backoff, samples::backend_choice.
// Threads: call the first four from main() before any thread starts (the signal mask is inherited by the
// threads started afterwards, so no thread takes the signal asynchronously); an accept_backoff belongs to
// one accept loop.
#pragma once

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <uring/executor.hpp>
#include <uring/executor_options.hpp>
#include <uring/inflight.hpp>
#include <uring/net/address.hpp>
#include <uring/net/tcp_listener.hpp>
#include <uring/plan.hpp>

namespace samples {

// Blocks SIGTERM, SIGINT and SIGUSR1 in this thread (and so in every thread it starts) and returns a
// signalfd that reads them. Throws std::system_error naming signalfd.
inline int termination_signalfd() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "signalfd");
  return fd;
}

// Blocks until SIGTERM or SIGINT arrives on `fd`; returns the signal. Each SIGUSR1 meanwhile calls
// `on_usr1` (the servers print what their executors have in flight).
inline int wait_for_termination(int fd, const std::function<void()>& on_usr1 = {}) {
  for (;;) {
    signalfd_siginfo info{};
    if (::read(fd, &info, sizeof info) < 0) {
      if (errno == EINTR) continue;
      return SIGTERM;  // the signalfd failed: stop as if asked to
    }
    if (info.ssi_signo != SIGUSR1) return static_cast<int>(info.ssi_signo);
    if (on_usr1) on_usr1();
  }
}

// The operations `ex` has in flight, on stderr: a header line, then one line each (executor::inflight,
// waiting at most a second for a busy loop). For SIGUSR1.
inline void print_inflight(const char* program, std::size_t index, uring::executor& ex) {
  try {
    const std::vector<uring::inflight_op> ops = ex.inflight(std::chrono::seconds(1));
    std::string out = std::string(program) + ": executor " + std::to_string(index) + ": " +
                      std::to_string(ops.size()) + " operations in flight\n";
    for (const uring::inflight_op& op : ops)
      out += std::string(program) + ":   " + uring::to_string(op) + "\n";
    std::fputs(out.c_str(), stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: executor %zu: no snapshot: %s\n", program, index, e.what());
  }
}

// `n` listeners on one address with SO_REUSEPORT (the kernel spreads connections among them). All are
// bound before any executor starts, so a bad address or a port in use ends the program with the reason,
// and port 0 yields one free port that all of them share (listeners.front().local_address()).
inline std::vector<uring::net::tcp_listener> bind_reuseport(const std::string& ip, int port, int n) {
  uring::net::address where = uring::net::address::ip(ip, static_cast<std::uint16_t>(port));
  uring::net::listen_options opts;
  opts.reuse_port = true;
  std::vector<uring::net::tcp_listener> listeners;
  listeners.push_back(uring::net::tcp_listener::bind(where, opts));
  where = listeners.front().local_address();
  for (int i = 1; i < n; ++i) listeners.push_back(uring::net::tcp_listener::bind(where, opts));
  return listeners;
}

// The --backend flag: "auto", "native" or "emulated" into `kind`; false for anything else.
inline bool parse_backend(std::string_view name, uring::backend_kind& kind) noexcept {
  if (name == "auto") {
    kind = uring::backend_kind::automatic;
  } else if (name == "native") {
    kind = uring::backend_kind::native;
  } else if (name == "emulated") {
    kind = uring::backend_kind::emulated;
  } else {
    return false;
  }
  return true;
}

// What an accept loop does after a failed accept (out of fds, most often, and then every retry fails
// until connections close): wait before the next try, 10 ms doubling up to 1 s, back to none on a success;
// and log at most one line a second, which counts the failures not shown since the line before.
class accept_backoff {
 public:
  static constexpr std::chrono::milliseconds first{10};
  static constexpr std::chrono::milliseconds longest{1000};

  // Records a failure; returns the line to print ("" when this one is suppressed).
  std::string failed(const char* program, const char* what) {
    delay_ = delay_.count() == 0 ? first : std::min(delay_ * 2, longest);
    const auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_line_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return {};
    }
    std::string line = std::string(program) + ": " + what;
    if (suppressed_ > 0) line += " (" + std::to_string(suppressed_) + " repeats suppressed)";
    line += "; next accept in " + std::to_string(delay_.count()) + " ms\n";
    logged_ = true;
    last_line_ = now;
    suppressed_ = 0;
    return line;
  }

  // Records a success; returns the line to print when failures went unreported since the last line.
  std::string succeeded(const char* program) {
    std::string line;
    if (suppressed_ > 0) {
      line = std::string(program) + ": accepting again (" + std::to_string(suppressed_) +
             " failures suppressed since the last line)\n";
    }
    delay_ = {};
    logged_ = false;
    suppressed_ = 0;
    return line;
  }

  // How long to wait before the next accept: zero after a success.
  [[nodiscard]] std::chrono::milliseconds delay() const noexcept { return delay_; }

 private:
  std::chrono::milliseconds delay_{};
  std::chrono::steady_clock::time_point last_line_{};
  bool logged_ = false;
  int suppressed_ = 0;
};

// The lines (each ending in a newline, prefixed with "<program>: ") that say which backend an executor
// runs on and why, from its plan's notes: for --backend auto, or when the choice differs from the one
// asked for (URING_BACKEND). Empty when there is nothing to explain.
inline std::string backend_choice(const char* program, const uring::executor_plan& plan,
                                  uring::backend_kind requested) {
  if (requested != uring::backend_kind::automatic && requested == plan.backend) return {};
  std::string lines;
  for (const auto& note : plan.notes) {
    if (note.starts_with("backend:")) lines += std::string(program) + ": " + note + "\n";
  }
  if (lines.empty()) {
    lines = std::string(program) + ": backend: " + to_string(plan.backend) +
            (plan.backend == uring::backend_kind::native ? ", io_uring is usable\n" : "\n");
  }
  return lines;
}

}  // namespace samples
