// openssl_error.hpp — std::system_error from OpenSSL's error queue (private to uring::tls).
#pragma once

#include <string>

#include "uring/tls/error.hpp"

namespace uring::tls::detail {

// The reason of the oldest error on this thread's OpenSSL queue ("certificate verify failed"), or
// `fallback` when the queue is empty. Empties the queue.
std::string take_openssl_reason(const char* fallback);

// Throws std::system_error(code) whose what() is `text` exactly.
[[noreturn]] void throw_tls_text(tls_errc code, std::string text);

// Throws std::system_error(code) whose what() is `what` + ": " + the reason of the queue's oldest error.
[[noreturn]] void throw_tls(tls_errc code, const std::string& what);

}  // namespace uring::tls::detail
