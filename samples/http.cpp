// uring-http: a small HTTP/1.1 server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-http [--address 127.0.0.1] [--port 8080] [--threads 1] [--backend auto|native|emulated]
//              [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]
//              [--write-timeout SECONDS] [--resolve auto|walk] [--metrics-path PATH]
//
// Routes: GET / answers "hello\n" (text/plain); GET /file/<name> answers the file <name> under --root
// (the rules, symlinks and dotfiles refused, are in http_files.hpp); HEAD is GET without the body;
// with --metrics-path, GET PATH answers every executor's figures in the Prometheus text format
// (uring/metrics.hpp); anything else is 404, a method other than GET or HEAD is 405. A target may be in
// origin-form ("/file/x") or absolute-form ("http://host/file/x": its path is used, the authority ignored).
// Keep-alive and pipelining: the requests of a connection are answered one at a time, in order. Small
// answers to requests that arrived together gather and go out in one write (up to out_limit); a file above
// small_file goes out after them by send_file, a piece at a time. Nothing more is read from a connection
// until everything it has sent so far is answered, so its pending output is bounded and a client that
// pipelines a burst and does not read holds the rest in its own socket, not in the server's memory (nor,
// leased, in the receive buffers its executor's connections share: see pause_receiving).
//
// Defences (the list in --help): the parser's limits (uring::http, answered 400/413/431/501/505 and the
// connection closed; bodies are cut to max_body since no route reads one); a request must arrive whole
// within --header-timeout seconds of the connection being ready for it (slowloris: 408 and close; a
// connection idle with nothing sent is closed silently); every write, and every piece of a file, must go
// out within --write-timeout seconds (a peer that stops reading is dropped); at most --max-connections
// connections at once over all threads, the ones above answered 503 and closed; a peer that resets or stops
// reading only ends its own connection (sends use MSG_NOSIGNAL).
//
// Each of the --threads executors has its own SO_REUSEPORT listener on the same port, as in uring-echo;
// `--port 0` binds a free port and the first line on stdout says which. SIGTERM or SIGINT (a signalfd)
// drains: stop accepting, answer the requests already received, close, exit 0. --recv leased (the default
// where the kernel has provided-buffer rings) receives into 4 KiB buffers leased from a pool of 1024 per
// executor and feeds them to the parser, so an idle keep-alive connection holds no receive buffer (its
// parser keeps only what a request left); the header timeout is the leased receive's own timeout.
// --recv copy reads into the parser's buffer (16 KiB of room per read).
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <uring/http/parser.hpp>
#include <uring/uring.hpp>

#include "http_files.hpp"
#include "server.hpp"

