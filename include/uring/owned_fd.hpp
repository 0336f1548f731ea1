/// @file
/// uring/owned_fd.hpp — a file descriptor with one owner, closed when the owner goes away.
///
/// Provides: uring::owned_fd.
/// Threads: like any value: one thread at a time.
///
/// Passing an fd to another executor is moving its owner there: `spawn(target, serve(std::move(fd)))` or
/// `submit_to(target, [fd = std::move(fd)]() mutable { ... })`. If the hand-off is refused (the target no
/// longer accepts work) or dropped (the target shuts down before running it), the task or function is
/// destroyed with the owner inside, so the fd is closed, never leaked. Plain fds are process-wide, so no
/// kernel transfer is needed between our executors; a direct descriptor (a slot of one executor's table)
/// moves with uring::send_direct (uring/direct.hpp).
#pragma once

#include <unistd.h>

#include <utility>

namespace uring {

/// A file descriptor with one owner, closed (close(2)) when the owner goes away. Threads: like any value:
/// one thread at a time.
class owned_fd {
 public:
  /// Holds no fd.
  owned_fd() noexcept = default;
  /// Takes ownership of `fd`.
  explicit owned_fd(int fd) noexcept : fd_(fd) {}
  ///@{
  /// Moves the fd; `o` is left empty (an assigned-to owned_fd first closes its own).
  owned_fd(owned_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  owned_fd& operator=(owned_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ///@}
  owned_fd(const owned_fd&) = delete;
  owned_fd& operator=(const owned_fd&) = delete;
  /// Closes the fd, if any.
  ~owned_fd() { reset(); }

  /// The fd, -1 when empty.
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// True when an fd is held.
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives the fd up: the caller closes it.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the fd held (if any) and holds `fd` instead.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace uring
