// uring::tls on every backend: handshakes, echo, certificate checks and their error texts, ALPN, SNI,
// session resumption, truncation, a handshake time-out, many connections at once, and the kTLS probe.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <uring/tls/tls.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "tls_certs.hpp"
#include "tls_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::test::pattern;
using uring::test::test_pki;
using uring::tls::tls_context;
using uring::tls::tls_errc;
using uring::tls::tls_stream;
using namespace uring::test::tls_util;

class Tls : public uring::test::backend_test {};

TEST_P(Tls, HandshakeAndEchoRoundTrip) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    EXPECT_EQ(c.version(), "TLSv1.3");
    const std::string payload = pattern(100'000, 3);  // several records each way
    auto [echoed, back] = co_await uring::when_all(echo_until_closed(&s), round_trip(&c, payload));
    EXPECT_EQ(echoed, payload.size());
    EXPECT_EQ(back, payload);
  }());
}

// The client's error names the check that failed; the server hears the client's alert.
void expect_verify_failure(const side& s, const side& c, const std::string& text) {
  ASSERT_TRUE(c.error);
  EXPECT_EQ(c.code(), tls_errc::verify_failed) << c.what();
  EXPECT_EQ(c.code().category(), uring::tls::tls_category());
  EXPECT_EQ(c.what(), "handshake: certificate verify failed: " + text);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.code(), tls_errc::protocol) << s.what();
}

TEST_P(Tls, WrongHostNameFailsVerification) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  auto [s, c] = run(connect_pair(&server, &client, "other.example"));
  expect_verify_failure(s, c, "hostname mismatch");
}

TEST_P(Tls, ExpiredCertificateFailsVerification) {
  auto server = server_context(test_pki::get().expired);
  auto client = client_context();
  auto [s, c] = run(connect_pair(&server, &client));
  expect_verify_failure(s, c, "certificate has expired");
}

TEST_P(Tls, UnknownCaFailsVerification) {
  auto server = server_context(test_pki::get().stranger);
  auto client = client_context();
  auto [s, c] = run(connect_pair(&server, &client));
  expect_verify_failure(s, c, "unable to get local issuer certificate");
  EXPECT_NE(s.what().find("unknown ca"), std::string::npos) << s.what();
}

TEST_P(Tls, AlpnPicksTheServersPreference) {
  auto server = server_context(test_pki::get().server, {"h2", "http/1.1"});
  auto client = client_context({"http/1.1", "h2"});
  auto [s, c] = run(connect_pair(&server, &client));
  ASSERT_FALSE(s.error || c.error) << s.what() << " / " << c.what();
  EXPECT_EQ(s.stream->alpn(), "h2");
  EXPECT_EQ(c.stream->alpn(), "h2");

  auto plain = client_context();  // offers nothing: no ALPN
  auto [s2, c2] = run(connect_pair(&server, &plain));
  ASSERT_FALSE(s2.error || c2.error) << s2.what() << " / " << c2.what();
  EXPECT_EQ(c2.stream->alpn(), "");

  auto other = client_context({"imap"});  // offers only what the server does not speak: refused
  auto [s3, c3] = run(connect_pair(&server, &other));
  ASSERT_TRUE(s3.error && c3.error);
  EXPECT_EQ(s3.code(), tls_errc::protocol);
  EXPECT_NE(c3.what().find("no application protocol"), std::string::npos) << c3.what();
}

TEST_P(Tls, ServerSeesTheNameTheClientAskedFor) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  auto [s, c] = run(connect_pair(&server, &client, "uring.test"));
  ASSERT_FALSE(s.error || c.error) << s.what() << " / " << c.what();
  EXPECT_EQ(s.stream->server_name(), "uring.test");

  // An IP address is checked against the certificate's IP entries and is never sent as SNI.
  auto [s2, c2] = run(connect_pair(&server, &client, "127.0.0.1"));
  ASSERT_FALSE(s2.error || c2.error) << s2.what() << " / " << c2.what();
  EXPECT_EQ(s2.stream->server_name(), "");
}

TEST_P(Tls, SecondConnectionResumes) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  for (int round = 0; round < 2; ++round) {
    run([&]() -> task<void> {
      auto [s, c] = co_await established(&server, &client);
      EXPECT_EQ(c.resumed(), round == 1) << "round " << round;
      EXPECT_EQ(s.resumed(), round == 1) << "round " << round;
      // TLS 1.3 hands out its session tickets after the handshake: the client's reads take them in.
      co_await uring::when_all(echo_until_closed(&s), round_trip(&c, "ping"));
    }());
    EXPECT_GE(client.cached_sessions(), 1U);
  }
}

