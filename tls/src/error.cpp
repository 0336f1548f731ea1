// error.cpp — tls_category and the errors built from OpenSSL's queue.
#include <openssl/err.h>

#include <string>
#include <system_error>
#include <utility>

#include "openssl_error.hpp"

namespace uring::tls {

namespace {
class category final : public std::error_category {
 public:
  [[nodiscard]] const char* name() const noexcept override { return "tls"; }
  [[nodiscard]] std::string message(int code) const override {
    switch (static_cast<tls_errc>(code)) {
      case tls_errc::protocol:
        return "TLS protocol error";
      case tls_errc::verify_failed:
        return "certificate verify failed";
      case tls_errc::truncated:
        return "connection closed without close_notify";
      case tls_errc::config:
        return "TLS configuration error";
    }
    return "unknown TLS error";
  }
};
}  // namespace

const std::error_category& tls_category() noexcept {
  static const category instance;
  return instance;
}

namespace detail {

std::string take_openssl_reason(const char* fallback) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  if (const char* reason = ERR_reason_error_string(e)) return reason;
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

namespace {
// what() is exactly the text given: OpenSSL's reason already says what the category's message would.
class tls_error final : public std::system_error {
 public:
  tls_error(tls_errc code, std::string text) : std::system_error(code), text_(std::move(text)) {}
  [[nodiscard]] const char* what() const noexcept override { return text_.c_str(); }

 private:
  std::string text_;
};
}  // namespace

void throw_tls_text(tls_errc code, std::string text) { throw tls_error(code, std::move(text)); }

void throw_tls(tls_errc code, const std::string& what) {
  throw_tls_text(code, what + ": " + take_openssl_reason("unknown error"));
}

}  // namespace detail
}  // namespace uring::tls
