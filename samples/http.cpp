// uring-http: a small HTTP/1.1 server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-http [--address 127.0.0.1] [--port 8080] [--threads 1] [--backend auto|native|emulated]
//              [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]
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
// drains: stop accepting, answer the requests already received, close, exit 0. --recv leased (the default
// where the kernel has provided-buffer rings) receives into 4 KiB buffers leased from a pool of 1024 per
// executor and feeds them to the parser, so an idle keep-alive connection holds no receive buffer (its
// parser keeps only what a request left); the header timeout is the leased receive's own timeout.
// --recv copy reads into the parser's buffer (16 KiB of room per read).
#include <fcntl.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <uring/http/parser.hpp>
#include <uring/uring.hpp>

#include "server.hpp"

namespace {

using uring::task;
using uring::net::tcp_stream;
using std::chrono::milliseconds;

struct config {
  sample::server_flags server{.port = 8080};
  std::string root = ".";
  int max_connections = 10'000;
  milliseconds header_timeout{10'000};
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-http [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
               "                  [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]\n"
               "  --address          IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
               "  --port             TCP port (default 8080; 0 picks a free one, printed at start)\n"
               "  --threads          executors, each on its own thread with its own SO_REUSEPORT listener (default 1)\n"
               "  --backend          io_uring (native), its epoll emulation, or auto (default)\n"
               "  --root             directory served under /file/ (default .)\n"
               "  --max-connections  connections at once, all threads together; more are answered 503 (default 10000)\n"
               "  --header-timeout   a request must arrive whole within this many seconds (default 10): 408\n"
               "  --recv             leased: chunks leased from a buffer pool per executor, idle connections hold\n"
               "                     no buffer (default where the kernel has buffer rings); copy: read per connection\n"
               "  --drain-timeout    after SIGTERM/SIGINT, close the connections still open after this long\n"
               "                     (default 5; 0: at once)\n"
               "GET / -> hello; GET|HEAD /file/NAME -> the file NAME under --root.\n"
               "SIGTERM/SIGINT: stop accepting, answer the requests received, exit 0.\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  c.server.pool = {.count = 1024, .size = 4096};
  sample::flag_reader args("uring-http", argc, argv, usage);
  while (args.next()) {
    if (args.common(c.server)) continue;
    if (args.flag() == "--root") {
      c.root = args.value();
    } else if (args.flag() == "--max-connections") {
      c.max_connections = static_cast<int>(args.number(1, 1e7));
    } else if (args.flag() == "--header-timeout") {
      c.header_timeout = milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
    } else {
      args.unknown();
    }
  }
  struct stat st {};
  if (::stat(c.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "uring-http: --root: '%s' is not a directory\n", c.root.c_str());
    usage(2);
  }
  return c;
}

// Connections open over all threads: the --max-connections cap. release_connection gives one back and
// tells the worker the connection finished.
std::atomic<int> open_connections{0};

void release_connection(sample::worker& w) {
  open_connections.fetch_sub(1, std::memory_order_relaxed);
  sample::connection_finished(w);
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
task<void> answer(const config& c, const uring::http::request& req, std::string& out) {
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
    std::tie(status, body) = co_await read_file(c.root, path.substr(5));
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
// With `pool`, the rest is read by leased receives (a stream that receives with a pool does not mix in
// read_some).
task<void> answer_and_close(tcp_stream& s, std::string_view answer, uring::net::buffer_pool* pool) {
  co_await s.write_all(std::span(answer.data(), answer.size()), milliseconds(1000));
  co_await s.shutdown().nothrow();
  std::array<char, 4096> sink;
  auto until = std::chrono::steady_clock::now() + milliseconds(1000);
  for (int i = 0; i < 16; ++i) {
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::int32_t got = 0;  // not co_await in the arms of ?: (see samples/echo.cpp)
    if (pool != nullptr) {
      got = (co_await uring::with_timeout(s.recv(*pool).nothrow(), left)).res;
    } else {
      got = (co_await uring::with_timeout(s.read_some(sink).nothrow(), left)).res;
    }
    if (got <= 0) break;
  }
}


// Serves one connection's requests in order until it closes, fails, breaks a rule or times out.
task<void> serve_connection(tcp_stream s, sample::worker* w, const config* cfg) {
  const config& c = *cfg;
  std::string out;
  try {
    if (open_connections.fetch_add(1, std::memory_order_relaxed) >= c.max_connections) {
      uring::http::append_response(out, 503, {}, "too many connections\n", false);
      co_await answer_and_close(s, out, w->pool);
      release_connection(*w);
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
          co_await answer_and_close(s, out, w->pool);
          out.clear();
          open = false;
          break;
        }
        const auto& req = parser.get();
        bool keep = req.keep_alive;
        co_await answer(c, req, out);
        answered = true;
        if (!keep) {
          open = false;
          break;
        }
      }
      if (!out.empty()) {
        // Not cancelled by the drain, only at its deadline: requests received are answered.
        co_await s.write_all(std::span(out.data(), out.size()), write_timeout, w->abort.get_token());
        out.clear();
      }
      if (!open) break;
      if (answered) deadline = std::chrono::steady_clock::now() + c.header_timeout;
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      // The next bytes into the parser, within what is left, unless the drain comes first: the count, 0 at
      // end of stream, or -errno. Leased: one chunk from the worker's pool, copied into the parser and
      // returned to the pool at once. Copy: straight into the parser's room.
      std::int32_t got = -ETIMEDOUT;
      if (left.count() > 0 && w->pool != nullptr) {
        uring::net::recv_result r = co_await uring::with_timeout(
            uring::with_stop_token(s.recv(*w->pool).nothrow(), w->drain.get_token()), left);
        if (r.res > 0) parser.feed(r.buffer.view());
        got = r.res;
      } else if (left.count() > 0) {
        auto room = parser.prepare(16384);
        uring::io_result r = co_await uring::with_timeout(
            uring::with_stop_token(s.read_some(std::span(room.data(), room.size())).nothrow(),
                                   w->drain.get_token()),
            left);
        parser.commit(r.res > 0 ? static_cast<std::size_t>(r.res) : 0);
        got = r.res;
      }
      if (got == -ETIMEDOUT && parser.buffered() > 0) {
        // Part of a request, and not the rest in time: say so before closing.
        uring::http::append_response(out, 408, {}, "request timeout\n", false);
        co_await answer_and_close(s, out, w->pool);
        break;
      }
      if (got <= 0) break;  // closed by the peer, reset, idle too long, or the drain
    }
  } catch (const std::system_error&) {
    // The peer reset or stopped reading in the middle of an answer: nothing to tell it.
  }
  release_connection(*w);
}

// The connection handler run_server spawns: a plain function object, copied to every thread.
struct http_handler {
  const config* cfg;
  task<void> operator()(tcp_stream s, sample::worker* w) const { return serve_connection(std::move(s), w, cfg); }
};

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  return sample::run_server("uring-http", c.server, http_handler{&c});
}
