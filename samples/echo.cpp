// uring-echo: a TCP echo server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-echo [--address 127.0.0.1] [--port 7000] [--threads 1] [--backend auto|native|emulated]
//              [--idle-timeout SECONDS]
//
// Each of the --threads executors runs on its own thread with its own SO_REUSEPORT listener on the same
// port (the kernel spreads connections among them) and one multishot accept. `--port 0` binds a free
// port; the first line on stdout says which ("uring-echo: listening on 127.0.0.1:PORT ..."). A connection
// idle for --idle-timeout seconds (default 60; 0: never), reading or writing, is closed. SIGTERM or
// SIGINT (read from a signalfd) drains: every executor stops accepting, lets the echoes in progress
// finish, closes its connections, and the program exits 0.
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "server_setup.hpp"

namespace {

using uring::task;
using uring::net::tcp_listener;
using uring::net::tcp_stream;

struct config {
  std::string address = "127.0.0.1";
  int port = 7000;
  int threads = 1;
  uring::backend_kind backend = uring::backend_kind::automatic;
  std::chrono::milliseconds idle{60'000};
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-echo [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
               "                  [--idle-timeout SECONDS]\n"
               "  --address       IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
               "  --port          TCP port (default 7000; 0 picks a free one, printed at start)\n"
               "  --threads       executors, each on its own thread with its own SO_REUSEPORT listener (default 1)\n"
               "  --backend       io_uring (native), its epoll emulation, or auto (default)\n"
               "  --idle-timeout  close a connection idle this long (default 60; 0: never)\n"
               "SIGTERM/SIGINT: stop accepting, finish the echoes in progress, exit 0.\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uring-echo: %s needs a value\n", a.c_str());
        usage(2);
      }
      return argv[++i];
    };
    auto number = [&](double lo, double hi) {
      std::string v = value();
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || d < lo || d > hi) {
        std::fprintf(stderr, "uring-echo: %s: '%s' is not a number in [%g, %g]\n", a.c_str(), v.c_str(), lo, hi);
        usage(2);
      }
      return d;
    };
    if (a == "--address") {
      c.address = value();
    } else if (a == "--port") {
      c.port = static_cast<int>(number(0, 65535));
    } else if (a == "--threads") {
      c.threads = static_cast<int>(number(1, 1024));
    } else if (a == "--idle-timeout") {
      c.idle = std::chrono::milliseconds(static_cast<long>(number(0, 1e6) * 1000));
    } else if (a == "--backend") {
      std::string b = value();
      if (!samples::parse_backend(b, c.backend)) {
        std::fprintf(stderr, "uring-echo: --backend: '%s' is not auto, native or emulated\n", b.c_str());
        usage(2);
      }
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-echo: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  return c;
}

// One executor's share of the server: its connections and the drain.
struct worker {
  std::stop_source drain;  // requested on the worker's own thread: stop accepting, end idle reads
  int live = 0;            // connections being served
  std::coroutine_handle<> drained;  // serve(), waiting for the last connection to finish
  std::mutex mutex;
  uring::executor* ex = nullptr;  // null once the executor is gone (guarded by mutex)
  std::string failure;
};

// Resumes serve() once every connection has finished.
struct all_finished {
  worker* w;
  bool await_ready() const noexcept { return w->live == 0; }
  void await_suspend(std::coroutine_handle<> h) const noexcept { w->drained = h; }
  void await_resume() const noexcept {}
};

void connection_finished(worker& w) {
  if (--w.live == 0 && w.drained) {
    uring::executor::current()->post([h = std::exchange(w.drained, {})] { h.resume(); });
  }
}

