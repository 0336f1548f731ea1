// uring-get: fetches URLs over HTTP/1.1 and HTTPS, one after the other, and writes their bodies to stdout.
//
//   uring-get [-o FILE] [-v] [-I] [-k] [--cacert FILE] [--resolve HOST:PORT:ADDR] [--timeout SECONDS]
//             [--connect-timeout SECONDS] [--progress] [--backend auto|native|emulated] URL...
//
// A sample client on uring::net, uring::tls and uring::http::response_parser: connections are kept open
// between URLs of the same scheme, host and port (fetch.hpp), bodies stream to the output in bounded memory
// whatever their size, every URL's fetch runs under a deadline (uring::with_timeout), and each failure
// maps to an exit status (get::exit_code, listed in --help). Flags and URLs are parsed here (url.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <uring/executor.hpp>
#include <uring/tls/context.hpp>

#include "../server.hpp"
#include "fetch.hpp"
#include "url.hpp"

namespace {

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-get [options] URL...\n"
      "Fetches each URL in order with GET and writes the bodies to stdout. URLs: http:// or https://, a "
      "host\n"
      "name, an IPv4 address or an [IPv6] address, an optional :PORT, then the path and query (default /).\n"
      "  -o, --output FILE          write to FILE instead of stdout (one URL only)\n"
      "  -I, --head                 HEAD requests; print each response's head instead of a body\n"
      "  -v, --verbose              on stderr: '* connected to HOST:PORT (ADDRESS)', '* reusing connection\n"
      "                             to HOST:PORT', the request line and the status line\n"
      "      --cacert FILE          trust the CA certificates in FILE (PEM) instead of the system's\n"
      "  -k, --insecure             do not verify the server's certificate (nor its name)\n"
      "      --resolve HOST:PORT:ADDR  connect to ADDR for HOST and PORT (repeatable); the Host header, SNI\n"
      "                             and the certificate check keep HOST\n"
      "      --timeout SECONDS      each URL's whole fetch: connect, TLS, request, response (default 30)\n"
      "      --connect-timeout SECONDS  connect and TLS handshake (default 10)\n"
      "      --progress             a progress line on stderr (every 200 ms) for bodies above 1 MiB; on by\n"
      "                             default when stderr is a terminal\n"
      "      --backend auto|native|emulated  io_uring, or its epoll emulation (default auto)\n"
      "  -h, --help                 this text\n"
      "Connections: kept open for later URLs with the same scheme, host and port when the response allows "
      "it\n"
      "  (HTTP/1.1 without Connection: close, HTTP/1.0 with keep-alive, a body not ended by the close); a\n"
      "  kept connection that the server has closed is reopened once, if nothing of the response came.\n"
      "  HTTPS: TLS 1.2+, ALPN http/1.1, SNI, the certificate and the host name verified. Redirects are not\n"
      "  followed (the 3xx body is written).\n"
      "Limits: a response head 64 KiB and 100 headers, a chunk-size line 4 KiB, trailers 16 KiB, 16 interim\n"
      "  (1xx) responses; bodies stream through a 64 KiB buffer whatever their size.\n"
      "Exit status (the first failing URL's; the others are still fetched):\n"
      "  0 every URL answered 2xx\n"
      "  1 some URL answered a status >= 300 (its body is still written)\n"
      "  2 usage: a bad flag or URL\n"
      "  3 name resolution or connection failure (also a connection failing during the exchange)\n"
      "  4 TLS failure: handshake or certificate verification (OpenSSL's reason is printed)\n"
      "  5 time-out (--timeout or --connect-timeout)\n"
      "  6 malformed response, or the server closed the connection before the response or body ended\n"
      "  7 the output could not be written, or the executor could not start\n");
  std::exit(code);
}

struct config {
  get::options opts;
  std::vector<get::url> urls;
  std::string output;
  uring::backend_kind backend = uring::backend_kind::automatic;
  bool progress_set = false;
};

