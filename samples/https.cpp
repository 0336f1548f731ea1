// uring-https: a small HTTPS server on uring::tls: GET / answers "hello" over TLS (ALPN http/1.1), with
// keep-alive, on the thread-per-core skeleton of uring-echo and uring-http (samples/server.hpp).
// `uring-https --cert server.pem --key server.key --port 8443`, then `curl --cacert ca.pem https://...`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>

#include <uring/http/parser.hpp>
#include <uring/tls/tls.hpp>
#include <uring/uring.hpp>

#include "server.hpp"

namespace {

using std::chrono::milliseconds;
using uring::task;
using uring::net::tcp_stream;
using uring::tls::tls_stream;

struct config {
  sample::server_flags server{.port = 8443};
  std::string cert_file;
  std::string key_file;
  int max_connections = 10'000;
  milliseconds handshake_timeout{10'000};
  milliseconds header_timeout{10'000};
  milliseconds write_timeout{30'000};
  std::optional<uring::tls::tls_context> tls;  // from --cert and --key, shared by every thread
};

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-https --cert FILE --key FILE [--address IP] [--port N] [--threads N]\n"
      "                   [--backend auto|native|emulated] [--max-connections N] [--handshake-timeout "
      "SECONDS]\n"
      "                   [--header-timeout SECONDS] [--write-timeout SECONDS] [--drain-timeout SECONDS]\n"
      "  --cert             the server's certificate chain, PEM (leaf first)\n"
      "  --key              its private key, PEM\n"
      "  --address          IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
      "  --port             TCP port (default 8443; 0 picks a free one, printed at start)\n"
      "  --threads          executors, each on its own thread with its own SO_REUSEPORT listener (default "
      "1)\n"
      "  --backend          io_uring (native), its epoll emulation, or auto (default)\n"
      "  --max-connections  connections at once, all threads together; more are closed before their\n"
      "                     handshake (default 10000)\n"
      "  --handshake-timeout  a TLS handshake must finish within this many seconds (default 10)\n"
      "  --header-timeout   a request must arrive whole within this many seconds (default 10): 408; an idle\n"
      "                     keep-alive connection is closed after it\n"
      "  --write-timeout    each answer must be taken by the client within this many seconds (default 30)\n"
      "  --drain-timeout    after SIGTERM/SIGINT, close the connections still open after this long\n"
      "                     (default 5; 0: at once)\n"
      "GET / -> hello; other paths 404, other methods 405. TLS 1.2 and 1.3, ALPN http/1.1 (a client\n"
      "offering ALPN without http/1.1 is refused).\n"
      "Limits of a connection: request line + headers 8 KiB and 64 headers (431), body 16 KiB (413),\n"
      "Transfer-Encoding (501), HTTP/1.0 and 1.1 only (505); one request answered at a time, in order;\n"
      "16 KiB of plaintext read at a time; a TLS record (about 18 KiB) staged each way.\n"
      "SIGUSR1: print each executor's operations in flight (kind, fd, age) on stderr.\n"
      "SIGTERM/SIGINT: stop accepting, answer the requests received, exit 0.\n");
  std::exit(code);
}

milliseconds seconds_flag(sample::flag_reader& args) {
  return milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
}

config parse(int argc, char** argv) {
  config c;
  sample::flag_reader args("uring-https", argc, argv, usage);
  while (args.next()) {
    if (args.common(c.server)) continue;
    if (args.flag() == "--cert") {
      c.cert_file = args.value();
    } else if (args.flag() == "--key") {
      c.key_file = args.value();
    } else if (args.flag() == "--max-connections") {
      c.max_connections = static_cast<int>(args.number(1, 1e7));
    } else if (args.flag() == "--handshake-timeout") {
      c.handshake_timeout = seconds_flag(args);
    } else if (args.flag() == "--header-timeout") {
      c.header_timeout = seconds_flag(args);
    } else if (args.flag() == "--write-timeout") {
      c.write_timeout = seconds_flag(args);
    } else {
      args.unknown();
    }
  }
  if (c.cert_file.empty() || c.key_file.empty()) {
    std::fprintf(stderr, "uring-https: --cert and --key are required\n");
    usage(2);
  }
  // Reads go through TLS into the parser, never into a shared pool of leased buffers.
  c.server.recv = sample::server_flags::recv_kind::copy;
  return c;
}

std::atomic<int> open_connections{0};

// The answer to one request, appended to `out`.
void answer(const uring::http::request& req, std::string& out) {
  const uring::http::header type{"Content-Type", "text/plain"};
  const bool head = req.method == "HEAD";
  if (req.method != "GET" && !head) {
    uring::http::header headers[] = {type, {"Allow", "GET, HEAD"}};
    uring::http::append_response(out, 405, headers, "method not allowed\n", req.keep_alive);
  } else if (uring::http::target_path(req.target) != "/") {
    uring::http::append_response(out, 404, std::span(&type, 1), head ? "" : "not found\n", req.keep_alive);
  } else if (head) {
    uring::http::append_response_head(out, 200, std::span(&type, 1), 6, req.keep_alive);
  } else {
    uring::http::append_response(out, 200, std::span(&type, 1), "hello\n", req.keep_alive);
  }
}

// Handshake, then requests answered in order until the client closes, breaks a rule or times out. The
// drain ends the wait for the next request; its deadline (abort) ends everything else.
task<void> serve(tls_stream& s, sample::worker& w, const config& c) {
  co_await sample::bounded(s.handshake(), c.handshake_timeout, w.abort.get_token());
  uring::http::request_parser parser(uring::http::limits{.max_body = 16 * 1024});
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + c.header_timeout;  // for the whole of the next request
  for (;;) {
    bool open = true;
    for (auto st = parser.next(); open && st != uring::http::parse_status::need_more; st = parser.next()) {
      if (st == uring::http::parse_status::error) {
        out += uring::http::error_response(parser.error());
        open = false;
      } else {
        answer(parser.get(), out);
        open = parser.get().keep_alive;
      }
    }
    if (!out.empty()) {
      co_await sample::bounded(s.write_all(out), c.write_timeout, w.abort.get_token());
      out.clear();
      deadline = std::chrono::steady_clock::now() + c.header_timeout;
    }
    if (!open) break;
    auto room = parser.prepare(16 * 1024);
    std::size_t n = 0;
    bool failed = false;
    try {
      auto left =
          std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(1));
      n = co_await sample::bounded(s.read_some(std::span(room.data(), room.size())),
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(left),
                                   w.drain.get_token());
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::timed_out && e.code() != std::errc::operation_canceled) throw;
      failed = true;
    }
    parser.commit(n);
    if (failed && parser.buffered() > 0) {
      // Part of a request, and not the rest in time: say so before closing.
      uring::http::append_response(out, 408, {}, "request timeout\n", false);
      co_await sample::bounded(s.write_all(out), milliseconds(1000), w.abort.get_token());
    }
    if (failed) break;  // idle too long, or the drain: close_notify
    if (n == 0) break;  // close_notify
  }
  co_await sample::bounded(s.shutdown(), milliseconds(1000), w.abort.get_token());
}

task<void> serve_connection(tcp_stream sock, sample::worker* w, const config* c) {
  if (open_connections.fetch_add(1, std::memory_order_relaxed) < c->max_connections) {
    try {
      tls_stream s = tls_stream::server(*c->tls, std::move(sock));
      co_await serve(s, *w, *c);
    } catch (const std::exception&) {
      // A failed handshake, a reset, a time-out or the drain's deadline: nothing more to tell the client.
    }
  }
  open_connections.fetch_sub(1, std::memory_order_relaxed);
}

struct https_handler {
  const config* cfg;
  task<void> operator()(tcp_stream s, sample::worker* w) const {
    return serve_connection(std::move(s), w, cfg);
  }
};

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  try {
    uring::tls::server_options o;
    o.cert_file = c.cert_file;
    o.key_file = c.key_file;
    o.alpn = {"http/1.1"};
    c.tls = uring::tls::tls_context::server(o);
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "uring-https: %s\n", e.what());
    return 2;
  }
  return sample::run_server("uring-https", c.server, https_handler{&c});
}
