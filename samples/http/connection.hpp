// samples/http/connection.hpp — uring-http's settings and the request loop of one connection.
//
// Provides: sample::http_config, sample::connection_slot, sample::serve_http (a plain connection's
// requests), sample::serve_copying (TLS) and sample::answer_and_close.
// Threads: a connection runs on its worker's thread; the config is shared read-only by every thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include <uring/task.hpp>

#include "../server.hpp"
#include "files.hpp"
#include "link.hpp"

namespace sample {

struct http_config {
  server_flags server{.port = 8080};
  std::string root = ".";
  int max_connections = 10'000;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds write_timeout{30'000};      // each write, and each piece of a file, within this
  std::chrono::milliseconds handshake_timeout{10'000};  // a TLS handshake, on the HTTPS port
  resolve_kind resolve = resolve_kind::automatic;
  const file_root* files = nullptr;  // --root, opened
  std::string metrics_path;          // --metrics-path; empty: none
};

// A connection's place under --max-connections (http_config::max_connections), counted over all threads:
// taken when made if one is left, given back when it goes.
class connection_slot {
 public:
  explicit connection_slot(int limit) noexcept;
  connection_slot(connection_slot&& o) noexcept
      : counted_(std::exchange(o.counted_, false)), taken_(std::exchange(o.taken_, false)) {}
  connection_slot& operator=(connection_slot&&) = delete;
  ~connection_slot();
  explicit operator bool() const noexcept { return taken_; }

 private:
  bool counted_ = true;
  bool taken_;
};

// Serves a plain connection's requests in order until it closes, fails, breaks a rule or times out;
// failures of the connection end it quietly. The stream and the --max-connections slot are held here for
// the connection's life. With the worker's pool, a connection with no request pending holds only them and
// a receive leased from the pool: the parser and the answers are made when bytes come and dropped once
// every request is answered. Without one it reads as serve_copying does.
uring::task<void> serve_http(uring::net::tcp_stream s, connection_slot slot, worker& w, const http_config& c);

// The same over `l`, each read copied into the parser, for the connection's life (TLS, or plain HTTP
// without a pool). `l`'s streams and the slot are held by the caller.
uring::task<void> serve_copying(link l, worker& w, const http_config& c);

// Sends `answer` and closes gently: a close with unread request bytes makes the kernel reset the
// connection, which can destroy the answer before the client reads it. So: send, end our side, and read
// what the peer still sends (up to 64 KiB, for at most a second). `pool`: read those by leased receives.
uring::task<void> answer_and_close(const link& l, std::string_view answer, uring::net::buffer_pool* pool);

}  // namespace sample