config parse_args(int argc, char** argv) {
  config c;
  sample::flag_reader args("uring-get", argc, argv, usage);
  std::vector<std::string> texts;
  bool only_urls = false;
  while (args.next()) {
    const std::string& f = args.flag();
    if (only_urls || f.empty() || f[0] != '-') {
      texts.push_back(f);
    } else if (f == "--") {
      only_urls = true;
    } else if (f == "-o" || f == "--output") {
      c.output = args.value();
    } else if (f == "-I" || f == "--head") {
      c.opts.head = true;
    } else if (f == "-v" || f == "--verbose") {
      c.opts.verbose = true;
    } else if (f == "-k" || f == "--insecure") {
      c.opts.insecure = true;
    } else if (f == "--cacert") {
      c.opts.cacert = args.value();
    } else if (f == "--resolve") {
      std::string text = args.value(), why;
      auto entry = get::parse_resolve(text, why);
      if (!entry) {
        std::fprintf(stderr, "uring-get: --resolve %s: %s\n", text.c_str(), why.c_str());
        usage(2);
      }
      c.opts.resolve.push_back(*entry);
    } else if (f == "--timeout") {
      c.opts.timeout = std::chrono::milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
    } else if (f == "--connect-timeout") {
      c.opts.connect_timeout = std::chrono::milliseconds(static_cast<long>(args.number(0.001, 1e6) * 1000));
    } else if (f == "--progress") {
      c.opts.progress = true;
      c.progress_set = true;
    } else if (f == "--backend") {
      std::string b = args.value();
      if (!samples::parse_backend(b, c.backend)) {
        std::fprintf(stderr, "uring-get: --backend: '%s' is not auto, native or emulated\n", b.c_str());
        usage(2);
      }
    } else if (f == "-h" || f == "--help") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-get: unknown flag %s\n", f.c_str());
      usage(2);
    }
  }
  if (texts.empty()) {
    std::fprintf(stderr, "uring-get: no URL\n");
    usage(2);
  }
  for (const std::string& text : texts) {
    std::string why;
    auto u = get::parse_url(text, why);
    if (!u) {
      std::fprintf(stderr, "uring-get: %s: %s\n", text.c_str(), why.c_str());
      std::exit(get::usage);
    }
    c.urls.push_back(std::move(*u));
  }
  if (!c.output.empty() && c.urls.size() > 1) {
    std::fprintf(stderr, "uring-get: --output takes one URL (%zu given)\n", c.urls.size());
    std::exit(get::usage);
  }
  if (!c.opts.cacert.empty() && ::access(c.opts.cacert.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "uring-get: --cacert %s: cannot be read\n", c.opts.cacert.c_str());
    std::exit(get::usage);
  }
  if (!c.progress_set) c.opts.progress = ::isatty(STDERR_FILENO) == 1;
  return c;
}

// Fetches every URL in turn; yields the exit status of the first that failed (0 if none did).
uring::task<int> fetch_all(get::fetcher& f, const std::vector<get::url>& urls) {
  int code = get::ok;
  for (const get::url& u : urls) {
    int this_one = get::ok;
    try {
      const int status = co_await f.fetch(u);
      if (status >= 300) this_one = get::http_status;
    } catch (const get::failure& e) {
      std::fprintf(stderr, "uring-get: %s: %s\n", u.text.c_str(), e.what());
      this_one = e.code;
    }
    if (code == get::ok) code = this_one;
  }
  co_return code;
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse_args(argc, argv);

  std::optional<uring::tls::tls_context> tls;
  for (const get::url& u : c.urls) {
    if (!u.https || tls) continue;
    uring::tls::client_options t;
    t.ca_file = c.opts.cacert;
    t.verify = !c.opts.insecure;
    t.alpn = {"http/1.1"};
    try {
      tls = uring::tls::tls_context::client(t);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "uring-get: %s\n", e.what());
      return get::tls_failed;
    }
  }

  int out = STDOUT_FILENO;
  if (!c.output.empty()) {
    out = ::open(c.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
      std::fprintf(stderr, "uring-get: --output %s: %s\n", c.output.c_str(), std::strerror(errno));
      return get::local_failed;
    }
  }

  int code = get::ok;
  try {
    uring::executor_options eo;
    eo.backend = c.backend;
    uring::executor ex(eo);
    get::fetcher f(c.opts, tls, out);  // destroyed (its connections closed) before the executor
    code = ex.run(fetch_all(f, c.urls));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-get: %s\n", e.what());
    code = get::local_failed;
  }
  if (out != STDOUT_FILENO && ::close(out) != 0 && code == get::ok) {
    std::fprintf(stderr, "uring-get: --output %s: %s\n", c.output.c_str(), std::strerror(errno));
    code = get::local_failed;
  }
  return code;
}
