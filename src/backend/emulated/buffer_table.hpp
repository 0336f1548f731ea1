// backend/emulated/buffer_table.hpp — the ring's table of registered buffers as the emulation keeps it.
//
// Provides: detail::emulated_buffer_table.
// Threads: the emulated backend's owner thread.
//
// The same table the kernel keeps (IORING_REGISTER_BUFFERS2 / _UPDATE / IORING_UNREGISTER_BUFFERS), with
// the kernel's answers: an operation naming an index the table lacks, or bytes outside its buffer, fails
// -EFAULT before any syscall. The kernel pins a registered buffer's pages and counts them against
// RLIMIT_MEMLOCK; here each buffer is mlock()ed, so a limit too low fails the registration the same way
// (-ENOMEM). A tagged buffer's tag is posted as soon as an update or the unregistration drops it: the
// emulation's operations never hold a buffer past their syscall.
#pragma once

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "uring/detail/operation.hpp"

namespace uring::detail {

class emulated_buffer_table {
 public:
  static constexpr unsigned kMaxBuffers = 1u << 14;                // the kernel's IORING_MAX_REG_BUFFERS
  static constexpr std::size_t kMaxLength = std::size_t{1} << 30;  // and its 1 GiB per buffer

  emulated_buffer_table() = default;
  ~emulated_buffer_table() {
    for (const slot& s : slots_) unlock(s.iov);
  }
  emulated_buffer_table(const emulated_buffer_table&) = delete;
  emulated_buffer_table& operator=(const emulated_buffer_table&) = delete;

  int register_buffers(const iovec* iovs, const std::uint64_t* tags, unsigned n) {
    if (registered_) return -EBUSY;
    if (n == 0 || n > kMaxBuffers) return -EINVAL;
    std::vector<slot> slots(n);
    for (unsigned i = 0; i < n; ++i) {
      const std::uint64_t tag = tags != nullptr ? tags[i] : 0;
      if (const int bad = take(iovs[i], tag, slots[i]); bad != 0) {
        for (unsigned j = 0; j < i; ++j) unlock(slots[j].iov);
        return bad;
      }
    }
    slots_ = std::move(slots);
    registered_ = true;
    return 0;
  }

  // post(tag) for each tagged buffer the update drops.
  template <class Post>
  int update(unsigned offset, const iovec* iovs, const std::uint64_t* tags, unsigned n, Post post) {
    if (!registered_) return -ENXIO;
    if (offset > slots_.size() || n > slots_.size() - offset) return -EINVAL;
    for (unsigned i = 0; i < n; ++i) {
      slot fresh;
      if (const int bad = take(iovs[i], tags != nullptr ? tags[i] : 0, fresh); bad != 0) return bad;
      drop(slots_[offset + i], post);
      slots_[offset + i] = fresh;
    }
    return 0;
  }

  template <class Post>
  int unregister(Post post) {
    if (!registered_) return -ENXIO;
    for (slot& s : slots_) drop(s, post);
    slots_.clear();
    registered_ = false;
    return 0;
  }

  // What the kernel checks as it imports a fixed buffer: 0, or -EFAULT.
  [[nodiscard]] int check(const io_request& r) const noexcept {
    if (r.aux >= slots_.size()) return -EFAULT;
    const iovec& iov = slots_[r.aux].iov;
    const auto begin = reinterpret_cast<std::uintptr_t>(r.addr);
    const auto base = reinterpret_cast<std::uintptr_t>(iov.iov_base);
    if (iov.iov_base == nullptr || begin < base || begin - base > iov.iov_len ||
        r.len > iov.iov_len - (begin - base))
      return -EFAULT;
    return 0;
  }

 private:
  struct slot {
    iovec iov{nullptr, 0};
    std::uint64_t tag = 0;
  };

  // The kernel's checks of one buffer, then its pin (here a lock).
  static int take(const iovec& iov, std::uint64_t tag, slot& out) {
    if (iov.iov_base == nullptr) {
      if (iov.iov_len != 0) return -EFAULT;
      if (tag != 0) return -EINVAL;  // an empty slot carries no tag
      out = slot{};
      return 0;
    }
    if (iov.iov_len == 0 || iov.iov_len > kMaxLength) return -EFAULT;
    if (lock(iov) != 0) return errno == EPERM || errno == EAGAIN ? -ENOMEM : -errno;
    out = slot{iov, tag};
    return 0;
  }
  template <class Post>
  static void drop(slot& s, Post post) {
    unlock(s.iov);
    if (s.tag != 0) post(s.tag);
    s = slot{};
  }
  // The system calls themselves: the sanitizers' interceptors make mlock a no-op.
  static long lock(const iovec& iov) noexcept { return ::syscall(SYS_mlock, iov.iov_base, iov.iov_len); }
  static void unlock(const iovec& iov) noexcept {
    if (iov.iov_base != nullptr) ::syscall(SYS_munlock, iov.iov_base, iov.iov_len);
  }

  std::vector<slot> slots_;
  bool registered_ = false;
};

}  // namespace uring::detail
