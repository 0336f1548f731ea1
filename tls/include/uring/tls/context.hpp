/// @file
/// uring/tls/context.hpp — the settings TLS connections share: certificates, trust, ALPN, versions, sessions.
///
/// Provides: uring::tls::tls_context, uring::tls::client_options, uring::tls::server_options,
/// uring::tls::client_certificates, uring::tls::tls_version.
/// Threads: a context is a shared handle (copies name the same settings); streams may be made from it on
/// any thread at once. Its client session cache is locked.
///
/// Built on OpenSSL 3 (an SSL_CTX). Construction throws std::system_error(tls_errc::config) with OpenSSL's
/// reason ("tls_context: certificate: no start line"). PEM text may be given in memory or as files.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace uring::tls {

/// A TLS protocol version, for a context's minimum and maximum.
enum class tls_version {
  v1_2,  ///< TLS 1.2
  v1_3   ///< TLS 1.3
};

/// A client context's settings: trust, verification, ALPN, versions, the session cache and a client
/// certificate. Threads: a plain value.
struct client_options {
  ///@{
  /// Trust: PEM CA certificates in a file and/or in memory; with neither, the system's default paths.
  std::string ca_file;
  std::string ca_pem;
  ///@}
  /// Verify the server's certificate chain and that it names the host given to tls_stream::client.
  bool verify = true;
  /// Protocols offered by ALPN, in order of preference ("h2", "http/1.1"); empty: no ALPN.
  std::vector<std::string> alpn;
  ///@{
  /// The versions the context negotiates, from min_version to max_version.
  tls_version min_version = tls_version::v1_2;
  tls_version max_version = tls_version::v1_3;
  ///@}
  /// Sessions kept for resumption, one per host name (the oldest goes first); 0: none kept.
  std::size_t session_cache_size = 256;
  ///@{
  /// A certificate chain (leaf first) and its key, PEM, each from a file or from memory, sent to a server
  /// that asks for one (mutual TLS); empty: none is sent.
  std::string cert_file;
  std::string key_file;
  std::string cert_pem;
  std::string key_pem;
  ///@}
};

/// Whether a server asks its clients for certificates (mutual TLS): not at all; asks and verifies one that
/// is sent; or refuses a client that sends none (the handshake fails).
enum class client_certificates { none, optional, required };

/// A server context's settings: its certificate and key, ALPN, versions and client certificates.
/// Threads: a plain value.
struct server_options {
  ///@{
  /// The certificate chain (leaf first) and its private key, PEM, each from a file or from memory.
  std::string cert_file;
  std::string key_file;
  std::string cert_pem;
  std::string key_pem;
  ///@}
  /// Protocols accepted by ALPN, in the server's order of preference. A client offering ALPN but none of
  /// them is refused (no_application_protocol alert); a client offering none gets no ALPN.
  std::vector<std::string> alpn;
  ///@{
  /// The versions the context negotiates, from min_version to max_version.
  tls_version min_version = tls_version::v1_2;
  tls_version max_version = tls_version::v1_3;
  ///@}
  /// Client certificates: asked for unless `none`, then verified against these CAs (a file and/or PEM in
  /// memory, which the request names; one of them is needed). tls_stream::peer_subject() names the client.
  client_certificates client_auth = client_certificates::none;
  ///@{
  /// The CAs client certificates are verified against: a file and/or PEM in memory.
  std::string client_ca_file;
  std::string client_ca_pem;
  ///@}
};

/// The settings TLS connections share (an OpenSSL 3 SSL_CTX): certificates, trust, ALPN, versions,
/// sessions. Construction throws std::system_error(tls_errc::config) with OpenSSL's reason
/// ("tls_context: certificate: no start line").
///
/// Threads: a shared handle (copies name the same settings); streams may be made from it on any thread at
/// once. Its client session cache is locked.
class tls_context {
 public:
  /// A context for client streams (tls_stream::client).
  static tls_context client(const client_options& opts = {});
  /// A context for server streams (tls_stream::server).
  static tls_context server(const server_options& opts);

  /// True for a server context.
  [[nodiscard]] bool is_server() const noexcept;
  /// Client contexts: the sessions cached for resumption now.
  [[nodiscard]] std::size_t cached_sessions() const;

  /// For uring::tls itself: OpenSSL's SSL_CTX, the ALPN list, the session cache (tls/src/context_state.hpp).
  struct state;
  /// For uring::tls itself: the shared state.
  [[nodiscard]] const std::shared_ptr<state>& get() const noexcept { return state_; }

 private:
  explicit tls_context(std::shared_ptr<state> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<state> state_;
};

}  // namespace uring::tls
