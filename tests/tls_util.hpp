// tls_util.hpp — helpers of the uring::tls tests: contexts from the test PKI, both ends of a connection
// with their handshakes (or what stopped them), an echo and a round trip.
#pragma once

#include <array>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <uring/net/tcp_listener.hpp>
#include <uring/tls/tls.hpp>
#include <uring/when_all.hpp>

#include "tls_certs.hpp"

namespace uring::test::tls_util {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::tls::tls_context;
using uring::tls::tls_stream;

// Generous: a loaded 2-core machine under ASan still finishes a handshake well within it.
constexpr auto kStep = 20s;
// A step of a test's TLS exchange, bounded so that a broken peer fails the test instead of hanging it.
template <class T>
task<T> step(task<T> t) {
  return uring::with_timeout(std::move(t), kStep);
}

// One end of a connection after its handshake: the stream, or what stopped it.
struct side {
  std::optional<tls_stream> stream;
  std::exception_ptr error;

  [[nodiscard]] std::string what() const {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  }
  [[nodiscard]] std::error_code code() const {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::system_error& e) {
      return e.code();
    } catch (...) {
    }
    return {};
  }
};

inline tls_context server_context(const uring::test::issued& cert, std::vector<std::string> alpn = {}) {
  uring::tls::server_options o;
  o.cert_pem = cert.cert_pem;
  o.key_pem = cert.key_pem;
  o.alpn = std::move(alpn);
  return tls_context::server(o);
}

inline tls_context client_context(std::vector<std::string> alpn = {},
                                  uring::tls::tls_version max = uring::tls::tls_version::v1_3) {
  uring::tls::client_options o;
  o.max_version = max;
  o.ca_pem = test_pki::get().ca.cert_pem;
  o.alpn = std::move(alpn);
  return tls_context::client(o);
}

inline task<side> accept_one(const tcp_listener* l, const tls_context* ctx,
                             std::chrono::nanoseconds timeout = kStep) {
  side out;
  try {
    tls_stream s = tls_stream::server(*ctx, co_await l->accept());
    co_await uring::with_timeout(s.handshake(), timeout);
    out.stream.emplace(std::move(s));
  } catch (...) {
    out.error = std::current_exception();
  }
  co_return out;
}

inline task<side> connect_one(address peer, const tls_context* ctx, std::string host) {
  side out;
  try {
    tls_stream s = tls_stream::client(*ctx, co_await step(tcp_stream::connect_to(peer)), std::move(host));
    co_await step(s.handshake());
    out.stream.emplace(std::move(s));
  } catch (...) {
    out.error = std::current_exception();
  }
  co_return out;
}

// Both ends of one connection: {server, client}.
inline task<std::pair<side, side>> connect_pair(const tls_context* server, const tls_context* client,
                                                std::string host = "localhost") {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  auto [s, c] = co_await uring::when_all(accept_one(&listener, server),
                                         connect_one(listener.local_address(), client, std::move(host)));
  co_return std::pair{std::move(s), std::move(c)};
}

// Both ends of a connection whose handshake must succeed: {server, client}, or the first end's error.
inline task<std::pair<tls_stream, tls_stream>> established(const tls_context* server,
                                                           const tls_context* client) {
  auto [s, c] = co_await connect_pair(server, client);
  if (c.error) std::rethrow_exception(c.error);
  if (s.error) std::rethrow_exception(s.error);
  co_return std::pair{std::move(*s.stream), std::move(*c.stream)};
}

// Echoes what it reads until close_notify, then sends its own.
inline task<std::size_t> echo_until_closed(tls_stream* s) {
  std::array<char, 4096> buf;
  std::size_t total = 0;
  for (;;) {
    std::size_t n = co_await step(s->read_some(buf));
    if (n == 0) break;
    co_await step(s->write_all(std::string_view(buf.data(), n)));
    total += n;
  }
  co_await step(s->shutdown());
  co_return total;
}

// Sends `payload`, reads it back, sends close_notify and expects the peer's.
inline task<std::string> round_trip(tls_stream* s, std::string payload) {
  co_await step(s->write_all(payload));
  std::string back(payload.size(), '\0');
  co_await step(s->read_exactly(back));
  co_await step(s->shutdown());
  std::array<char, 16> tail;
  if (co_await step(s->read_some(tail)) != 0) throw std::runtime_error("data after the echo");
  co_return back;
}

}  // namespace uring::test::tls_util
