/// @file
/// uring/tls/ktls.hpp — whether this kernel can take TLS records over (kTLS).
///
/// Provides: uring::tls::ktls_status, uring::tls::ktls_available(), uring::tls::to_json(ktls_status).
/// Threads: any thread; the answer is worked out once per process.
///
/// kTLS needs the kernel's "tls" upper-layer protocol: setsockopt(TCP_ULP, "tls") on an established TCP
/// connection. The check makes one loopback connection (blocking syscalls, at most a few) and tries it.
#pragma once

#include <string>

namespace uring::tls {

/// Whether this kernel can take TLS records over (kTLS), and why not. Threads: a plain value.
struct ktls_status {
  bool available = false;  ///< setsockopt(TCP_ULP, "tls") worked on a loopback connection
  std::string
      reason;  ///< why not ("setsockopt(TCP_ULP, \"tls\"): No such file or directory"); empty if available
  /// `available`.
  explicit operator bool() const noexcept { return available; }
};

/// Whether kTLS is available, worked out once per process (one loopback connection, blocking syscalls, at
/// most a few). Any thread.
const ktls_status& ktls_available();

/// {"available":false,"reason":"..."} on one line (uring-probe --json's "ktls").
std::string to_json(const ktls_status& s);

}  // namespace uring::tls