// TLS 1.2 has its own handshake and hands its session ticket out within it: both work the same.
TEST_P(Tls, Tls12EchoesAndResumes) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context({}, uring::tls::tls_version::v1_2);
  for (int round = 0; round < 2; ++round) {
    run([&]() -> task<void> {
      auto [s, c] = co_await established(&server, &client);
      EXPECT_EQ(c.version(), "TLSv1.2");
      EXPECT_EQ(c.resumed(), round == 1) << "round " << round;
      auto [echoed, back] =
          co_await uring::when_all(echo_until_closed(&s), round_trip(&c, pattern(40'000, 5)));
      EXPECT_EQ(back, pattern(40'000, 5));
    }());
  }
}

TEST_P(Tls, NoCommonVersionFails) {
  uring::tls::server_options o;
  o.cert_pem = test_pki::get().server.cert_pem;
  o.key_pem = test_pki::get().server.key_pem;
  o.min_version = uring::tls::tls_version::v1_3;
  auto server = tls_context::server(o);
  auto client = client_context({}, uring::tls::tls_version::v1_2);
  auto [s, c] = run(connect_pair(&server, &client));
  ASSERT_TRUE(s.error && c.error);
  EXPECT_EQ(s.code(), tls_errc::protocol);
  EXPECT_EQ(s.what(), "handshake: unsupported protocol");
  EXPECT_EQ(c.code(), tls_errc::protocol);
  EXPECT_NE(c.what().find("protocol version"), std::string::npos) << c.what();
}

// A server that sends `raw` bytes under TLS (not a record, or not a whole one) and closes the socket.
task<void> close_after_raw(tls_stream* s, std::string raw) {
  if (!raw.empty()) co_await s->next_layer().write_all(raw);
  co_await s->next_layer().close();
}

TEST_P(Tls, PeerClosingMidRecordIsTruncation) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    // An application-data record header announcing 64 bytes, and 10 of them.
    co_await close_after_raw(&s, std::string("\x17\x03\x03\x00\x40", 5) + std::string(10, 'x'));
    std::array<char, 64> buf;
    try {
      co_await step(c.read_some(buf));
      ADD_FAILURE() << "read_some succeeded";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), tls_errc::truncated) << e.what();
      EXPECT_STREQ(e.what(), "read_some: the peer closed the connection without close_notify");
    }
  }());
}

TEST_P(Tls, CloseWithoutCloseNotifyIsTruncationButCloseNotifyIsEnd) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    co_await step(s.write_all(std::string("whole")));
    co_await close_after_raw(&s, "");
    std::string got(5, '\0');
    co_await step(c.read_exactly(got));
    EXPECT_EQ(got, "whole");
    std::array<char, 16> buf;
    std::error_code code;
    try {
      co_await step(c.read_some(buf));
    } catch (const std::system_error& e) {
      code = e.code();
    }
    EXPECT_EQ(code, tls_errc::truncated);
  }());
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    co_await step(s.shutdown());
    std::array<char, 16> buf;
    EXPECT_EQ(co_await step(c.read_some(buf)), 0U);
    EXPECT_EQ(co_await step(c.read_some(buf)), 0U);  // and at every call after
  }());
}

TEST_P(Tls, ReadThatTimedOutCanBeRetried) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    std::array<char, 16> buf;
    std::error_code code;
    try {
      co_await uring::with_timeout(c.read_some(buf), 100ms);
    } catch (const std::system_error& e) {
      code = e.code();
    }
    EXPECT_EQ(code, std::errc::timed_out);
    co_await step(s.write_all(std::string("late")));
    std::string got(4, '\0');
    co_await step(c.read_exactly(got));
    EXPECT_EQ(got, "late");
  }());
}

TEST_P(Tls, SecondReadAtOnceIsRefused) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    std::array<char, 16> a, b;
    auto reader = [](tls_stream* t, std::array<char, 16>* buf) -> task<std::size_t> {
      co_return co_await step(t->read_some(*buf));
    };
    bool refused = false;
    try {
      co_await uring::when_all(reader(&c, &a), reader(&c, &b));
    } catch (const std::logic_error&) {
      refused = true;
    }
    EXPECT_TRUE(refused);
  }());
}

// One coroutine writes while another reads the echo back, on the same stream: neither waits for the other.
TEST_P(Tls, ReadAndWriteAtOnce) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  const std::string payload = pattern(static_cast<std::size_t>(uring::test::scaled(2'000'000)), 4);
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    auto writer = [](tls_stream* t, const std::string* data) -> task<void> {
      co_await step(t->write_all(*data));
      co_await step(t->shutdown());
    };
    auto reader = [](tls_stream* t) -> task<std::string> {
      std::string back;
      std::array<char, 16384> buf;
      for (std::size_t n; (n = co_await step(t->read_some(buf))) != 0;) back.append(buf.data(), n);
      co_return back;
    };
    auto [echoed, sent, back] =
        co_await uring::when_all(echo_until_closed(&s), writer(&c, &payload), reader(&c));
    EXPECT_EQ(echoed, payload.size());
    EXPECT_TRUE(back == payload) << back.size() << " bytes back of " << payload.size();
  }());
}

TEST_P(Tls, WriteAfterShutdownFails) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    co_await step(c.shutdown());
    std::error_code code;
    try {
      co_await step(c.write_all(std::string("late")));
    } catch (const std::system_error& e) {
      code = e.code();
    }
    EXPECT_TRUE(code) << "a write after close_notify went through";
  }());
}

