// samples/http/connection.cpp — uring-http's request loop: answers in order, files, the metrics page, and
// the limits each connection keeps (documented in --help and README.md).
#include "connection.hpp"

#include <array>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include <uring/http/parser.hpp>
#include <uring/uring.hpp>

namespace sample {

namespace {

using std::chrono::milliseconds;
using uring::task;

constexpr std::size_t small_file = 16 * 1024;  // files up to this size are read and sent with their head
constexpr std::size_t out_limit = 16 * 1024;  // answers gathered beyond this are sent before the next request
constexpr std::size_t max_body = 16 * 1024;   // a request body (no route reads one) above this is 413
constexpr std::size_t read_room = 16 * 1024;  // a read into the parser (copy, TLS) takes at most this
// The room of a read after one that did not fill its room: a request's head fits, and the parser's storage,
// which the room grows and zero-fills, stays this small in a connection that only ever gets such requests.
constexpr std::size_t first_room = 2 * 1024;
constexpr int pause_chunks = 16;  // at most this many chunks are taken in when receiving pauses

std::atomic<int> open_connections{0};  // over all threads, the slots taken (connection_slot)

// What a connection keeps between its bursts of requests.
struct between_bursts {
  std::chrono::steady_clock::time_point deadline;  // for the next request's head (--header-timeout)
  // At least the bytes sent and not yet acknowledged: what SIOCOUTQ said when last asked, plus what was
  // sent since. While it stays within out_limit the peer cannot be behind, and flush asks no syscall.
  std::size_t unacknowledged_at_most = 0;
};

// What a burst of requests works with: the parser and the answers gathered.
struct burst_state {
  uring::http::request_parser parser{uring::http::limits{.max_body = max_body}};
  std::string out;    // answers gathered, at most about out_limit + small_file bytes
  std::string stash;  // bytes received while pausing, for the parser
};

// Burst states kept by each worker's thread between bursts, rather than by the connections: a connection
// with no request pending holds none, and a burst takes one without allocating. At most spare_states are
// kept, each with at most spare_room of answers' capacity.
constexpr std::size_t spare_states = 16;
constexpr std::size_t spare_room = 4 * 1024;
thread_local std::vector<std::unique_ptr<burst_state>> spares;

std::unique_ptr<burst_state> take_state() {
  if (spares.empty()) return std::make_unique<burst_state>();
  std::unique_ptr<burst_state> st = std::move(spares.back());
  spares.pop_back();
  return st;
}

// Keeps `st` for the next burst: the parser has nothing buffered (it is between requests) and the answers
// were sent.
void keep_state(std::unique_ptr<burst_state> st) {
  if (spares.size() >= spare_states || st->out.capacity() > spare_room || st->stash.capacity() > spare_room)
    return;
  st->out.clear();
  st->stash.clear();
  spares.push_back(std::move(st));
}

// One burst's link and what waits to go in and out of it.
struct connection {
  link l;
  worker& w;
  uring::net::buffer_pool* pool;  // leased receives (plain links on a worker with a pool), else null
  between_bursts& kept;
  std::string& out;          // the burst state's
  std::string& stash;        // the burst state's
  bool read_filled = false;  // the last copying read filled its room: more may wait, the next gets read_room
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
        co_await uring::with_timeout(conn.l.socket().recv(*conn.pool).nothrow(), milliseconds(0));
    if (r.res == -ETIMEDOUT || r.res == 0) co_return;  // ended (end of stream is seen again by the next read)
    if (r.res < 0) throw std::system_error(-r.res, std::system_category(), "recv");
    conn.stash.append(r.buffer.view());
  }
  throw std::system_error(ENOBUFS, std::system_category(), "recv: too far ahead of its answers");
}

// Whether the peer may be behind: more than out_limit bytes sent and not acknowledged. Asks the kernel only
// when the bound kept since it last asked allows it.
bool peer_behind(connection& conn) noexcept {
  std::size_t& bound = conn.kept.unacknowledged_at_most;
  if (bound <= out_limit) return false;
  bound = conn.l.socket().unacknowledged();
  return bound > out_limit;
}

// Sends the answers gathered in `out` (within --write-timeout) and empties it. Receiving pauses first if
// the send may wait on the peer: `more` follows (a burst, a file), or the peer is already behind.
task<void> flush(const http_config& c, connection& conn, bool more = false) {
  if (conn.out.empty() && !more) co_return;
  if (conn.pool != nullptr && conn.pool->uses_ring()) {
    if (more || peer_behind(conn)) co_await pause_receiving(conn);
    // What follows `more` (a file) is not counted: the next flush asks the kernel.
    std::size_t& bound = conn.kept.unacknowledged_at_most;
    bound = more ? std::numeric_limits<std::size_t>::max() : bound + conn.out.size();
  }
  if (conn.out.empty()) co_return;
  co_await bounded(conn.l.write_all(conn.out), c.write_timeout,
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
task<bool> answer_file(const http_config& c, connection& conn, std::string_view rest, bool head, bool keep) {
  opened_file f = co_await c.files->open(rest);
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
  co_return co_await conn.l.send_file(f.fd, f.size, c.write_timeout, conn.w.abort.get_token());
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

// Answers `req` at once where no wait is needed (most requests: `/`, the refusals, not found), appending
// to `out`: true then. False for a file or the metrics, which answer_waiting serves.
bool answer_at_once(const http_config& c, connection& conn, const uring::http::request& req) {
  const bool head = req.method == "HEAD";
  std::string_view path = uring::http::target_path(req.target);
  if (req.method != "GET" && !head) {
    uring::http::header headers[] = {{"Content-Type", "text/plain"}, {"Allow", "GET, HEAD"}};
    uring::http::append_response(conn.out, 405, headers, "method not allowed\n", req.keep_alive);
    return true;
  }
  if (path.starts_with("/file/") || (!c.metrics_path.empty() && path == c.metrics_path)) return false;
  if (path == "/") {
    append_text(conn.out, 200, "hello\n", head, req.keep_alive);
  } else {
    append_text(conn.out, 404, "not found\n", head, req.keep_alive);
  }
  return true;
}

// The answers that wait: a file (appended to `out`, or sent) and the metrics. False if the connection must
// close. Not inlined, so that its frame (40 KiB with a file's open) is neither part of the connection's
// nor allocated for the requests answer_at_once serves.
[[gnu::noinline]] task<bool> answer_waiting(const http_config& c, connection& conn,
                                            const uring::http::request& req) {
  const bool head = req.method == "HEAD";
  std::string_view path = uring::http::target_path(req.target);
  if (path.starts_with("/file/"))
    co_return co_await answer_file(c, conn, path.substr(5), head, req.keep_alive);
  co_await answer_metrics(conn, head, req.keep_alive);
  co_return true;
}

// The receive a leased connection waits in, made in a plain function: each step is a 128 B temporary that
// in the coroutine's own expression would take a slot in the frame every idle connection holds.
uring::net::basic_recv_awaitable<false> leased_receive(uring::net::tcp_stream& s, worker& w,
                                                       milliseconds left) {
  return uring::with_timeout(uring::with_stop_token(s.recv(*w.pool).nothrow(), w.drain.get_token()), left);
}

// A copying read (TLS, or no pool) into the parser's room, within `left`. A coroutine of its own, so that
// the leased connection's frame does not hold its awaitable.
task<std::int32_t> read_copied(connection& conn, uring::http::request_parser& parser, milliseconds left) {
  auto room = parser.prepare(conn.read_filled ? read_room : first_room);
  const std::int32_t got = co_await uring::with_timeout(
      uring::with_stop_token(conn.l.read_some(std::span(room.data(), room.size())), conn.w.drain.get_token()),
      left);
  conn.read_filled = got > 0 && static_cast<std::size_t>(got) == room.size();
  parser.commit(got > 0 ? static_cast<std::size_t>(got) : 0);
  co_return got;
}

}  // namespace

task<void> answer_and_close(const link& l, std::string_view answer, uring::net::buffer_pool* pool) {
  co_await uring::with_timeout(l.write_all(answer), milliseconds(1000));
  co_await uring::with_timeout(l.close_write(), milliseconds(1000)).nothrow();
  std::array<char, 4096> sink;
  auto until = std::chrono::steady_clock::now() + milliseconds(1000);
  for (int i = 0; i < 16; ++i) {
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::int32_t got = 0;  // not co_await in the arms of ?: (see samples/echo.cpp)
    if (pool != nullptr) {
      got = (co_await uring::with_timeout(l.socket().recv(*pool).nothrow(), left)).res;
    } else {
      got = co_await uring::with_timeout(l.read_some(sink), left);
    }
    if (got <= 0) break;
  }
}

connection_slot::connection_slot(int limit) noexcept
    : taken_(open_connections.fetch_add(1, std::memory_order_relaxed) < limit) {}

connection_slot::~connection_slot() {
  if (counted_) open_connections.fetch_sub(1, std::memory_order_relaxed);
}

namespace {

// Answers the requests of a burst in order: from the chunk `first` that woke a leased connection (returned
// to the pool here), until none is pending (leased: true, and the caller waits for the next bytes) or the
// connection is to close (false). The parser and the answers are a burst state, given back to the
// thread's spares when none is pending, so that a connection with no request pending holds neither; not
// inlined, so that this frame is not elided into the caller's.
[[gnu::noinline]] task<bool> answer_burst(link l, worker& w, const http_config& c, between_bursts& kept,
                                          uring::net::leased_buffer* first) {
  std::unique_ptr<burst_state> st = take_state();
  connection conn{.l = l,
                  .w = w,
                  .pool = l.secure() ? nullptr : w.pool,
                  .kept = kept,
                  .out = st->out,
                  .stash = st->stash};
  std::string& out = conn.out;
  try {
    uring::http::request_parser& parser = st->parser;
    if (first != nullptr) {
      parser.feed(first->view());
      first->reset();
    }
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
        auto status = parser.next();
        if (status == uring::http::parse_status::need_more) break;
        if (status == uring::http::parse_status::error) {
          // Refused: the answers before it, then the refusal, then a gentle close (the rest is unread).
          out += uring::http::error_response(parser.error());
          co_await answer_and_close(l, out, conn.pool);
          co_return false;
        }
        const auto& req = parser.get();
        // Not cancelled by the drain: requests received are answered.
        bool keep = true;
        if (!answer_at_once(c, conn, req)) keep = co_await answer_waiting(c, conn, req);
        open = keep && req.keep_alive;
        answered = true;
        if (!open) break;
        if (out.size() >= out_limit) {  // a burst: its answers may wait on the peer
          co_await flush(c, conn, true);
        }
      }
      co_await flush(c, conn);
      if (!open) break;
      if (!conn.stash.empty()) continue;  // the flush paused: what it took in is parsed before reading more
      if (answered) kept.deadline = std::chrono::steady_clock::now() + c.header_timeout;
      if (conn.pool != nullptr && parser.buffered() == 0) {  // none pending: the caller waits
        keep_state(std::move(st));
        co_return true;
      }
      // The next bytes into the parser before the deadline, unless the drain comes first: the count, 0 at
      // end of stream, or -errno.
      const auto left =
          std::chrono::duration_cast<milliseconds>(kept.deadline - std::chrono::steady_clock::now());
      std::int32_t got = -ETIMEDOUT;  // unless there is time left to read
      if (left.count() > 0 && conn.pool != nullptr) {
        // Leased: one chunk from the worker's pool, copied into the parser and returned to the pool at once.
        uring::net::recv_result r = co_await leased_receive(l.socket(), w, left);
        if (r.res > 0) parser.feed(r.buffer.view());
        got = r.res;
      } else if (left.count() > 0) {
        got = co_await read_copied(conn, parser, left);  // straight into the parser's room
      }
      if (got == -ETIMEDOUT && parser.buffered() > 0) {
        // Part of a request, and not the rest in time: say so before closing.
        uring::http::append_response(out, 408, {}, "request timeout\n", false);
        co_await answer_and_close(l, out, conn.pool);
        co_return false;
      }
      if (got <= 0) break;  // closed by the peer, reset, idle too long, or the drain
    }
    // TLS ends with close_notify (a plain stream closes when its owner drops it).
    if (l.secure()) co_await bounded(l.close_write(), milliseconds(1000), w.abort.get_token());
  } catch (const std::system_error&) {
    // The peer reset or stopped reading in the middle of an answer: nothing to tell it.
  }
  co_return false;
}

}  // namespace

task<void> serve_copying(link l, worker& w, const http_config& c) {
  between_bursts kept{.deadline = std::chrono::steady_clock::now() + c.header_timeout};
  co_await answer_burst(l, w, c, kept, nullptr);
}

task<void> serve_http(uring::net::tcp_stream s, connection_slot /*held for the connection's life*/, worker& w,
                      const http_config& c) {
  between_bursts kept{.deadline = std::chrono::steady_clock::now() + c.header_timeout};
  if (w.pool == nullptr) {
    co_await answer_burst(link(s), w, c, kept, nullptr);
    co_return;
  }
  for (;;) {
    // No request pending: nothing to answer if the deadline passes, the peer closes or the drain comes.
    const auto left =
        std::chrono::duration_cast<milliseconds>(kept.deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) co_return;
    uring::net::recv_result r = co_await leased_receive(s, w, left);
    if (r.res <= 0) co_return;
    if (!co_await answer_burst(link(s), w, c, kept, &r.buffer)) co_return;
  }
}

}  // namespace sample
