// samples/server_setup.hpp — what the thread-per-core server samples (uring-echo, uring-kv) do before their
// executors start: block SIGTERM/SIGINT for a signalfd, and bind one SO_REUSEPORT listener per executor.
//
// Provides: samples::termination_signalfd, samples::wait_for_termination, samples::bind_reuseport, samples::parse_backend.
// Threads: call them from main() before any thread starts (the signal mask is inherited by the threads
// started afterwards, so no thread takes the signal asynchronously).
#pragma once

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <uring/executor_options.hpp>
#include <uring/net/address.hpp>
#include <uring/net/tcp_listener.hpp>

namespace samples {

// Blocks SIGTERM and SIGINT in this thread (and so in every thread it starts) and returns a signalfd that
// reads them. Throws std::system_error naming signalfd.
inline int termination_signalfd() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "signalfd");
  return fd;
}

// Blocks until SIGTERM or SIGINT arrives on `fd`; returns the signal.
inline int wait_for_termination(int fd) noexcept {
  signalfd_siginfo info{};
  while (::read(fd, &info, sizeof info) < 0 && errno == EINTR) {
  }
  return static_cast<int>(info.ssi_signo);
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

}  // namespace samples
