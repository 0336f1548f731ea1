// Mutual TLS on every backend: a server that asks for client certificates (required or optional), the
// client's certificate verified and named on both ends, the refusals with their texts, and the
// configuration errors.
#include <gtest/gtest.h>

#include <string>
#include <system_error>
#include <utility>

#include <uring/tls/tls.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "tls_certs.hpp"
#include "tls_util.hpp"

namespace {

using uring::task;
using uring::test::issued;
using uring::test::test_pki;
using uring::tls::client_certificates;
using uring::tls::tls_context;
using uring::tls::tls_errc;
using namespace uring::test::tls_util;

class MutualTls : public uring::test::backend_test {};

tls_context asking_server(client_certificates mode) {
  uring::tls::server_options o;
  o.cert_pem = test_pki::get().server.cert_pem;
  o.key_pem = test_pki::get().server.key_pem;
  o.client_auth = mode;
  o.client_ca_pem = test_pki::get().ca.cert_pem;
  return tls_context::server(o);
}

tls_context client_with(const issued* cert) {
  uring::tls::client_options o;
  o.ca_pem = test_pki::get().ca.cert_pem;
  if (cert != nullptr) {
    o.cert_pem = cert->cert_pem;
    o.key_pem = cert->key_pem;
  }
  return tls_context::client(o);
}

// A client's first read after a handshake the server refused: in TLS 1.3 the client's handshake ends
// before the server has checked its certificate, so the server's alert arrives on that read.
task<std::string> first_read_error(side* c) {
  if (c->error) co_return c->what();
  try {
    char b[1];
    co_await step(c->stream->read_some(b));
  } catch (const std::system_error& e) {
    co_return e.what();
  }
  co_return "no error";
}

TEST_P(MutualTls, RequiredClientCertificateIsVerifiedAndNamedOnBothEnds) {
  auto server = asking_server(client_certificates::required);
  auto client = client_with(&test_pki::get().client);
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    EXPECT_EQ(s.peer_subject(), "CN=uring client");
    EXPECT_EQ(c.peer_subject(), "CN=localhost");
    auto [echoed, back] = co_await uring::when_all(echo_until_closed(&s), round_trip(&c, "who"));
    EXPECT_EQ(back, "who");
  }());
}

TEST_P(MutualTls, RequiredButNoneSentIsRefused) {
  auto server = asking_server(client_certificates::required);
  auto client = client_with(nullptr);
  run([&]() -> task<void> {
    auto [s, c] = co_await connect_pair(&server, &client);
    EXPECT_TRUE(s.error);
    EXPECT_EQ(s.code(), tls_errc::protocol) << s.what();
    EXPECT_NE(s.what().find("peer did not return a certificate"), std::string::npos) << s.what();
    const std::string heard = co_await first_read_error(&c);
    EXPECT_NE(heard.find("certificate required"), std::string::npos) << heard;
  }());
}

TEST_P(MutualTls, ClientCertificateFromAnUnknownCaIsRefused) {
  auto server = asking_server(client_certificates::required);
  auto client = client_with(&test_pki::get().stranger_client);
  run([&]() -> task<void> {
    auto [s, c] = co_await connect_pair(&server, &client);
    EXPECT_TRUE(s.error);
    EXPECT_EQ(s.code(), tls_errc::verify_failed) << s.what();
    EXPECT_NE(s.what().find("certificate verify failed"), std::string::npos) << s.what();
    const std::string heard = co_await first_read_error(&c);
    EXPECT_NE(heard.find("unknown ca"), std::string::npos) << heard;
  }());
}

TEST_P(MutualTls, OptionalAcceptsAClientWithoutOneAndNamesOneThatHasOne) {
  auto server = asking_server(client_certificates::optional);
  auto anonymous = client_with(nullptr);
  auto named = client_with(&test_pki::get().client);
  run([&]() -> task<void> {
    {
      auto [s, c] = co_await established(&server, &anonymous);
      EXPECT_EQ(s.peer_subject(), "");
      auto [echoed, back] = co_await uring::when_all(echo_until_closed(&s), round_trip(&c, "anyone"));
      EXPECT_EQ(back, "anyone");
    }
    auto [s, c] = co_await established(&server, &named);
    EXPECT_EQ(s.peer_subject(), "CN=uring client");
    auto [echoed, back] = co_await uring::when_all(echo_until_closed(&s), round_trip(&c, "me"));
    EXPECT_EQ(back, "me");
  }());
}

TEST_P(MutualTls, AServerThatDoesNotAskSeesNoClientCertificate) {
  auto server = server_context(test_pki::get().server);
  auto client = client_with(&test_pki::get().client);
  run([&]() -> task<void> {
    auto [s, c] = co_await established(&server, &client);
    EXPECT_EQ(s.peer_subject(), "");
    auto [echoed, back] = co_await uring::when_all(echo_until_closed(&s), round_trip(&c, "x"));
    EXPECT_EQ(back, "x");
  }());
}

TEST(MutualTlsConfig, AskingWithoutCasAndACertificateWithoutItsKeyAreRefused) {
  uring::tls::server_options o;
  o.cert_pem = test_pki::get().server.cert_pem;
  o.key_pem = test_pki::get().server.key_pem;
  o.client_auth = client_certificates::required;
  try {
    (void)tls_context::server(o);
    ADD_FAILURE() << "no CAs accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), tls_errc::config);
    EXPECT_STREQ(e.what(),
                 "tls_context: asking for client certificates needs client_ca_file or client_ca_pem");
  }
  uring::tls::client_options c;
  c.cert_pem = test_pki::get().client.cert_pem;
  try {
    (void)tls_context::client(c);
    ADD_FAILURE() << "a certificate without its key accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), tls_errc::config);
  }
  c.key_pem = test_pki::get().stranger_client.key_pem;  // not this certificate's
  try {
    (void)tls_context::client(c);
    ADD_FAILURE() << "a key of another certificate accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), tls_errc::config);
    EXPECT_STREQ(e.what(), "tls_context: key_pem: key values mismatch");
  }
}

INSTANTIATE_BACKENDS(MutualTls);

}  // namespace
