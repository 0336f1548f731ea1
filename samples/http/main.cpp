// uring-http: a small HTTP/1.1 server, thread-per-core, on io_uring or its epoll emulation.
//
//   uring-http [--address 127.0.0.1] [--port 8080] [--threads 1] [--backend auto|native|emulated]
//              [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]
//              [--write-timeout SECONDS] [--resolve auto|walk] [--metrics-path PATH]
//              [--tls-cert FILE --tls-key FILE [--tls-port 8443] [--handshake-timeout SECONDS]
//               [--tls-client-ca FILE]]
//
// Routes: GET / answers "hello\n" (text/plain); GET /file/<name> answers the file <name> under --root
// (the rules, symlinks and dotfiles refused, are in files.hpp); HEAD is GET without the body;
// with --metrics-path, GET PATH answers every executor's figures in the Prometheus text format
// (uring/metrics.hpp); anything else is 404, a method other than GET or HEAD is 405. A target may be in
// origin-form ("/file/x") or absolute-form ("http://host/file/x": its path is used, the authority ignored).
// Keep-alive and pipelining: the requests of a connection are answered one at a time, in order. Small
// answers to requests that arrived together gather and go out in one write (up to out_limit); a file above
// small_file goes out after them by send_file, a piece at a time. Nothing more is read from a connection
// until everything it has sent so far is answered, so its pending output is bounded and a client that
// pipelines a burst and does not read holds the rest in its own socket, not in the server's memory (nor,
// leased, in the receive buffers its executor's connections share: see pause_receiving in connection.cpp).
//
// Defences (the list in --help): the parser's limits (uring::http, answered 400/413/431/501/505 and the
// connection closed; bodies are cut to max_body since no route reads one); a request must arrive whole
// within --header-timeout seconds of the connection being ready for it (slowloris: 408 and close; a
// connection idle with nothing sent is closed silently); every write, and every piece of a file, must go
// out within --write-timeout seconds (a peer that stops reading is dropped); at most --max-connections
// connections at once over all threads, the ones above answered 503 and closed; a peer that resets or stops
// reading only ends its own connection (sends use MSG_NOSIGNAL).
//
// With --tls-cert and --tls-key the same routes are served over TLS (uring::tls, ALPN http/1.1) on a
// second port, --tls-port (--tls-client-ca: mutual TLS); a TLS connection reads into its parser and sends
// files through a 64 KiB buffer.
// Each of the --threads executors has its own SO_REUSEPORT listeners on the same ports, as in uring-echo;
// `--port 0` binds a free port and the first line on stdout says which. SIGTERM or SIGINT (a signalfd)
// drains: stop accepting, answer the requests already received, close, exit 0. --recv leased (the
// default) receives into 4 KiB buffers leased from a pool of 1024 per
// executor and feeds them to the parser, so an idle keep-alive connection holds no receive buffer (its
// parser keeps only what a request left); the header timeout is the leased receive's own timeout.
// --recv copy reads into the parser's buffer: 2 KiB of room, 16 KiB after a read that filled its room.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <uring/uring.hpp>

#ifdef URING_WITH_TLS
#include <uring/tls/tls.hpp>
#endif

#include "connection.hpp"

