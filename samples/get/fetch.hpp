// samples/get/fetch.hpp — what uring-get does for one URL: a connection (reused or new, plain or TLS), the
// request, and the response streamed to the output.
//
// Provides: get::exit_code, get::options, get::failure, get::fetcher.
// Threads: a fetcher belongs to the executor whose coroutines await it, one fetch at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <uring/task.hpp>
#include <uring/tls/context.hpp>

#include "url.hpp"

namespace get {

// uring-get's exit statuses; for a run of several URLs, the first failing URL's.
enum exit_code : int {
  ok = 0,              // every URL answered 2xx
  http_status = 1,     // some URL answered a status >= 300 (its body was still written)
  usage = 2,           // bad flags or URLs
  connect_failed = 3,  // name resolution, connection, or the connection failing under the exchange
  tls_failed = 4,      // TLS handshake or certificate verification
  timed_out = 5,       // --timeout or --connect-timeout
  malformed = 6,       // the response broke HTTP/1.1 (or the server closed it early)
  local_failed = 7,    // the output could not be written, or the executor could not start
};

struct options {
  std::vector<resolve_entry> resolve;                 // --resolve
  std::string cacert;                                 // --cacert; empty: the system's trust store
  bool insecure = false;                              // --insecure: no certificate verification
  bool head = false;                                  // --head: HEAD requests, the head printed
  bool verbose = false;                               // --verbose: connections and status lines on stderr
  bool progress = false;                              // --progress, or stderr is a terminal
  std::chrono::milliseconds timeout{30'000};          // each URL's whole fetch
  std::chrono::milliseconds connect_timeout{10'000};  // connect + TLS handshake
};

// One URL failed: the exit status it stands for and the message (without the URL).
struct failure : std::runtime_error {
  failure(exit_code c, const std::string& what) : std::runtime_error(what), code(c) {}
  exit_code code;
};

class fetcher {
 public:
  // Writes bodies (or heads, with --head) to `out_fd`. `tls` is the client context for https URLs.
  fetcher(const options& o, std::optional<uring::tls::tls_context> tls, int out_fd);
  ~fetcher();
  fetcher(const fetcher&) = delete;
  fetcher& operator=(const fetcher&) = delete;

  // Fetches `u` under --timeout; yields the response's status. Throws failure.
  uring::task<int> fetch(const url& u);

  struct connection;  // fetch.cpp

 private:
  uring::task<int> fetch_untimed(const url& u);
  uring::task<std::unique_ptr<connection>> open(const url& u);
  uring::task<int> exchange(connection& c, const url& u, bool& received);
  uring::task<void> write_out(std::string_view bytes);
  [[nodiscard]] failure timeout_failure() const;

  const options& opts_;
  std::optional<uring::tls::tls_context> tls_;
  int out_fd_;
  // Idle connections by url::key(), at most max_idle; the least recently used goes first.
  std::map<std::string, std::unique_ptr<connection>> idle_;
  std::uint64_t uses_ = 0;
  std::chrono::steady_clock::time_point started_;  // of the current fetch
  struct progress_state;
  std::unique_ptr<progress_state> progress_;
};

}  // namespace get
