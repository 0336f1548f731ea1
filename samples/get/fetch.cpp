// samples/get/fetch.cpp — one URL fetched (fetch.hpp): connections kept by scheme, host and port, the
// request, the response through uring::http::response_parser, the body streamed to the output, the
// progress line, and every failure sorted into an exit status.
#include "fetch.hpp"

#include <cerrno>
#include <cstdio>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>

#include <uring/http/response.hpp>
#include <uring/io.hpp>
#include <uring/net/resolve.hpp>
#include <uring/net/tcp_stream.hpp>
#include <uring/task_adapters.hpp>
#include <uring/ticker.hpp>
#include <uring/tls/error.hpp>
#include <uring/tls/stream.hpp>
#include <uring/when_any.hpp>

namespace get {

namespace {

constexpr std::size_t read_size = 64 * 1024;      // room given to each receive
constexpr std::size_t max_idle = 16;              // idle connections kept for later URLs
constexpr std::uint64_t progress_from = 1 << 20;  // bodies above this get a progress line

double seconds_of(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

bool is_stop(const std::system_error& e) {
  return e.code() == std::errc::timed_out || e.code() == std::errc::operation_canceled;
}

// A socket or TLS error during the exchange as a failure; a time-out or a stop is passed on unchanged,
// for fetch() to report against the deadline that caused it.
[[noreturn]] void rethrow_classified(const std::system_error& e) {
  if (is_stop(e)) throw;
  if (e.code().category() == uring::tls::tls_category())
    throw failure(tls_failed, std::string("tls ") + e.what());
  throw failure(connect_failed, e.what());
}

std::string status_line(const uring::http::response& r) {
  return std::string(r.version == uring::http::version::http_1_0 ? "HTTP/1.0 " : "HTTP/1.1 ") +
         std::to_string(r.status) + (r.reason.empty() ? "" : " ") + std::string(r.reason);
}

}  // namespace

struct fetcher::connection {
  std::string key;
  uring::net::tcp_stream tcp;                 // http; https moves it into tls
  std::optional<uring::tls::tls_stream> tls;  // https
  uring::http::response_parser parser;
  bool reusable = false;
  std::uint64_t last_use = 0;

  uring::task<std::size_t> read_some(std::span<char> room) {
    if (!tls) co_return co_await tcp.read_some(room);
    try {
      co_return co_await tls->read_some(room);
    } catch (const std::system_error& e) {
      // A close without close_notify, as many servers end: read as the end of the stream, and the parser
      // decides whether the response was complete (a length or chunked body cut short is an error).
      if (e.code() != uring::tls::tls_errc::truncated) throw;
    }
    co_return 0;
  }

  uring::task<void> write_all(std::string_view bytes) {
    if (tls) {
      co_await tls->write_all(bytes);
    } else {
      co_await tcp.write_all(bytes);
    }
  }
};

struct fetcher::progress_state {
  std::string label;
  std::uint64_t received = 0;
  std::optional<std::uint64_t> total;
  std::chrono::steady_clock::time_point body_start{};
  bool in_body = false;
  bool shown = false;

  [[nodiscard]] bool wanted() const { return received > progress_from || total.value_or(0) > progress_from; }