namespace {

using std::chrono::milliseconds;
using uring::task;
using uring::net::tcp_stream;

struct config {
  sample::server_flags server{.port = 8080};
  std::string root = ".";
  int max_connections = 10'000;
  milliseconds header_timeout{10'000};
  milliseconds write_timeout{30'000};  // each write, and each piece of a file, must go out within this
  sample::resolve_kind resolve = sample::resolve_kind::automatic;
  const sample::file_root* files = nullptr;  // --root, opened
  std::string metrics_path;                  // --metrics-path; empty: none
};

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-http [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
      "                  [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]\n"
      "                  [--write-timeout SECONDS] [--resolve auto|walk] [--drain-timeout SECONDS]\n"
      "                  [--metrics-path PATH]\n"
      "  --address          IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
      "  --port             TCP port (default 8080; 0 picks a free one, printed at start)\n"
      "  --threads          executors, each on its own thread with its own SO_REUSEPORT listener (default "
      "1)\n"
      "  --backend          io_uring (native), its epoll emulation, or auto (default)\n"
      "  --root             directory served under /file/ (default .)\n"
      "  --max-connections  connections at once, all threads together; more are answered 503 (default "
      "10000)\n"
      "  --header-timeout   a request must arrive whole within this many seconds (default 10): 408; an idle\n"
      "                     keep-alive connection is closed after it\n"
      "  --recv             leased: chunks leased from a buffer pool per executor, idle connections hold\n"
      "                     no buffer (default where the kernel has buffer rings); copy: read per "
      "connection\n"
      "  --write-timeout    each write, and each 256 KiB piece of a file, must be taken by the client "
      "within\n"
      "                     this many seconds, else the connection is dropped (default 30)\n"
      "  --drain-timeout    after SIGTERM/SIGINT, close the connections still open after this long\n"
      "                     (default 5; 0: at once)\n"
      "  --resolve          auto: openat2 beneath --root from the kernel's caches, else a walk (default);\n"
      "                     walk: always one component at a time through the ring\n"
      "  --metrics-path     serve every executor's counters and histograms (operation latencies\n"
      "                     included) at this path, Prometheus text format (e.g. /metrics; default:\n"
      "                     none)\n"
      "GET / -> hello; GET|HEAD /file/NAME -> the regular file NAME under --root. Absolute-form targets\n"
      "(http://host/PATH) are served by their PATH.\n"
      "Files: never outside --root; no symlink is followed (404), dotfiles and dot-directories are 404,\n"
      "a NAME over 1024 bytes decoded is 414. Files of any size are streamed.\n"
      "Limits of a connection:\n"
      "  request line + headers 8 KiB and 64 headers (431), body 16 KiB (413), Transfer-Encoding (501),\n"
      "  HTTP/1.0 and 1.1 only (505; no version: 400)\n"
      "  answers are sent in order; at most 16 KiB of them gather before a write, a file above 16 KiB is\n"
      "  sent by send_file in 256 KiB pieces; nothing more is read until the requests read are answered\n"
      "  (leased: the armed receive is ended before a send that may wait; a client found more than 16\n"
      "  chunks ahead of its answers then is dropped)\n"
      "  receive buffers: 1024 x 4 KiB per thread shared by its connections (leased), 16 KiB a read (copy)\n"
      "  a refused request: its answer gets 1 s, then up to 64 KiB more input is read (1 s) and it closes\n"
      "SIGUSR1: print each executor's operations in flight (kind, fd, age) on stderr.\n"
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
    } else if (args.flag() == "--resolve") {
      std::string r = args.value();
      if (r != "auto" && r != "walk") {
        std::fprintf(stderr, "uring-http: --resolve: '%s' is not auto or walk\n", r.c_str());
        usage(2);
      }
      c.resolve = r == "walk" ? sample::resolve_kind::walk : sample::resolve_kind::automatic;
    } else if (args.flag() == "--write-timeout") {
      c.write_timeout = milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
    } else if (args.flag() == "--metrics-path") {
      c.metrics_path = args.value();
      c.server.histograms = true;  // the page shows the operations' latencies too
      if (!c.metrics_path.starts_with('/') || c.metrics_path.starts_with("/file/")) {
        std::fprintf(stderr, "uring-http: --metrics-path: '%s' must start with / and not be under /file/\n",
                     c.metrics_path.c_str());
        usage(2);
      }
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

// Connections open over all threads: the --max-connections cap. release_connection gives one back.
std::atomic<int> open_connections{0};

void release_connection() { open_connections.fetch_sub(1, std::memory_order_relaxed); }

// Limits of one connection (documented in --help and README.md).
constexpr std::size_t small_file = 16 * 1024;  // files up to this size are read and sent with their head
constexpr std::size_t out_limit = 16 * 1024;  // answers gathered beyond this are sent before the next request
constexpr std::size_t file_piece = 256 * 1024;  // a larger file goes out by send_file, this much at a time
constexpr std::size_t max_body = 16 * 1024;     // a request body (no route reads one) above this is 413

constexpr int pause_chunks = 16;  // at most this many chunks are taken in when receiving pauses

// One connection's stream and what waits to go in and out of it.
struct connection {
  tcp_stream& s;
  sample::worker& w;
  std::string out;    // answers gathered, at most about out_limit + small_file bytes
  std::string stash;  // bytes received while pausing, for the parser
};

// Leased over a buffer ring, a stream's multishot receive stays armed between receives: while the
// connection waits on a slow peer to take a file or a burst of answers, what the peer sends meanwhile would
// fill the executor's pool, which every connection shares. So before such a send the armed receive is ended
// (a receive with no time to wait): the few chunks there already (pause_chunks at most) go to the stash,
// the rest stays in the socket until the connection reads again. A peer with more than pause_chunks chunks
// there (it sends far ahead of the answers it takes) is dropped: std::system_error, as when the stream
// failed.
task<void> pause_receiving(connection& conn) {
  for (int i = 0; i <= pause_chunks; ++i) {
    uring::net::recv_result r =
        co_await uring::with_timeout(conn.s.recv(*conn.w.pool).nothrow(), milliseconds(0));
    if (r.res == -ETIMEDOUT || r.res == 0) co_return;  // ended (end of stream is seen again by the next read)
    if (r.res < 0) throw std::system_error(-r.res, std::system_category(), "recv");
    conn.stash.append(r.buffer.view());
  }
  throw std::system_error(ENOBUFS, std::system_category(), "recv: too far ahead of its answers");
}

// Bytes sent on `fd` and not yet acknowledged by the peer (SIOCOUTQ): they pile up when it stops reading.
std::size_t unacknowledged(int fd) noexcept {
  int n = 0;
  return ::ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
}

// Sends the answers gathered in `out` (within --write-timeout) and empties it. Receiving pauses first if
// the send may wait on the peer: `more` follows (a burst, a file), or the peer is already behind.
task<void> flush(const config& c, connection& conn, bool more = false) {
  if (conn.out.empty() && !more) co_return;
  if (conn.w.pool != nullptr && conn.w.pool->uses_ring() &&
      (more || unacknowledged(conn.s.fd()) > out_limit)) {
    co_await pause_receiving(conn);
  }
  if (conn.out.empty()) co_return;
  co_await sample::bounded(conn.s.write_all(std::span(conn.out.data(), conn.out.size())), c.write_timeout,
                           conn.w.abort.get_token());  // a drain's deadline ends it
  conn.out.clear();
}

// Appends a text/plain answer (without the body for HEAD).
void append_text(std::string& out, int status, std::string_view body, bool head, bool keep) {
  const uring::http::header type{"Content-Type", "text/plain"};
  if (head) {
    uring::http::append_response_head(out, status, std::span(&type, 1), body.size(), keep);
  } else {
    uring::http::append_response(out, status, std::span(&type, 1), body, keep);
  }
}

// Answers GET|HEAD /file/<rest>: a small file is read and appended to `out` with its head; a larger one is
// sent after `out` (and its head), straight from the file. False if the connection must close (the file
// shrank while it was being sent).
task<bool> answer_file(const config& c, connection& conn, std::string_view rest, bool head, bool keep) {
  sample::opened_file f = co_await c.files->open(rest);
  if (f.status != 200) {
    append_text(conn.out, f.status, f.status == 414 ? "path too long\n" : "not found\n", head, keep);
    co_return true;
  }
  uring::owned_fd file(f.fd);
  const uring::http::header type{"Content-Type", "application/octet-stream"};
  if (head) {
    uring::http::append_response_head(conn.out, 200, std::span(&type, 1), f.size, keep);
    co_return true;
  }
  if (f.size <= small_file) {
    std::string body(static_cast<std::size_t>(f.size), '\0');
    std::size_t got = 0;
    while (got < body.size()) {
      uring::io_result r =
          co_await uring::read_at(f.fd, std::span(body.data() + got, body.size() - got), got).nothrow();
      if (r.res < 0) {
        append_text(conn.out, 500, "read failed\n", false, keep);
        co_return true;
      }
      if (r.res == 0) break;  // it shrank meanwhile
      got += static_cast<std::size_t>(r.res);
    }
    body.resize(got);
    uring::http::append_response(conn.out, 200, std::span(&type, 1), body, keep);
    co_return true;
  }
  uring::http::append_response_head(conn.out, 200, std::span(&type, 1), f.size, keep);
  co_await flush(c, conn, true);
  co_return co_await sample::send_body(conn.s, f.fd, f.size, file_piece, c.write_timeout,
                                       conn.w.abort.get_token());
}

// Every executor's figures (uring::metrics, gathered on each one's own thread) in the Prometheus text
// format. An executor that has gone shows zeros.
task<void> answer_metrics(connection& conn, bool head, bool keep) {
  std::vector<uring::metrics::executor_sample> figures;
  for (const auto& peer : *conn.w.all) {
    try {
      figures.push_back(co_await uring::submit_to(
          peer->handle, [] { return uring::metrics::sample_of(*uring::executor::current()); }));
    } catch (const std::system_error&) {
      figures.emplace_back();
    }
  }
  const std::string body = uring::metrics::render(figures);
  const uring::http::header type{"Content-Type", "text/plain; version=0.0.4"};
  if (head) {
    uring::http::append_response_head(conn.out, 200, std::span(&type, 1), body.size(), keep);
  } else {
    uring::http::append_response(conn.out, 200, std::span(&type, 1), body, keep);
  }
}

// Answers `req`: appended to `out`, or (a large file) sent. False if the connection must close.
task<bool> answer(const config& c, connection& conn, const uring::http::request& req) {
  bool head = req.method == "HEAD";
  std::string_view path = uring::http::target_path(req.target);
  if (req.method != "GET" && !head) {
    uring::http::header headers[] = {{"Content-Type", "text/plain"}, {"Allow", "GET, HEAD"}};
    uring::http::append_response(conn.out, 405, headers, "method not allowed\n", req.keep_alive);
    co_return true;
  }
  if (path.starts_with("/file/"))
    co_return co_await answer_file(c, conn, path.substr(5), head, req.keep_alive);
  if (!c.metrics_path.empty() && path == c.metrics_path) {
    co_await answer_metrics(conn, head, req.keep_alive);
    co_return true;
  }
  if (path == "/") {
    append_text(conn.out, 200, "hello\n", head, req.keep_alive);
  } else {
    append_text(conn.out, 404, "not found\n", head, req.keep_alive);
  }
  co_return true;
}

// Sends `answer` and closes gently: a close with unread request bytes makes the kernel reset the connection,
// which can destroy the answer before the client reads it. So: send, shut down our side, and read what the
// peer still sends (up to 64 KiB, for at most a second) before the close.
// With `pool`, the rest is read by leased receives (a stream that receives with a pool does not mix in
// read_some).
task<void> answer_and_close(tcp_stream& s, std::string_view answer, uring::net::buffer_pool* pool) {
  co_await uring::with_timeout(s.write_all(std::span(answer.data(), answer.size())), milliseconds(1000));
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
  connection conn{.s = s, .w = *w, .out = {}, .stash = {}};
  std::string& out = conn.out;
  try {
    if (open_connections.fetch_add(1, std::memory_order_relaxed) >= c.max_connections) {
      uring::http::append_response(out, 503, {}, "too many connections\n", false);
      co_await answer_and_close(s, out, w->pool);
      release_connection();
      co_return;
    }
    uring::http::request_parser parser(uring::http::limits{.max_body = max_body});
    auto deadline = std::chrono::steady_clock::now() + c.header_timeout;
    bool open = true;
    while (open) {
      // Answer the complete requests buffered, one at a time and in order. Small answers gather in `out`
      // (sent together, up to out_limit); nothing more is read until they are all answered and sent, so a
      // pipelined burst waits in the socket, not in memory.
      bool answered = false;
      for (;;) {
        if (!conn.stash.empty()) {  // what pausing took in comes after everything fed before
          parser.feed(conn.stash);
          conn.stash.clear();
        }
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
        // Not cancelled by the drain: requests received are answered.
        open = co_await answer(c, conn, req) && req.keep_alive;
        answered = true;
        if (!open) break;
        if (out.size() >= out_limit) {  // a burst: its answers may wait on the peer
          co_await flush(c, conn, true);
        }
      }
      co_await flush(c, conn);
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
  release_connection();
}

// The connection handler run_server spawns: a plain function object, copied to every thread.
struct http_handler {
  const config* cfg;
  task<void> operator()(tcp_stream s, sample::worker* w) const {
    return serve_connection(std::move(s), w, cfg);
  }
};

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  std::optional<sample::file_root> files;
  try {
    files.emplace(c.root, c.resolve);
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "uring-http: --root: %s\n", e.what());
    return 2;
  }
  c.files = &*files;
  return sample::run_server("uring-http", c.server, http_handler{&c});
}
