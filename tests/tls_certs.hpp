// tls_certs.hpp — a test CA and certificates made at test time with OpenSSL (P-256 keys): nothing is
// committed that could expire. Each certificate comes back as PEM text, its key likewise.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace uring::test {

struct issued {
  std::string cert_pem;
  std::string key_pem;
  std::shared_ptr<X509> cert;
  std::shared_ptr<EVP_PKEY> key;
};

namespace detail_certs {

inline void need(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what);
}

inline std::string to_pem(int (*write)(BIO*, void*), void* object) {
  std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new(BIO_s_mem()), &BIO_free);
  need(b && write(b.get(), object) == 1, "PEM");
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

inline int write_cert(BIO* b, void* c) { return PEM_write_bio_X509(b, static_cast<X509*>(c)); }
inline int write_key(BIO* b, void* k) {
  return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr, nullptr);
}

inline void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  need(ext != nullptr, "extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

}  // namespace detail_certs

// A certificate for `common_name`, valid from now + `from_days` to now + `to_days`, signed by `ca` (null:
// self-signed, a CA). `san` is a subjectAltName value ("DNS:localhost,IP:127.0.0.1").
inline issued make_cert(const std::string& common_name, const issued* ca, const std::string& san = {},
                        long from_days = -1, long to_days = 30, const char* usage = "serverAuth") {
  using namespace detail_certs;
  issued out;
  out.key.reset(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  need(out.key != nullptr, "key");
  out.cert.reset(X509_new(), &X509_free);
  X509* c = out.cert.get();
  static long serial = 1;
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(c), from_days * 86400);
  X509_gmtime_adj(X509_getm_notAfter(c), to_days * 86400);
  X509_set_pubkey(c, out.key.get());
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509* issuer = ca ? ca->cert.get() : c;
  X509_set_issuer_name(c, X509_get_subject_name(issuer));
  if (ca == nullptr) {
    add_ext(c, issuer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c, issuer, NID_ext_key_usage, usage);
  }
  add_ext(c, issuer, NID_subject_key_identifier, "hash");
  if (!san.empty()) add_ext(c, issuer, NID_subject_alt_name, san.c_str());
  need(X509_sign(c, ca ? ca->key.get() : out.key.get(), EVP_sha256()) > 0, "sign");
  out.cert_pem = to_pem(write_cert, c);
  out.key_pem = to_pem(write_key, out.key.get());
  return out;
}

// The certificates the TLS tests use, made once per process.
struct test_pki {
  issued ca = make_cert("uring test CA", nullptr);
  issued other_ca = make_cert("uring other CA", nullptr);
  issued server = make_cert("localhost", &ca, "DNS:localhost,DNS:uring.test,IP:127.0.0.1");
  issued expired = make_cert("localhost", &ca, "DNS:localhost", -10, -1);
  issued stranger = make_cert("localhost", &other_ca, "DNS:localhost");
  // Client certificates (mutual TLS): one the test CA signed, and one it does not know.
  issued client = make_cert("uring client", &ca, {}, -1, 30, "clientAuth");
  issued stranger_client = make_cert("uring stranger", &other_ca, {}, -1, 30, "clientAuth");

  static const test_pki& get() {
    static const test_pki pki;
    return pki;
  }
};

}  // namespace uring::test
