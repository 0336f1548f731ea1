// context_state.hpp — what a tls_context holds (private to uring::tls): the SSL_CTX, the server's ALPN
// list, and the client's session cache.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "uring/tls/context.hpp"

namespace uring::tls {

struct tls_context::state {
  SSL_CTX* ctx = nullptr;
  bool server = false;
  std::string alpn_wire;  // the server's accepted protocols, in ALPN's wire format (length-prefixed)

  ~state();

  // Client session cache, by host name; the front is the newest. Bounded by `cache_limit`.
  void keep_session(const std::string& host, SSL_SESSION* s);  // takes the reference
  // A new reference to the session kept for `host`, or nullptr.
  SSL_SESSION* session_for(const std::string& host);
  std::size_t cached() const;

  std::size_t cache_limit = 0;

 private:
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, SSL_SESSION*>> sessions_;
};

}  // namespace uring::tls
