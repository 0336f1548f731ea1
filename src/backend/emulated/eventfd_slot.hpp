// backend/emulated/eventfd_slot.hpp — the ring's one eventfd slot as the emulation keeps it.
//
// Provides: detail::emulated_eventfd_slot.
// Threads: the emulated backend's owner thread.
//
// As the kernel's: one registered eventfd, refused (-EBUSY) while taken, checked to be an eventfd,
// switchable off and on, signalled when completions are posted (async-only: only for those an io-wq worker
// would have completed). The emulation posts a turn's completions together, so it signals once per turn.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace uring::detail {

class emulated_eventfd_slot {
 public:
  int register_fd(int fd, bool async_only) {
    if (fd_ >= 0) return -EBUSY;
    if (int r = check_eventfd(fd); r != 0) return r;
    fd_ = fd;
    async_only_ = async_only;
    on_ = true;
    posted_ = posted_in_worker_ = false;
    return 0;
  }
  int unregister_fd() {
    if (fd_ < 0) return -ENXIO;
    fd_ = -1;
    return 0;
  }
  int enable(bool on) {
    on_ = on;
    return 0;
  }
  // A completion was posted; `in_worker`: the kernel would have completed it in an io-wq worker.
  void note_post(bool in_worker) noexcept {
    posted_ = true;
    posted_in_worker_ |= in_worker;
  }
  // The turn's end: signals the eventfd if what was posted since the last signal calls for it.
  void signal_turn() noexcept {
    if (fd_ >= 0 && on_ && (async_only_ ? posted_in_worker_ : posted_)) {
      std::uint64_t one = 1;
      (void)!::write(fd_, &one, sizeof one);
    }
    posted_ = posted_in_worker_ = false;
  }

 private:
  // A real eventfd, or the errno the kernel's registration would give.
  static int check_eventfd(int fd) {
    if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return -EBADF;
    char path[32];
    char target[64] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(path, target, sizeof target - 1);
    if (n < 0) return -errno;
    return std::string_view(target, static_cast<std::size_t>(n)) == "anon_inode:[eventfd]" ? 0 : -EINVAL;
  }

  int fd_ = -1;
  bool async_only_ = false;
  bool on_ = true;
  bool posted_ = false;            // completions posted since the last signal
  bool posted_in_worker_ = false;  // ... of which some the kernel would have completed in a worker
};

}  // namespace uring::detail
