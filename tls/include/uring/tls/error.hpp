/// @file
/// uring/tls/error.hpp — how TLS failures are reported.
///
/// Provides: uring::tls::tls_errc, uring::tls::tls_category(), uring::tls::make_error_code.
/// Threads: plain values; any thread.
///
/// A TLS failure is a std::system_error whose code is in tls_category() and whose what() names the call and
/// carries OpenSSL's reason, plus the certificate check's own text for a verification failure:
/// "handshake: certificate verify failed: Hostname mismatch". Socket failures under TLS (ECONNRESET,
/// ETIMEDOUT, ECANCELED) stay in std::system_category, named the same way.
#pragma once

#include <system_error>
#include <type_traits>

namespace uring::tls {

/// What a TLS failure was: the code of its std::system_error, in tls_category(). Socket failures under TLS
/// stay in std::system_category.
enum class tls_errc {
  protocol = 1,   ///< the peer broke the protocol or refused ours (an alert, a bad record, no shared cipher)
  verify_failed,  ///< the peer's certificate was refused (unknown CA, expired, wrong host name)
  truncated,      ///< the peer closed the connection without close_notify (mid-record or between records)
  config,         ///< a context could not be set up (unreadable certificate, key not matching it)
};

/// The category of tls_errc (name "tls"), whose message() describes each code.
const std::error_category& tls_category() noexcept;

/// `e` as std::error_code, so that a tls_errc compares with the code of a caught std::system_error.
inline std::error_code make_error_code(tls_errc e) noexcept { return {static_cast<int>(e), tls_category()}; }

}  // namespace uring::tls

template <>
struct std::is_error_code_enum<uring::tls::tls_errc> : std::true_type {};
