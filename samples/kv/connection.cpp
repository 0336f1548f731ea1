// samples/kv/connection.cpp — one uring-kv client's connection (connection.hpp).
#include "connection.hpp"

#include "forward_batch.hpp"
#include "inline.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include <uring/resp/parser.hpp>
#include <uring/uring.hpp>

namespace kv {

namespace {

using std::chrono::milliseconds;
using uring::task;
using uring::net::tcp_stream;
using steady = std::chrono::steady_clock;
namespace resp = uring::resp;

constexpr std::int64_t note_interval_ms = 10'000;

struct note_state {
  std::atomic<std::int64_t> next_ms{0};
  std::atomic<std::uint64_t> skipped{0};
};
std::array<note_state, static_cast<std::size_t>(event::count_)> notes;

// Connections open over all threads (--max-connections), refused ones included while they are answered.
std::atomic<int> open_connections{0};

struct counted {
  counted() noexcept { open_connections.fetch_add(1, std::memory_order_relaxed); }
  ~counted() { open_connections.fetch_sub(1, std::memory_order_relaxed); }
  counted(const counted&) = delete;
  counted& operator=(const counted&) = delete;
};

// An HTTP request sent to the RESP port: a browser page or an SSRF'd curl posting commands in its body
// (cross-protocol scripting). As Redis does, "POST" and "Host:" end the connection before anything after
// them runs; so does a request line ("GET / HTTP/1.1": a method, a target, a version), which no command
// of uring-kv can be.
bool looks_like_http(args_t args) noexcept {
  if (iequals(args[0], "POST") || iequals(args[0], "HOST:")) return true;
  if (args.size() != 3 || !args[2].starts_with("HTTP/")) return false;
  for (std::string_view m : {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"}) {
    if (args[0] == m) return true;
  }
  return false;
}

// Reads and drops what the client still sends until it closes: at most `budget` bytes within `time`.
task<void> discard_input(tcp_stream& s, std::size_t budget, milliseconds time) {
  std::array<char, 4096> sink;
  auto until = steady::now() + time;
  while (budget > 0) {
    auto left = std::chrono::duration_cast<milliseconds>(until - steady::now());
    if (left.count() <= 0) co_return;
    std::int32_t got = (co_await uring::with_timeout(s.read_some(sink).nothrow(), left)).res;
    if (got <= 0) co_return;
    budget -= std::min(budget, static_cast<std::size_t>(got));
  }
}

// Redis's answer above maxclients: the error, then a close that lets the client read it (a close with its
// request unread would reset the connection and could destroy the error). Not inlined, so that its frame
// (a 4 KiB sink) is not elided into serve_connection's, which every idle connection keeps.
[[gnu::noinline]] task<void> refuse(tcp_stream& s) {
  constexpr std::string_view error = "-ERR max number of clients reached\r\n";
  co_await uring::with_timeout(s.write_all(std::span(error.data(), error.size())), milliseconds(1000));
  co_await s.shutdown().nothrow();
  co_await discard_input(s, 64 * 1024, milliseconds(1000));
}

// The next chunk of input, awaited by the caller (no frame of its own): until `deadline` when an idle
// limit is set, failing with -ETIMEDOUT then.
uring::net::basic_recv_awaitable<false> next_chunk(tcp_stream& s, uring::net::buffer_pool& pool,
                                                   milliseconds idle, steady::time_point deadline) {
  auto read = s.recv(pool).nothrow();
  if (idle.count() != 0) {
    read.set_timeout(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::max(deadline - steady::now(), steady::duration::zero())));
  }
  return read;
}

// The parser's refusal of a command longer than limits::max_command.
constexpr std::string_view too_large = "command too large";

// What pause_receiving works on: the connection's stream, its executor's pool, the burst's parser, and
// the bytes it took in.
struct receive_side {
  tcp_stream& s;
  uring::net::buffer_pool& pool;
  const resp::command_parser& parser;
  std::size_t limit;  // --client-query-buffer-limit
  // Taken in while pausing: parsed before anything more is read. Not fed to the parser at once, since a
  // command that writes as it goes may still read its arguments, which a feed would move.
  std::string stash;
};

// Before a write that may wait on the client (reply::before_waiting): the receive armed ahead over the
// pool's ring is ended by a receive with no time to wait, and the chunks there already go to the stash,
// so a client that stops reading holds no pool buffer while its reply waits; what it sends meanwhile
// stays in the socket. Past the query buffer limit the connection closes, as when a command passes it.
uring::task<void> pause_receiving(void* side) {
  auto& r = *static_cast<receive_side*>(side);
  for (;;) {
    uring::net::recv_result got =
        co_await uring::with_timeout(r.s.recv(r.pool).nothrow(), std::chrono::milliseconds(0));
    if (got.res <= 0) co_return;  // ended (an end of stream or error is seen again by the next receive)
    r.stash.append(got.buffer.view());
    if (r.stash.size() + r.parser.buffered() > r.limit) {
      note(event::overflow, "a client sent past --client-query-buffer-limit ahead of its replies; closed");
      throw std::system_error(ENOBUFS, std::system_category(), "recv");
    }
  }
}

// Parses and answers one burst of input, from the chunk `first` (returned to the pool here) until no byte of
// a command waits and every reply is written. Returns false when the connection is to close. The parser, the
// reply and the inline words live only that long, in a frame of their own (not inlined, so not elided into
// the connection's): an idle connection keeps none of them.
[[gnu::noinline]] task<bool> serve_burst(tcp_stream& s, server* srv, std::size_t me,
                                         const connection_limits* limits, session& ses,
                                         steady::time_point& deadline, uring::net::leased_buffer& first) {
  resp::limits lim;
  lim.max_bulk = srv->proto_max_bulk_len.load(std::memory_order_relaxed);
  lim.max_args = INT_MAX;  // as Redis: the count is bounded by the bytes a command may take
  lim.max_command = srv->query_buffer_limit.load(std::memory_order_relaxed);
  resp::command_parser parser(lim);
  // Commands that store a large argument take it from the parser rather than copy it (keyspace::store).
  struct input_scope {
    session& s;
    ~input_scope() { s.input = nullptr; }
  } scope{ses};
  ses.input = &parser;
  parser.feed(first.view());
  first.reset();  // back to the pool at once: the parser keeps its own copy
  // The client's last interaction, as Redis's (CLIENT LIST idle=): its input, stamped once a burst rather
  // than once a command (one clock read for up to a receive's worth of commands), and each flush within it.
  ses.info.last_ms = clock_ms();
  reply out(s, limits->output);
  out.set_resp3(ses.proto == 3);
  receive_side side{s, *srv->pools[me], parser, lim.max_command, {}};
  if (side.pool.uses_ring()) out.before_waiting(pause_receiving, &side, ses.unacknowledged);
  std::vector<std::string> words;  // an inline command's arguments, unquoted
  std::vector<std::string_view> word_views;
  // Commands bound for another shard wait here while the ones after them go there too; whatever else comes
  // first (a command, a refusal, the end of the input) runs them first.
  forward_batch batch;
  const milliseconds idle = limits->idle;
  bool open = true;
  for (;;) {
    for (;;) {
      auto st = parser.next();
      if (st == resp::parse_status::need_more) {
        if (side.stash.empty()) break;
        parser.feed(side.stash);  // what a pause took in, before anything more is read
        side.stash.clear();
        continue;
      }
      if (!batch.empty() && (st != resp::parse_status::command ||
                             !batch.takes(forwarded_to(*srv, me, ses, parser.args()), parser.args()))) {
        co_await batch.run(*srv, me, out);
      }
      if (st == resp::parse_status::error) {
        if (parser.error().find(too_large) != std::string_view::npos) {
          // As Redis past its query buffer limit: closed without a reply.
          note(event::overflow, "a command passed --client-query-buffer-limit; connection closed");
          co_return false;
        }
        out.text() += parser.error();
        open = false;
        break;
      }
      args_t args = parser.args();
      if (auto line = inline_line(args)) {
        auto split = split_inline(*line);
        if (!split) {
          out.text() += "-ERR Protocol error: unbalanced quotes in request\r\n";
          open = false;
          break;
        }
        words = std::move(*split);
        word_views.assign(words.begin(), words.end());
        if (word_views.empty()) continue;
        args = word_views;
      }
      if (looks_like_http(args)) {
        note(event::http,
             "possible cross-protocol attack: an HTTP request (POST, Host: or a request line) "
             "sent as commands; connection closed");
        co_return false;  // the replies not yet written go too, as in Redis
      }
      if (!co_await execute(*srv, me, ses, args, out, &batch) || ses.info.killed) {
        open = false;
        break;
      }
      if (idle.count() != 0) deadline = steady::now() + idle;
      if (out.must_flush()) {
        co_await out.flush();
        ses.info.last_ms = clock_ms();
      }
    }
    if (!batch.empty()) co_await batch.run(*srv, me, out);
    if (!out.empty()) co_await out.flush();
    // The client has taken every reply before more of its input is read.
    if (!open) co_return false;
    if (!side.stash.empty()) continue;  // the last flush paused receiving and took bytes in
    if (parser.buffered() == 0) co_return true;
    uring::net::recv_result got = co_await next_chunk(s, *srv->pools[me], idle, deadline);
    parser.feed(got.buffer.view());
    got.buffer.reset();
    if (got.res <= 0 || ses.info.killed) co_return false;
  }
}

}  // namespace

void note(event kind, std::string_view what) {
  note_state& n = notes[static_cast<std::size_t>(kind)];
  std::int64_t now = clock_ms();
  std::int64_t next = n.next_ms.load(std::memory_order_relaxed);
  if (now < next || !n.next_ms.compare_exchange_strong(next, now + note_interval_ms)) {
    n.skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::uint64_t skipped = n.skipped.exchange(0, std::memory_order_relaxed);
  if (skipped > 0) {
    std::fprintf(stderr, "uring-kv: %.*s (and %llu more since the last such report)\n",
                 static_cast<int>(what.size()), what.data(), static_cast<unsigned long long>(skipped));
  } else {
    std::fprintf(stderr, "uring-kv: %.*s\n", static_cast<int>(what.size()), what.data());
  }
}

task<void> serve_connection(tcp_stream s, server* srv, std::size_t me, const connection_limits* limits) {
  counted slot;
  client_registry& registry = *srv->clients[me];
  ++registry.connections_received;
  if (open_connections.load(std::memory_order_relaxed) > limits->max_connections) {
    note(event::refused, "max number of clients reached (--max-connections): refusing connections");
    try {
      co_await refuse(s);
    } catch (const std::exception&) {
      // It went away or would not read the error: closed all the same.
    }
    co_return;
  }
  session ses;
  ses.authenticated = srv->password.empty();
  client_info& info = ses.info;
  info.fd = s.fd();
  info.created_ms = info.last_ms = clock_ms();
  try {
    info.addr = s.peer_address().to_string();
  } catch (const std::exception&) {
    // Already reset by the peer: its address stays empty in CLIENT LIST.
  }
  registry.add(ses);
  struct listed {
    client_registry& registry;
    session& ses;
    ~listed() { registry.remove(ses); }
  } unlist_at_end{registry, ses};
  // Between bursts of input the connection holds no buffer: it waits with a receive leased from its
  // executor's pool. The loop is here, not in a coroutine of its own: its frame would be part of this one.
  auto deadline = steady::now() + limits->idle;
  try {
    s.set_nodelay(true);
    for (;;) {
      uring::net::recv_result got = co_await next_chunk(s, *srv->pools[me], limits->idle, deadline);
      // End of stream, reset, idle past --idle-timeout, CLIENT KILL.
      if (got.res <= 0 || ses.info.killed) break;
      if (!co_await serve_burst(s, srv, me, limits, ses, deadline, got.buffer)) break;
    }
  } catch (const output_overflow& e) {
    note(event::overflow, std::string(e.what()) + "; connection closed");
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::timed_out) {
      note(event::stalled, "a client left a reply unread past --output-timeout; connection closed");
    }
    // Otherwise the peer went away: nothing more to tell it.
  } catch (const std::exception&) {
    // Memory ran out for its request: the connection ends.
  }
  if (ses.tx.watching()) {
    try {
      co_await unwatch_all(*srv, me, ses);  // the shards forget its watched keys
    } catch (const std::exception&) {
      // The server is stopping: the shards go with it.
    }
  }
}

}  // namespace kv
