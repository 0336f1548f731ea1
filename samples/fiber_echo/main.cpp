// uring-fiber-echo: a TCP echo server in plain blocking style, one fiber per connection.
//
//   uring-fiber-echo [--port N]     (default 7000; 0 picks a free port)
//
// Prints "listening on 127.0.0.1:<port>" once it accepts connections. SIGTERM or SIGINT stops it: the
// executor stops, every connection's fiber is unwound (its socket closed by its destructor) and the
// program exits 0.
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
  for (;;) {
    echo::socket conn = echo::accept(listener);
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
  std::fprintf(stderr, "usage: uring-fiber-echo [--port N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long port = 7000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      char* end = nullptr;
      port = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || port < 0 || port > 65535) return usage();
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
    uring::executor ex;
    uring::spawn_fiber(ex, [&ex, &signals] {
      signalfd_siginfo info;
      uring::this_fiber::await(uring::read(signals.fd(), std::span(reinterpret_cast<char*>(&info), sizeof info)));
      ex.stop();
    }).detach();
    uring::spawn_fiber(ex, [&ex, &listener] { accept_loop(ex, listener); }).detach();
    std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(bound));
    std::fflush(stdout);
    ex.run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-fiber-echo: %s\n", e.what());
    return 1;
  }
}