TEST_P(Tls, HandshakeNeverFinishedTimesOut) {
  auto server = server_context(test_pki::get().server);
  run([&]() -> task<void> {
    auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
    tcp_stream silent = co_await step(tcp_stream::connect_to(listener.local_address()));
    co_await silent.write_all(std::string("\x16\x03\x01", 3));  // the start of a ClientHello, no more
    const auto start = std::chrono::steady_clock::now();
    side s = co_await accept_one(&listener, &server, 300ms);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(s.error);
    EXPECT_EQ(s.code(), std::errc::timed_out) << s.what();
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, kStep);
  }());
}

// A peer that sends something else than TLS is refused at once, whatever it sends.
TEST_P(Tls, GarbageInsteadOfClientHelloFails) {
  auto server = server_context(test_pki::get().server);
  const std::string inputs[] = {pattern(1000, 9), std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                                std::string("\x16\x03\x01\xff\xff", 5) + pattern(2000, 1)};
  for (const std::string& input : inputs) {
    run([&]() -> task<void> {
      auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
      tcp_stream peer = co_await step(tcp_stream::connect_to(listener.local_address()));
      co_await peer.write_all(input);
      side s = co_await accept_one(&listener, &server);
      EXPECT_EQ(s.code(), tls_errc::protocol) << s.what();
    }());
  }
}

// Many handshakes and echoes in flight at once on one executor.
// 1,000 connections at once, both ends in this process: 2,000 sockets, so the fd limit is raised to fit.
TEST_P(Tls, ManyConcurrentConnections) {
  const long count = uring::test::scaled(1000);
  rlimit fds{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &fds), 0);
  const rlim_t need = static_cast<rlim_t>(2 * count + 256);
  if (fds.rlim_cur < need) {
    if (fds.rlim_max < need) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below " << need;
    fds.rlim_cur = need;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &fds), 0);
  }
  auto server = server_context(test_pki::get().server);
  auto client = client_context();
  run([&]() -> task<void> {
    auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
    const address peer = listener.local_address();
    auto serve = [&]() -> task<std::size_t> {
      std::vector<tls_stream> streams;
      for (long i = 0; i < count; ++i)
        streams.push_back(tls_stream::server(server, co_await listener.accept()));
      std::vector<task<std::size_t>> echoes;
      for (tls_stream& s : streams) {
        echoes.push_back([](tls_stream* t) -> task<std::size_t> {
          co_await step(t->handshake());
          co_return co_await echo_until_closed(t);
        }(&s));
      }
      std::size_t total = 0;
      for (std::size_t n : co_await uring::when_all(std::move(echoes))) total += n;
      co_return total;
    };
    std::vector<task<bool>> clients;
    for (long i = 0; i < count; ++i) {
      clients.push_back([](const tls_context* ctx, address to, std::string payload) -> task<bool> {
        side c = co_await connect_one(to, ctx, "localhost");
        if (c.error) std::rethrow_exception(c.error);
        co_return co_await round_trip(&*c.stream, payload) == payload;
      }(&client, peer, pattern(1000, static_cast<unsigned>(i))));
    }
    auto all_clients = [&]() -> task<std::vector<bool>> {
      co_return co_await uring::when_all(std::move(clients));
    };
    auto [total, oks] = co_await uring::when_all(serve(), all_clients());
    EXPECT_EQ(total, static_cast<std::size_t>(count) * 1000);
    EXPECT_EQ(std::count(oks.begin(), oks.end(), true), count);
  }());
}

INSTANTIATE_BACKENDS(Tls);

TEST(TlsContext, RefusesWhatCannotServe) {
  uring::tls::server_options none;
  try {
    tls_context::server(none);
    ADD_FAILURE() << "a server context without a certificate";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), tls_errc::config);
  }
  uring::tls::server_options mismatched;
  mismatched.cert_pem = test_pki::get().server.cert_pem;
  mismatched.key_pem = test_pki::get().stranger.key_pem;
  try {
    tls_context::server(mismatched);
    ADD_FAILURE() << "a key that does not match its certificate";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), tls_errc::config);
    EXPECT_NE(std::string(e.what()).find("key values mismatch"), std::string::npos) << e.what();
  }
}

// kTLS needs the kernel's "tls" ULP; where it is missing, the probe says why and offload tests skip.
TEST(Ktls, ProbeSaysWhyNot) {
  const auto& status = uring::tls::ktls_available();
  if (status) {
    EXPECT_TRUE(status.reason.empty());
  } else {
    EXPECT_NE(status.reason.find(": "), std::string::npos) << status.reason;
  }
}

TEST(Ktls, UlpAttachesToAnEstablishedConnection) {
  const auto& status = uring::tls::ktls_available();
  if (!status) GTEST_SKIP() << status.reason;
  EXPECT_TRUE(status.reason.empty());
}

}  // namespace