namespace {

using std::chrono::milliseconds;
using uring::task;
using uring::net::tcp_stream;

struct config : sample::http_config {
  std::string tls_cert;  // --tls-cert and --tls-key: PEM files; both or neither
  std::string tls_key;
  std::string tls_client_ca;  // --tls-client-ca: clients must present a certificate this CA signed
  int tls_port = 8443;
#ifdef URING_WITH_TLS
  std::optional<uring::tls::tls_context> tls;  // from them, shared by every thread
#endif
};

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-http [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
      "                  [--root DIR] [--max-connections N] [--header-timeout SECONDS] [--recv leased|copy]\n"
      "                  [--write-timeout SECONDS] [--resolve auto|walk] [--drain-timeout SECONDS]\n"
      "                  [--metrics-path PATH]\n"
      "                  [--tls-cert FILE --tls-key FILE [--tls-port N] [--handshake-timeout SECONDS]\n"
      "                   [--tls-client-ca FILE]]\n"
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
      "                     no buffer (default); copy: read per connection\n"
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
      "  --tls-cert         also serve HTTPS (TLS 1.2 and 1.3, ALPN http/1.1) with this certificate chain,\n"
      "                     PEM, leaf first; needs --tls-key, the private key, PEM\n"
      "  --tls-port         the HTTPS port (default 8443; 0 picks a free one, printed at start)\n"
      "  --handshake-timeout  a TLS handshake must finish within this many seconds (default 10)\n"
      "  --tls-client-ca    mutual TLS: a client must present a certificate this CA (PEM) signed, else\n"
      "                     its handshake fails\n"
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
      "  receive buffers: 1024 x 4 KiB per thread shared by its connections (leased); 2 KiB a read, 16 KiB\n"
      "  after one that filled its room (copy)\n"
      "  a refused request: its answer gets 1 s, then up to 64 KiB more input is read (1 s) and it closes\n"
      "  HTTPS: a TLS record (about 18 KiB) staged each way, read as with copy, files sent through a\n"
      "  64 KiB buffer; over --max-connections a TLS connection is closed before its handshake\n"
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
    } else if (args.flag() == "--tls-cert") {
      c.tls_cert = args.value();
    } else if (args.flag() == "--tls-key") {
      c.tls_key = args.value();
    } else if (args.flag() == "--tls-client-ca") {
      c.tls_client_ca = args.value();
    } else if (args.flag() == "--tls-port") {
      c.tls_port = static_cast<int>(args.number(0, 65535));
    } else if (args.flag() == "--handshake-timeout") {
      c.handshake_timeout = milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
    } else {
      args.unknown();
    }
  }
  struct stat st {};
  if (::stat(c.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "uring-http: --root: '%s' is not a directory\n", c.root.c_str());
    usage(2);
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    std::fprintf(stderr, "uring-http: --tls-cert and --tls-key go together\n");
    usage(2);
  }
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) {
    std::fprintf(stderr, "uring-http: --tls-client-ca needs --tls-cert and --tls-key\n");
    usage(2);
  }
  if (!c.tls_cert.empty()) {
#ifdef URING_WITH_TLS
    c.server.second_port = c.tls_port;
    c.server.second_name = "tls";
#else
    std::fprintf(stderr, "uring-http: built without uring::tls (OpenSSL 3): no --tls-cert\n");
    usage(2);
#endif
  }
  return c;
}

// The answer over --max-connections: 503, then a gentle close.
task<void> refuse(tcp_stream s, uring::net::buffer_pool* pool) {
  std::string out;
  uring::http::append_response(out, 503, {}, "too many connections\n", false);
  co_await sample::answer_and_close(sample::link(s), out, pool).nothrow();
}

// A plain HTTP connection: served in serve_http's frame, which holds its stream and slot.
task<void> serve_plain(tcp_stream s, sample::worker* w, const config* c) {
  sample::connection_slot slot(c->max_connections);
  if (!slot) return refuse(std::move(s), w->pool);
  return sample::serve_http(std::move(s), std::move(slot), *w, *c);
}

#ifdef URING_WITH_TLS
// An HTTPS connection: its handshake within --handshake-timeout, then the same requests as plain HTTP.
// Over the cap it is closed before the handshake (no TLS, no way to say 503).
task<void> serve_tls(tcp_stream s, sample::worker* w, const config* c) {
  sample::connection_slot slot(c->max_connections);
  if (!slot) co_return;
  try {
    uring::tls::tls_stream t = uring::tls::tls_stream::server(*c->tls, std::move(s));
    co_await sample::bounded(t.handshake(), c->handshake_timeout, w->abort.get_token());
    co_await sample::serve_copying(sample::link(t), *w, *c);
  } catch (const std::system_error&) {
    // A failed or timed-out handshake: nothing to tell the client.
  }
}
#endif

// The connection handler run_server spawns: a plain function object, copied to every thread.
struct http_handler {
  const config* cfg;
  task<void> operator()(tcp_stream s, sample::worker* w, int endpoint) const {
#ifdef URING_WITH_TLS
    if (endpoint == 1) return serve_tls(std::move(s), w, cfg);
#endif
    (void)endpoint;
    return serve_plain(std::move(s), w, cfg);
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
#ifdef URING_WITH_TLS
  if (!c.tls_cert.empty()) {
    try {
      uring::tls::server_options o;
      o.cert_file = c.tls_cert;
      o.key_file = c.tls_key;
      o.alpn = {"http/1.1"};
      if (!c.tls_client_ca.empty()) {
        o.client_auth = uring::tls::client_certificates::required;
        o.client_ca_file = c.tls_client_ca;
      }
      c.tls = uring::tls::tls_context::server(o);
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "uring-http: %s\n", e.what());
      return 2;
    }
  }
#endif
  return sample::run_server("uring-http", c.server, http_handler{&c});
}