// Echoes until the peer ends the stream, fails, idles too long, or the drain ends a read that waits.
// A write in progress is never cancelled: what was read is echoed before the connection closes.
task<void> serve_connection(tcp_stream s, worker* w, std::chrono::milliseconds idle) {
  std::array<char, 16384> buf;
  try {
    for (;;) {
      auto read = uring::with_stop_token(s.read_some(buf).nothrow(), w->drain.get_token());
      uring::io_result r = idle.count() > 0 ? co_await uring::with_timeout(std::move(read), idle)
                                            : co_await std::move(read);
      if (r.res <= 0) break;
      // A peer that stops reading is idle too: the write gets the same limit.
      co_await s.write_all(std::span(buf.data(), static_cast<std::size_t>(r.res)),
                           idle.count() > 0 ? idle : uring::net::no_timeout);
    }
  } catch (const std::system_error&) {
    // The peer went away in the middle of an echo: nothing to tell it.
  }
  connection_finished(*w);
}

task<void> serve(const tcp_listener* listener, worker* w, std::chrono::milliseconds idle) {
  auto connections = listener->accept_all();
  while (!w->drain.stop_requested()) {
    tcp_stream s;
    bool failed = false;
    try {
      s = co_await connections.next(w->drain.get_token());
    } catch (const std::system_error& e) {
      if (w->drain.stop_requested()) break;
      // Out of fds and the like: say so and go on; the connection waits in the backlog meanwhile.
      std::fprintf(stderr, "uring-echo: %s\n", e.what());
      failed = true;
    }
    if (failed) {
      co_await uring::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    ++w->live;
    uring::spawn(serve_connection(std::move(s), w, idle));
  }
  co_await all_finished{w};
}

void run_worker(const tcp_listener* listener, worker* w, uring::executor_options opts,
                std::chrono::milliseconds idle, std::latch* started) {
  try {
    uring::executor ex(opts);
    {
      std::lock_guard lock(w->mutex);
      w->ex = &ex;
    }
    started->count_down();
    started = nullptr;
    try {
      ex.run(serve(listener, w, idle));
    } catch (...) {
      std::lock_guard lock(w->mutex);
      w->ex = nullptr;
      throw;
    }
    std::lock_guard lock(w->mutex);
    w->ex = nullptr;
  } catch (const std::exception& e) {
    w->failure = e.what();
    if (started != nullptr) started->count_down();
  }
}

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);

  // SIGTERM and SIGINT are read from a signalfd; every listener is bound before any thread starts.
  int signal_fd = -1;
  std::vector<tcp_listener> listeners;
  uring::net::address where;
  try {
    signal_fd = samples::termination_signalfd();
    listeners = samples::bind_reuseport(c.address, c.port, c.threads);
    where = listeners.front().local_address();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-echo: %s\n", e.what());
    return 1;
  }

  uring::executor_options opts;
  opts.backend = c.backend;
  std::vector<std::unique_ptr<worker>> workers;
  std::vector<std::thread> threads;
  std::latch started(c.threads);
  for (int i = 0; i < c.threads; ++i) {
    workers.push_back(std::make_unique<worker>());
    threads.emplace_back(run_worker, &listeners[static_cast<std::size_t>(i)], workers.back().get(), opts, c.idle,
                         &started);
  }
  started.wait();
  std::string backend = "?";
  {
    std::lock_guard lock(workers.front()->mutex);
    if (workers.front()->ex != nullptr) backend = to_string(workers.front()->ex->plan().backend);
  }
  std::printf("uring-echo: listening on %s (%d threads, %s backend)\n", where.to_string().c_str(), c.threads,
              backend.c_str());
  std::fflush(stdout);

  int signo = samples::wait_for_termination(signal_fd);
  std::fprintf(stderr, "uring-echo: %s: draining\n", strsignal(signo));
  for (auto& w : workers) {
    std::lock_guard lock(w->mutex);
    if (w->ex == nullptr) continue;
    try {
      w->ex->post([wp = w.get()] { wp->drain.request_stop(); });
    } catch (const std::system_error&) {
      // It stopped already.
    }
  }
  for (auto& t : threads) t.join();
  ::close(signal_fd);
  int status = 0;
  for (auto& w : workers) {
    if (!w->failure.empty()) {
      std::fprintf(stderr, "uring-echo: a worker failed: %s\n", w->failure.c_str());
      status = 1;
    }
  }
  return status;
}
