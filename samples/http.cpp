// uring-http: a small HTTP/1.1 server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-http [--address 127.0.0.1] [--port 8080] [--threads 1] [--backend auto|native|emulated]
//              [--root DIR] [--max-connections N] [--header-timeout SECONDS]
//
// Routes: GET / answers "hello\n" (text/plain); GET /file/<name> answers the file <name> under --root;
// HEAD is GET without the body; anything else is 404, a method other than GET or HEAD is 405.
// Keep-alive and pipelining: the requests of a connection are answered in order, and the answers to the
// requests that arrived together go out in one write.
//
// Defences: the parser's limits (uring::http, answered 400/413/431/501/505 and the connection closed);
// a request must arrive whole within --header-timeout seconds of the connection being ready for it
// (slowloris: 408 and close; a connection idle with nothing sent is closed silently); at most
// --max-connections connections at once over all threads, the ones above answered 503 and closed;
// a peer that resets or stops reading only ends its own connection (sends use MSG_NOSIGNAL).
//
// Each of the --threads executors has its own SO_REUSEPORT listener on the same port, as in uring-echo;
// `--port 0` binds a free port and the first line on stdout says which. SIGTERM or SIGINT (a signalfd)
// drains: stop accepting, answer the requests already received, close, exit 0.
#include <fcntl.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
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

#include <uring/http/parser.hpp>
#include <uring/uring.hpp>

