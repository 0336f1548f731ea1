// context.cpp — tls_context: an SSL_CTX set up from client_options or server_options, the server's ALPN
// choice and the client's session cache.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "context_state.hpp"
#include "openssl_error.hpp"

namespace uring::tls {

namespace {

using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using x509_ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

void check(int ok, const char* what) {
  if (ok != 1) detail::throw_tls(tls_errc::config, std::string("tls_context: ") + what);
}

bio_ptr memory_bio(const std::string& pem) {
  bio_ptr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (!b) detail::throw_tls(tls_errc::config, "tls_context: BIO_new_mem_buf");
  return b;
}

int version_number(tls_version v) { return v == tls_version::v1_3 ? TLS1_3_VERSION : TLS1_2_VERSION; }

std::shared_ptr<tls_context::state> make_state(bool server, tls_version min, tls_version max) {
  auto s = std::make_shared<tls_context::state>();
  s->server = server;
  s->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (s->ctx == nullptr) detail::throw_tls(tls_errc::config, "tls_context: SSL_CTX_new");
  SSL_CTX_set_app_data(s->ctx, s.get());
  check(SSL_CTX_set_min_proto_version(s->ctx, version_number(min)), "min_version");
  check(SSL_CTX_set_max_proto_version(s->ctx, version_number(max)), "max_version");
  // Writes may end short and be retried from a moved buffer; idle streams give their record buffers back.
  SSL_CTX_set_mode(
      s->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  return s;
}

// Client: each session the server hands out (TLS 1.3: after the handshake, with the first read) is kept
// for the stream's host. OpenSSL's own client cache is unused: it does not look sessions up by host.
int new_session(SSL* ssl, SSL_SESSION* session) {
  auto* st = static_cast<tls_context::state*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  const auto* host = static_cast<const std::string*>(SSL_get_app_data(ssl));
  if (st == nullptr || host == nullptr || st->cache_limit == 0 || !SSL_SESSION_is_resumable(session))
    return 0;
  st->keep_session(*host, session);
  return 1;  // the reference is ours
}

// Server: the first of our protocols (in our order) the client offers. A client that offers ALPN but
// none of ours is refused.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned inlen, void* arg) {
  const auto* st = static_cast<const tls_context::state*>(arg);
  const auto* ours = reinterpret_cast<const unsigned char*>(st->alpn_wire.data());
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, ours, static_cast<unsigned>(st->alpn_wire.size()), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::string alpn_wire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255)
      detail::throw_tls_text(tls_errc::config, "tls_context: ALPN name of 1 to 255 bytes");
    wire += static_cast<char>(p.size());
    wire += p;
  }
  return wire;
}

// Trusts the CA certificates in `pem`; `what` names the option in errors. A server asking clients for
// certificates (`for_clients`) also names these CAs in its request, so that a client picks one they signed.
void load_ca_pem(SSL_CTX* ctx, const std::string& pem, const char* what, bool for_clients = false) {
  bio_ptr b = memory_bio(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  while (x509_ptr cert{PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), &X509_free}) {
    check(X509_STORE_add_cert(store, cert.get()), what);
    if (for_clients) check(SSL_CTX_add_client_CA(ctx, cert.get()), what);
    ++added;
  }
  ERR_clear_error();  // the end of the text reads as "no start line"
  if (added == 0)
    detail::throw_tls_text(tls_errc::config, std::string("tls_context: ") + what + ": no certificate");
}

void load_chain_pem(SSL_CTX* ctx, const std::string& pem) {
  bio_ptr b = memory_bio(pem);
  x509_ptr leaf(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!leaf) detail::throw_tls(tls_errc::config, "tls_context: cert_pem");
  check(SSL_CTX_use_certificate(ctx, leaf.get()), "cert_pem");
  while (x509_ptr extra{PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), &X509_free}) {
    check(static_cast<int>(SSL_CTX_add1_chain_cert(ctx, extra.get())), "cert_pem chain");
  }
  ERR_clear_error();
}

void load_key_pem(SSL_CTX* ctx, const std::string& pem) {
  bio_ptr b = memory_bio(pem);
  pkey_ptr key(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) detail::throw_tls(tls_errc::config, "tls_context: key_pem");
  check(SSL_CTX_use_PrivateKey(ctx, key.get()), "key_pem");
}

// A certificate chain and its key, each from a file or PEM text (files first), checked to match.
void load_identity(SSL_CTX* ctx, const std::string& cert_file, const std::string& cert_pem,
                   const std::string& key_file, const std::string& key_pem) {
  if (!cert_file.empty()) {
    check(SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()), "cert_file");
  } else {
    load_chain_pem(ctx, cert_pem);
  }
  if (!key_file.empty()) {
    check(SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM), "key_file");
  } else {
    load_key_pem(ctx, key_pem);
  }
  check(SSL_CTX_check_private_key(ctx), "the key does not match the certificate");
}

}  // namespace

