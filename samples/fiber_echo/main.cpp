// uring-fiber-echo: a TCP echo server in plain blocking style, one fiber per connection.
//
//   uring-fiber-echo [--port N] [--backend auto|native|emulated]    (port 7000 by default; 0 picks a free
//   one)
//
// Prints "listening on 127.0.0.1:<port> (<backend> backend)" once it accepts connections; with --backend
// auto, stderr says which backend and why, and --backend native where io_uring is unusable exits 1 at
// start with the reason. A failed accept (out of fds) is retried after 10 ms, doubling to 1 s, and logged
// at most once a second. SIGTERM or SIGINT stops it: the executor stops, every connection's fiber is
// unwound (its socket closed by its destructor) and the program exits 0.
#include <signal.h>
#include <sys/signalfd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <uring/executor.hpp>
#include <uring/fiber.hpp>

#include "../server_setup.hpp"
#include "blocking_socket.hpp"

namespace {

void serve(echo::socket conn) {
  std::array<char, 4096> buf;
  for (;;) {
    std::size_t n = echo::read_some(conn, buf);
    if (n == 0) return;  // the peer closed
    echo::write_all(conn, std::span<const char>(buf.data(), n));
  }
}

void accept_loop(uring::executor& ex, const echo::socket& listener) {
  samples::accept_backoff backoff;
  for (;;) {
    echo::socket conn;
    try {
      conn = echo::accept(listener);
    } catch (const std::system_error& e) {
      // Out of fds and the like: the connection waits in the backlog; retry later, say so once a second.
      std::fputs(backoff.failed("uring-fiber-echo", e.what()).c_str(), stderr);
      uring::this_fiber::sleep_for(backoff.delay());
      continue;
    }
    if (backoff.delay().count() > 0) std::fputs(backoff.succeeded("uring-fiber-echo").c_str(), stderr);
    uring::spawn_fiber(ex, [c = std::move(conn)]() mutable {
      try {
        serve(std::move(c));
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "uring-fiber-echo: connection: %s\n", e.what());  // e.g. reset by the peer
      }
    }).detach();
  }
}

int usage() {
  std::fprintf(
      stderr,
      "usage: uring-fiber-echo [--port N] [--backend auto|native|emulated]\n"
      "  --port     TCP port on 127.0.0.1 (default 7000; 0 picks a free one, printed at start)\n"
      "  --backend  io_uring (native), its epoll emulation, or auto (default; stderr says which and why)\n"
      "A failed accept (out of fds): retried after 10 ms, doubling to 1 s; logged at most once a second.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long port = 7000;
  uring::executor_options opts;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      char* end = nullptr;
      port = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || port < 0 || port > 65535) return usage();
    } else if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      if (!samples::parse_backend(argv[++i], opts.backend)) return usage();
    } else {
      return usage();
    }
  }
  try {
    // Signals arrive as reads on a signalfd, awaited by a fiber like any other I/O.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    if (::sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) echo::fail("sigprocmask");
    echo::socket signals(::signalfd(-1, &stop_signals, SFD_CLOEXEC));
    if (signals.fd() < 0) echo::fail("signalfd");
    signal(SIGPIPE, SIG_IGN);

    std::uint16_t bound = 0;
    echo::socket listener = echo::listen_tcp(static_cast<std::uint16_t>(port), bound);
    uring::executor ex(opts);
    std::fputs(samples::backend_choice("uring-fiber-echo", ex.plan(), opts.backend).c_str(), stderr);
    uring::spawn_fiber(ex, [&ex, &signals] {
      signalfd_siginfo info;
      uring::this_fiber::await(
          uring::read(signals.fd(), std::span(reinterpret_cast<char*>(&info), sizeof info)));
      ex.stop();
    }).detach();
    uring::spawn_fiber(ex, [&ex, &listener] { accept_loop(ex, listener); }).detach();
    std::printf("listening on 127.0.0.1:%u (%s backend)\n", static_cast<unsigned>(bound),
                to_string(ex.plan().backend).c_str());
    std::fflush(stdout);
    ex.run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-fiber-echo: %s\n", e.what());
    return 1;
  }
}