namespace {

using uring::task;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using std::chrono::milliseconds;

struct config {
  std::string address = "127.0.0.1";
  int port = 8080;
  int threads = 1;
  uring::backend_kind backend = uring::backend_kind::automatic;
  std::string root = ".";
  int max_connections = 10'000;
  milliseconds header_timeout{10'000};
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-http [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
               "                  [--root DIR] [--max-connections N] [--header-timeout SECONDS]\n"
               "  --address          IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
               "  --port             TCP port (default 8080; 0 picks a free one, printed at start)\n"
               "  --threads          executors, each on its own thread with its own SO_REUSEPORT listener (default 1)\n"
               "  --backend          io_uring (native), its epoll emulation, or auto (default)\n"
               "  --root             directory served under /file/ (default .)\n"
               "  --max-connections  connections at once, all threads together; more are answered 503 (default 10000)\n"
               "  --header-timeout   a request must arrive whole within this many seconds (default 10): 408\n"
               "GET / -> hello; GET|HEAD /file/NAME -> the file NAME under --root.\n"
               "SIGTERM/SIGINT: stop accepting, answer the requests received, exit 0.\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uring-http: %s needs a value\n", a.c_str());
        usage(2);
      }
      return argv[++i];
    };
    auto number = [&](double lo, double hi) {
      std::string v = value();
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || d < lo || d > hi) {
        std::fprintf(stderr, "uring-http: %s: '%s' is not a number in [%g, %g]\n", a.c_str(), v.c_str(), lo, hi);
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
    } else if (a == "--root") {
      c.root = value();
    } else if (a == "--max-connections") {
      c.max_connections = static_cast<int>(number(1, 1e7));
    } else if (a == "--header-timeout") {
      c.header_timeout = milliseconds(static_cast<long>(number(0.001, 1e6) * 1000));
    } else if (a == "--backend") {
      std::string b = value();
      if (b == "auto") {
        c.backend = uring::backend_kind::automatic;
      } else if (b == "native") {
        c.backend = uring::backend_kind::native;
      } else if (b == "emulated") {
        c.backend = uring::backend_kind::emulated;
      } else {
        std::fprintf(stderr, "uring-http: --backend: '%s' is not auto, native or emulated\n", b.c_str());
        usage(2);
      }
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-http: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  struct stat st {};
  if (::stat(c.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "uring-http: --root: '%s' is not a directory\n", c.root.c_str());
    usage(2);
  }
  return c;
}

// Connections open over all threads: the --max-connections cap.
std::atomic<int> open_connections{0};

// One executor's share of the server: its connections and the drain.
struct worker {
  const config* cfg = nullptr;
  std::stop_source drain;           // requested on the worker's own thread: stop accepting, end waiting reads
  int live = 0;                     // connections being served
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
  open_connections.fetch_sub(1, std::memory_order_relaxed);
  if (--w.live == 0 && w.drained) {
    uring::executor::current()->post([h = std::exchange(w.drained, {})] { h.resume(); });
  }
}

constexpr std::size_t max_file = 64 * 1024 * 1024;  // larger files are refused (413) rather than buffered
constexpr milliseconds write_timeout{30'000};     // a peer that stops reading is dropped after this

// Decodes %XX escapes (path_is_safe has already refused malformed and dangerous ones).
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The status and body of GET /file/<rest>, read from --root with the ring's file operations.
task<std::pair<int, std::string>> read_file(const std::string& root, std::string_view rest) {
  if (!uring::http::path_is_safe(rest) || rest == "/") co_return std::pair{404, std::string("not found\n")};
  std::string path = root + percent_decode(rest);
  uring::io_result opened = co_await uring::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW).nothrow();
  if (opened.res < 0) co_return std::pair{404, std::string("not found\n")};
  int fd = opened.res;
  std::pair<int, std::string> answer{404, std::string("not found\n")};
  try {
    struct ::statx st = co_await uring::fstat(fd);
    if (S_ISREG(st.stx_mode)) {
      if (st.stx_size > max_file) {
        answer = {413, "file too large\n"};
      } else {
        std::string body(static_cast<std::size_t>(st.stx_size), '\0');
        std::size_t got = 0;
        while (got < body.size()) {
          std::size_t n = co_await uring::read(fd, std::span(body.data() + got, body.size() - got), got);
          if (n == 0) break;  // it shrank meanwhile
          got += n;
        }
        body.resize(got);
        answer = {200, std::move(body)};
      }
    }
  } catch (const std::system_error&) {
    answer = {500, "read failed\n"};
  }
  co_await uring::close(fd).nothrow();
  co_return answer;
}

// Appends the answer to `req` to `out`.
task<void> answer(const worker& w, const uring::http::request& req, std::string& out) {
  using uring::http::header;
  bool head = req.method == "HEAD";
  std::string_view path = uring::http::target_path(req.target);
  int status = 404;
  std::string body = "not found\n";
  std::string_view type = "text/plain";
  if (req.method != "GET" && !head) {
    status = 405;
    body = "method not allowed\n";
  } else if (path == "/") {
    status = 200;
    body = "hello\n";
  } else if (path.starts_with("/file/")) {
    std::tie(status, body) = co_await read_file(w.cfg->root, path.substr(5));
    if (status == 200) type = "application/octet-stream";
  }
  header headers[] = {{"Content-Type", type}, {"Allow", "GET, HEAD"}};
  std::span<const header> hs(headers, status == 405 ? 2 : 1);
  if (head) {
    uring::http::append_response_head(out, status, hs, body.size(), req.keep_alive);
  } else {
    uring::http::append_response(out, status, hs, body, req.keep_alive);
  }
}

// Sends `answer` and closes gently: a close with unread request bytes makes the kernel reset the connection,
// which can destroy the answer before the client reads it. So: send, shut down our side, and read what the
// peer still sends (up to 64 KiB, for at most a second) before the close.
task<void> answer_and_close(const tcp_stream& s, std::string_view answer) {
  co_await s.write_all(std::span(answer.data(), answer.size()), milliseconds(1000));
  co_await s.shutdown().nothrow();
  std::array<char, 4096> sink;
  auto until = std::chrono::steady_clock::now() + milliseconds(1000);
  for (int i = 0; i < 16; ++i) {
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    uring::io_result r = co_await uring::with_timeout(s.read_some(sink).nothrow(), left);
    if (r.res <= 0) break;
  }
}

// Serves one connection's requests in order until it closes, fails, breaks a rule or times out.
task<void> serve_connection(tcp_stream s, worker* w) {
  const config& c = *w->cfg;
  std::string out;
  try {
    if (open_connections.fetch_add(1, std::memory_order_relaxed) >= c.max_connections) {
      uring::http::append_response(out, 503, {}, "too many connections\n", false);
      co_await answer_and_close(s, out);
      connection_finished(*w);
      co_return;
    }
    uring::http::request_parser parser;
    auto deadline = std::chrono::steady_clock::now() + c.header_timeout;
    bool open = true;
    while (open) {
      // Answer every complete request buffered, in order, then send the answers together.
      bool answered = false;
      for (;;) {
        auto st = parser.next();
        if (st == uring::http::parse_status::need_more) break;
        if (st == uring::http::parse_status::error) {
          // Refused: the answers before it, then the refusal, then a gentle close (the rest is unread).
          out += uring::http::error_response(parser.error());
          co_await answer_and_close(s, out);
          out.clear();
          open = false;
          break;
        }
        const auto& req = parser.get();
        bool keep = req.keep_alive;
        co_await answer(*w, req, out);
        answered = true;
        if (!keep) {
          open = false;
          break;
        }
      }
      if (!out.empty()) {
        // Not cancelled by the drain: requests received are answered.
        co_await s.write_all(std::span(out.data(), out.size()), write_timeout);
        out.clear();
      }
      if (!open) break;
      if (answered) deadline = std::chrono::steady_clock::now() + c.header_timeout;
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      uring::io_result r{-ETIMEDOUT};
      if (left.count() > 0) {
        auto room = parser.prepare(16384);
        r = co_await uring::with_timeout(
            uring::with_stop_token(s.read_some(std::span(room.data(), room.size())).nothrow(),
                                   w->drain.get_token()),
            left);
      }
      if (r.res == -ETIMEDOUT && parser.buffered() > 0) {
        // Part of a request, and not the rest in time: say so before closing.
        uring::http::append_response(out, 408, {}, "request timeout\n", false);
        co_await answer_and_close(s, out);
        break;
      }
      if (r.res <= 0) break;  // closed by the peer, reset, idle too long, or the drain
      parser.commit(static_cast<std::size_t>(r.res));
    }
  } catch (const std::system_error&) {
    // The peer reset or stopped reading in the middle of an answer: nothing to tell it.
  }
  connection_finished(*w);
}

task<void> serve(const tcp_listener* listener, worker* w) {
  auto connections = listener->accept_all();
  while (!w->drain.stop_requested()) {
    tcp_stream s;
    bool failed = false;
    try {
      s = co_await connections.next(w->drain.get_token());
    } catch (const std::system_error& e) {
      if (w->drain.stop_requested()) break;
      // Out of fds and the like: say so and go on; the connection waits in the backlog meanwhile.
      std::fprintf(stderr, "uring-http: %s\n", e.what());
      failed = true;
    }
    if (failed) {
      co_await uring::sleep_for(milliseconds(10));
      continue;
    }
    ++w->live;
    uring::spawn(serve_connection(std::move(s), w));
  }
  co_await all_finished{w};
}

void run_worker(const tcp_listener* listener, worker* w, uring::executor_options opts, std::latch* started) {
  try {
    uring::executor ex(opts);
    {
      std::lock_guard lock(w->mutex);
      w->ex = &ex;
    }
    started->count_down();
    started = nullptr;
    try {
      ex.run(serve(listener, w));
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

  // SIGTERM and SIGINT are blocked in every thread (the mask is inherited) and read from a signalfd.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int signal_fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::fprintf(stderr, "uring-http: signalfd: %s\n", std::strerror(errno));
    return 1;
  }

  // Every listener is bound before any thread starts, as in uring-echo: --port 0 yields one shared port.
  std::vector<tcp_listener> listeners;
  uring::net::address where;
  try {
    where = uring::net::address::ip(c.address, static_cast<std::uint16_t>(c.port));
    uring::net::listen_options opts;
    opts.reuse_port = true;
    listeners.push_back(tcp_listener::bind(where, opts));
    where = listeners.front().local_address();
    for (int i = 1; i < c.threads; ++i) listeners.push_back(tcp_listener::bind(where, opts));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-http: %s\n", e.what());
    return 1;
  }

  uring::executor_options opts;
  opts.backend = c.backend;
  std::vector<std::unique_ptr<worker>> workers;
  std::vector<std::thread> threads;
  std::latch started(c.threads);
  for (int i = 0; i < c.threads; ++i) {
    workers.push_back(std::make_unique<worker>());
    workers.back()->cfg = &c;
    threads.emplace_back(run_worker, &listeners[static_cast<std::size_t>(i)], workers.back().get(), opts, &started);
  }
  started.wait();
  std::string backend = "?";
  {
    std::lock_guard lock(workers.front()->mutex);
    if (workers.front()->ex != nullptr) backend = to_string(workers.front()->ex->plan().backend);
  }
  std::printf("uring-http: listening on %s (%d threads, %s backend)\n", where.to_string().c_str(), c.threads,
              backend.c_str());
  std::fflush(stdout);

  signalfd_siginfo info{};
  while (::read(signal_fd, &info, sizeof info) < 0 && errno == EINTR) {
  }
  std::fprintf(stderr, "uring-http: %s: draining\n", strsignal(static_cast<int>(info.ssi_signo)));
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
      std::fprintf(stderr, "uring-http: a worker failed: %s\n", w->failure.c_str());
      status = 1;
    }
  }
  return status;
}