tls_context::state::~state() {
  for (auto& [host, session] : sessions_) SSL_SESSION_free(session);
  SSL_CTX_free(ctx);
}

void tls_context::state::keep_session(const std::string& host, SSL_SESSION* s) {
  std::lock_guard lock(mutex_);
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->first == host) {
      SSL_SESSION_free(it->second);
      sessions_.erase(it);
      break;
    }
  }
  sessions_.emplace_front(host, s);
  while (sessions_.size() > cache_limit) {
    SSL_SESSION_free(sessions_.back().second);
    sessions_.pop_back();
  }
}

SSL_SESSION* tls_context::state::session_for(const std::string& host) {
  std::lock_guard lock(mutex_);
  for (auto& [name, session] : sessions_) {
    if (name == host) {
      SSL_SESSION_up_ref(session);
      return session;
    }
  }
  return nullptr;
}

std::size_t tls_context::state::cached() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

tls_context tls_context::client(const client_options& opts) {
  ERR_clear_error();
  auto s = make_state(false, opts.min_version, opts.max_version);
  if (opts.cert_file.empty() != opts.key_file.empty() || opts.cert_pem.empty() != opts.key_pem.empty()) {
    detail::throw_tls_text(tls_errc::config,
                           "tls_context: a client certificate needs its key, and a key its certificate");
  }
  if (!opts.cert_file.empty() || !opts.cert_pem.empty())
    load_identity(s->ctx, opts.cert_file, opts.cert_pem, opts.key_file, opts.key_pem);
  if (opts.verify) {
    SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER, nullptr);
    if (!opts.ca_file.empty())
      check(SSL_CTX_load_verify_locations(s->ctx, opts.ca_file.c_str(), nullptr), "ca_file");
    if (!opts.ca_pem.empty()) load_ca_pem(s->ctx, opts.ca_pem, "ca_pem");
    if (opts.ca_file.empty() && opts.ca_pem.empty())
      check(SSL_CTX_set_default_verify_paths(s->ctx), "default CA paths");
  }
  if (!opts.alpn.empty()) {
    std::string wire = alpn_wire(opts.alpn);
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (SSL_CTX_set_alpn_protos(s->ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                static_cast<unsigned>(wire.size())) != 0) {
      detail::throw_tls(tls_errc::config, "tls_context: alpn");
    }
  }
  s->cache_limit = opts.session_cache_size;
  if (s->cache_limit > 0) {
    SSL_CTX_set_session_cache_mode(s->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(s->ctx, new_session);
  }
  return tls_context(std::move(s));
}

tls_context tls_context::server(const server_options& opts) {
  ERR_clear_error();
  auto s = make_state(true, opts.min_version, opts.max_version);
  if (opts.cert_file.empty() && opts.cert_pem.empty())
    detail::throw_tls_text(tls_errc::config, "tls_context: a server needs cert_file or cert_pem");
  if (opts.key_file.empty() && opts.key_pem.empty())
    detail::throw_tls_text(tls_errc::config, "tls_context: a server needs key_file or key_pem");
  load_identity(s->ctx, opts.cert_file, opts.cert_pem, opts.key_file, opts.key_pem);
  if (opts.client_auth != client_certificates::none) {
    if (opts.client_ca_file.empty() && opts.client_ca_pem.empty()) {
      detail::throw_tls_text(
          tls_errc::config,
          "tls_context: asking for client certificates needs client_ca_file or client_ca_pem");
    }
    if (!opts.client_ca_file.empty()) {
      check(SSL_CTX_load_verify_locations(s->ctx, opts.client_ca_file.c_str(), nullptr), "client_ca_file");
      // The CAs named in the request for a certificate, so that a client picks one they signed.
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(opts.client_ca_file.c_str());
      if (names == nullptr) detail::throw_tls(tls_errc::config, "tls_context: client_ca_file");
      SSL_CTX_set_client_CA_list(s->ctx, names);
    }
    if (!opts.client_ca_pem.empty()) load_ca_pem(s->ctx, opts.client_ca_pem, "client_ca_pem", true);
    int mode = SSL_VERIFY_PEER;
    if (opts.client_auth == client_certificates::required) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(s->ctx, mode, nullptr);
  }
  static constexpr unsigned char kSessionContext[] = "uring::tls";
  check(SSL_CTX_set_session_id_context(s->ctx, kSessionContext, sizeof kSessionContext - 1), "session id");
  if (!opts.alpn.empty()) {
    s->alpn_wire = alpn_wire(opts.alpn);
    SSL_CTX_set_alpn_select_cb(s->ctx, select_alpn, s.get());
  }
  return tls_context(std::move(s));
}

bool tls_context::is_server() const noexcept { return state_->server; }

std::size_t tls_context::cached_sessions() const { return state_->cached(); }

}  // namespace uring::tls
