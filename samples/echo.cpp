// uring-echo: a TCP echo server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-echo [--address 127.0.0.1] [--port 7000] [--threads 1] [--backend auto|native|emulated]
//              [--idle-timeout SECONDS] [--drain-timeout SECONDS] [--accept reuseport|one] [--recv
//              leased|copy]
//
// Each of the --threads executors runs on its own thread with its own SO_REUSEPORT listener on the same
// port (the kernel spreads connections among them) and one multishot accept; with --accept one, the first
// thread alone listens and hands each connection to the threads in turn. `--port 0` binds a free
// port; the first line on stdout says which ("uring-echo: listening on 127.0.0.1:PORT ..."). A connection
// idle for --idle-timeout seconds (default 60; 0: never), reading or writing, is closed. SIGTERM or
// SIGINT (read from a signalfd) drains: every executor stops accepting and ends each connection's input,
// so the bytes already received are echoed and the connection closes with a FIN; connections still open
// after --drain-timeout seconds (default 5) are closed, and the program exits 0. A failed accept (out of
// fds) is retried after 10 ms, doubling to 1 s, and logged at most once a second. --backend native where
// io_uring is unusable exits 1 at start with the reason. --recv leased (the default) receives into
// 16 KiB buffers leased from a pool of 512 per executor, so an
// idle connection holds no receive buffer, and one connection at most 16 of them (a client that sends
// without reading its echoes cannot take the pool from the others); --recv copy reads into a buffer of
// each connection's own, 2 KiB until a read fills it, 16 KiB from then on.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <uring/uring.hpp>

#include "server.hpp"

namespace {

using uring::task;
using uring::net::tcp_stream;

struct config {
  sample::server_flags server;
  std::chrono::milliseconds idle{60'000};
};

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-echo [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
      "                  [--idle-timeout SECONDS] [--drain-timeout SECONDS] [--accept reuseport|one]\n"
      "                  [--recv leased|copy]\n"
      "  --address        IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
      "  --port           TCP port (default 7000; 0 picks a free one, printed at start)\n"
      "  --threads        executors, each on its own thread with its own SO_REUSEPORT listener (default 1)\n"
      "  --backend        io_uring (native), its epoll emulation, or auto (default; stderr says which and\n"
      "                   why); native where io_uring is unusable: exit 1 at start with the reason\n"
      "  --idle-timeout   close a connection idle this long, waiting to read or to write (default 60; 0: "
      "never)\n"
      "  --drain-timeout  after SIGTERM/SIGINT, close the connections still open after this long (default "
      "5;\n"
      "                   0: at once); a write cut short resets its connection\n"
      "  --accept         reuseport: a listener per thread (default); one: the first thread accepts and\n"
      "                   hands each connection to the threads in turn\n"
      "  --recv           leased: 16 KiB chunks leased from a pool of 512 per executor, idle connections "
      "hold\n"
      "                   none, a connection at most 16 (default);\n"
      "                   copy: a buffer per connection\n"
      "SIGUSR1: print each executor's operations in flight (kind, fd, age) on stderr.\n"
      "SIGTERM/SIGINT: stop accepting; each connection's input ends, the bytes already received are echoed,\n"
      "then it closes with a FIN; exit 0 within --drain-timeout.\n"
      "A failed accept (out of fds): retried after 10 ms, doubling to 1 s; logged at most once a second.\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  c.server.pool = {.count = 512, .size = 16384};
  sample::flag_reader args("uring-echo", argc, argv, usage);
  while (args.next()) {
    if (args.common(c.server)) continue;
    if (args.flag() == "--idle-timeout") {
      c.idle = std::chrono::milliseconds(static_cast<long>(args.number(0, 1e6) * 1000));
    } else {
      args.unknown();
    }
  }
  return c;
}

// A receive that ended the connection for a reason other than the peer (end of stream, reset), the drain
// or the idle limit is worth a line: it is a fault of the server or of the host.
void report_unexpected(int res) {
  if (res < 0 && res != -ECANCELED && res != -ETIMEDOUT && res != -ECONNRESET) {
    std::fprintf(stderr, "uring-echo: a connection ended: recv: %s\n", std::strerror(-res));
  }
}

// Echoes until the peer ends the stream, fails or idles too long. At the drain the input ends (what arrived
// before it is still echoed, then the connection closes with a FIN); at the drain deadline every read and
// write ends (worker::abort), and a write cut short resets the connection.
task<void> serve_connection(tcp_stream s, sample::worker* w, std::chrono::milliseconds idle) {
  // 2 KiB, grown to 16 KiB once a read fills it: a connection that streams reads 16 KiB at a time, and one
  // that only ever gets short messages holds (and has touched) 2 KiB while it waits, not 16.
  std::vector<char> buf(2048);
  try {
    sample::input_ends_at_drain drained(s, *w);
    for (;;) {
      // Made in plain functions: each step is a temporary that in the coroutine's own expression would
      // take a slot in the frame every idle connection holds (as for serve_leased's receive, below).
      auto read = [&] { return uring::with_stop_token(s.read_some(buf).nothrow(), w->abort.get_token()); };
      auto timed_read = [&] { return uring::with_timeout(read(), idle); };
      uring::io_result r = idle.count() > 0 ? co_await timed_read() : co_await read();
      if (r.res <= 0) {
        report_unexpected(r.res);
        break;
      }
      // A peer that stops reading is idle too: the write gets the same limit.
      co_await sample::bounded(s.write_all(std::span(buf.data(), static_cast<std::size_t>(r.res))), idle,
                               w->abort.get_token());
      if (static_cast<std::size_t>(r.res) == buf.size() && buf.size() < 16384) buf.resize(16384);
    }
  } catch (const std::system_error&) {
    // The peer went away in the middle of an echo: nothing to tell it.
  }
}

// The same with leased receives from the worker's pool: between reads the connection holds no buffer, and
// each chunk is sent on from the buffer it arrived in.
task<void> serve_leased(tcp_stream s, sample::worker* w, std::chrono::milliseconds idle) {
  try {
    sample::input_ends_at_drain drained(s, *w);
    for (;;) {
      // Made in a plain function: each step (recv, nothrow, with_stop_token, with_timeout) is a 128 B
      // temporary, which in the coroutine's own expression would take a slot in the frame that every idle
      // connection holds; here only the finished receive does.
      auto receive = [&] {
        auto op = uring::with_stop_token(s.recv(*w->pool).nothrow(), w->abort.get_token());
        return idle.count() > 0 ? uring::with_timeout(std::move(op), idle) : std::move(op);
      };
      uring::net::recv_result r = co_await receive();
      if (r.res <= 0) {
        report_unexpected(r.res);
        break;
      }
      co_await sample::bounded(s.write_all(r.buffer), idle, w->abort.get_token());
    }
  } catch (const std::system_error&) {
    // The peer went away in the middle of an echo: nothing to tell it.
  }
}

// The connection handler run_server spawns: a plain function object, copied to every thread.
struct echo_handler {
  std::chrono::milliseconds idle;
  task<void> operator()(tcp_stream s, sample::worker* w, int /*endpoint: one port*/) const {
    return w->pool != nullptr ? serve_leased(std::move(s), w, idle) : serve_connection(std::move(s), w, idle);
  }
};

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  return sample::run_server("uring-echo", c.server, echo_handler{c.idle});
}
