/// @file
/// uring/error.hpp — how operations report failure.
///
/// Provides: uring::io_result (the nothrow form of an operation's result) and uring::throw_errno.
/// Threads: plain values; any thread.
///
/// Awaiting an operation either yields its result or throws std::system_error whose code is the errno
/// (std::system_category) and whose what() names the operation: "read: Bad file descriptor".
/// Each awaitable also has a `.nothrow()` form that yields an io_result instead of throwing.
#pragma once

#include <cstdint>
#include <system_error>

namespace uring {

/// Result of an operation awaited in its nothrow form: `res` is the kernel's answer, >= 0 on success
/// (a byte count where the operation moves bytes) or -errno on failure.
struct io_result {
  /// The kernel's answer: >= 0 on success, -errno on failure.
  std::int32_t res = 0;

  ///@{
  /// True on success (res >= 0).
  [[nodiscard]] bool ok() const noexcept { return res >= 0; }
  explicit operator bool() const noexcept { return ok(); }
  ///@}
  /// The failure as std::error_code (-res in std::system_category), or an empty code on success.
  [[nodiscard]] std::error_code error() const noexcept {
    return res < 0 ? std::error_code(-res, std::system_category()) : std::error_code();
  }
};

/// Throws std::system_error(err, std::system_category(), what). `err` is a positive errno.
[[noreturn]] void throw_errno(int err, const char* what);

}  // namespace uring