  // "\ruring-get: URL: RECEIVED of TOTAL bytes (P%), R MiB/s", ended with a newline when `last`.
  void print(bool last) {
    if (!in_body || !wanted()) return;
    const double elapsed =
        std::max(1e-3, std::chrono::duration<double>(std::chrono::steady_clock::now() - body_start).count());
    const double rate = static_cast<double>(received) / elapsed / (1024.0 * 1024.0);
    std::string of;
    if (total && *total > 0) {
      of = " of " + std::to_string(*total) + " bytes (" + std::to_string(received * 100 / *total) + "%)";
    } else {
      of = " bytes";
    }
    std::fprintf(stderr, "\ruring-get: %s: %llu%s, %.1f MiB/s%s", label.c_str(),
                 static_cast<unsigned long long>(received), of.c_str(), rate, last ? "\n" : "   ");
    shown = !last;
  }
};

fetcher::fetcher(const options& o, std::optional<uring::tls::tls_context> tls, int out_fd)
    : opts_(o), tls_(std::move(tls)), out_fd_(out_fd), progress_(std::make_unique<progress_state>()) {}

fetcher::~fetcher() = default;

failure fetcher::timeout_failure() const {
  const auto elapsed = std::chrono::steady_clock::now() - started_;
  if (elapsed >= opts_.timeout || opts_.connect_timeout >= opts_.timeout) {
    char text[64];
    std::snprintf(text, sizeof text, "timed out after %g s (--timeout)", seconds_of(opts_.timeout));
    return failure(timed_out, text);
  }
  char text[80];
  std::snprintf(text, sizeof text, "connect timed out after %g s (--connect-timeout)",
                seconds_of(opts_.connect_timeout));
  return failure(timed_out, text);
}

namespace {

// Refreshes the progress line every 200 ms until it is stopped (the fetch is over).
uring::task<void> report(auto& progress) {
  uring::ticker every(std::chrono::milliseconds(200));
  for (;;) {
    co_await every.next();
    progress.print(false);
  }
}

}  // namespace

uring::task<int> fetcher::fetch(const url& u) {
  started_ = std::chrono::steady_clock::now();
  *progress_ = {};
  progress_->label = u.text;
  int status = 0;
  bool stopped = false;
  try {
    status = co_await uring::with_timeout(fetch_untimed(u), opts_.timeout);
  } catch (const failure&) {
    if (progress_->shown) std::fputc('\n', stderr);  // the error message gets a line of its own
    throw;
  } catch (const std::system_error& e) {
    if (progress_->shown) std::fputc('\n', stderr);
    if (!is_stop(e)) throw failure(local_failed, e.what());
    stopped = true;
  }
  if (stopped) throw timeout_failure();
  co_return status;
}

uring::task<int> fetcher::fetch_untimed(const url& u) {
  // The connection to use: an idle one to the same place, else a new one; a reused one that the server
  // closed meanwhile (its idle time-out) is replaced once, if nothing of the response came.
  std::unique_ptr<connection> c;
  if (auto it = idle_.find(u.key()); it != idle_.end()) {
    c = std::move(it->second);
    idle_.erase(it);
    if (opts_.verbose) std::fprintf(stderr, "* reusing connection to %s\n", u.host_port().c_str());
  }
  bool reused = c != nullptr;
  for (;;) {
    if (!c) c = co_await open(u);
    bool received = false;
    std::optional<int> status;
    try {
      if (opts_.progress) {
        auto v = co_await uring::when_any(exchange(*c, u, received), report(*progress_));
        status = std::get<0>(v);
      } else {
        status = co_await exchange(*c, u, received);
      }
    } catch (const failure&) {
      if (!reused || received) throw;
    }
    if (status) {
      if (opts_.progress) progress_->print(true);
      if (c->reusable) {
        c->last_use = ++uses_;
        const std::string key = c->key;
        idle_[key] = std::move(c);
        if (idle_.size() > max_idle) {
          auto oldest = idle_.begin();
          for (auto it = idle_.begin(); it != idle_.end(); ++it)
            if (it->second->last_use < oldest->second->last_use) oldest = it;
          idle_.erase(oldest);
        }
      }
      co_return *status;
    }
    if (opts_.verbose)
      std::fprintf(stderr, "* connection to %s was closed by the server; reconnecting\n",
                   u.host_port().c_str());
    c.reset();
    reused = false;
  }
}

uring::task<std::unique_ptr<fetcher::connection>> fetcher::open(const url& u) {
  auto c = std::make_unique<connection>();
  c->key = u.key();
  // Connect and handshake under --connect-timeout (and whatever is left of --timeout).
  auto connect = [](const options& o, const std::optional<uring::tls::tls_context>& tls, const url& u,
                    connection& c) -> uring::task<void> {
    try {
      const resolve_entry* pinned = nullptr;
      for (const resolve_entry& e : o.resolve)
        if (e.host == u.host && e.port == u.port) pinned = &e;
      if (pinned != nullptr) {
        c.tcp = co_await uring::net::tcp_stream::connect_to(uring::net::address::ip(pinned->address, u.port));
      } else {
        c.tcp = co_await uring::net::connect(u.host, std::to_string(u.port));
      }
    } catch (const std::system_error& e) {
      if (is_stop(e)) throw;
      throw failure(connect_failed, e.what());
    }
    if (o.verbose) {
      std::fprintf(stderr, "* connected to %s (%s)\n", u.host_port().c_str(),
                   c.tcp.peer_address().to_string().c_str());
    }
    if (!u.https) co_return;
    c.tls.emplace(uring::tls::tls_stream::client(*tls, std::move(c.tcp), u.host));
    try {
      co_await c.tls->handshake();
    } catch (const std::system_error& e) {
      if (is_stop(e)) throw;
      throw failure(tls_failed, std::string("tls ") + e.what());
    }
    if (o.verbose) {
      std::fprintf(stderr, "* %s, ALPN %s\n", std::string(c.tls->version()).c_str(),
                   c.tls->alpn().empty() ? "none" : std::string(c.tls->alpn()).c_str());
    }
  };
  co_await uring::with_timeout(connect(opts_, tls_, u, *c), opts_.connect_timeout);
  co_return c;
}

uring::task<int> fetcher::exchange(connection& c, const url& u, bool& received) {
  const std::string request = std::string(opts_.head ? "HEAD " : "GET ") + u.target +
                              " HTTP/1.1\r\nHost: " + u.authority() +
                              "\r\nUser-Agent: uring-get\r\nAccept: */*\r\n\r\n";
  if (opts_.verbose)
    std::fprintf(stderr, "> %s %s HTTP/1.1\n", opts_.head ? "HEAD" : "GET", u.target.c_str());
  c.reusable = false;
  try {
    co_await c.write_all(request);
  } catch (const std::system_error& e) {
    rethrow_classified(e);
  }
  c.parser.start(opts_.head);
  int status = 0;
  for (;;) {
    switch (c.parser.next()) {
      case uring::http::response_status::need_more: {
        std::span<char> room = c.parser.prepare(read_size);
        std::size_t n = 0;
        try {
          n = co_await c.read_some(room);
        } catch (const std::system_error& e) {
          c.parser.commit(0);
          rethrow_classified(e);
        }
        c.parser.commit(n);
        if (n == 0) {
          c.parser.finish();
        } else {
          received = true;
        }
        break;
      }
      case uring::http::response_status::head: {
        const uring::http::response& r = c.parser.get();
        status = r.status;
        if (opts_.verbose) std::fprintf(stderr, "< %s\n", status_line(r).c_str());
        if (opts_.head) {
          std::string head = status_line(r) + "\r\n";
          for (const auto& h : r.headers) head.append(h.name).append(": ").append(h.value).append("\r\n");
          head += "\r\n";
          co_await write_out(head);
        }
        if (r.framing == uring::http::body_kind::length) progress_->total = r.content_length;
        progress_->in_body = r.framing != uring::http::body_kind::none;
        progress_->body_start = std::chrono::steady_clock::now();
        break;
      }
      case uring::http::response_status::body: {
        std::string_view piece = c.parser.body();
        progress_->received += piece.size();
        co_await write_out(piece);
        break;
      }
      case uring::http::response_status::done:
        // Bytes after the response were not asked for: such a connection is not trusted with another.
        c.reusable = c.parser.get().keep_alive && c.parser.buffered() == 0;
        co_return status;
      case uring::http::response_status::error:
        throw failure(malformed, std::string(c.parser.error().reason));
    }
  }
}

uring::task<void> fetcher::write_out(std::string_view bytes) {
  while (!bytes.empty()) {
    std::size_t n = 0;
    try {
      n = co_await uring::write(out_fd_, bytes);
    } catch (const std::system_error& e) {
      if (is_stop(e)) throw;
      throw failure(local_failed, std::string("writing the output: ") + e.what());
    }
    if (n == 0) throw failure(local_failed, "writing the output: nothing written");
    bytes.remove_prefix(n);
  }
}

}  // namespace get
