// uring/detail/op_code.hpp — the names of the operations the library starts, and sets of them.
//
// Provides: detail::op_code, detail::kOpCodeCount, detail::op_set.
// Threads: plain values; any thread.
//
// Each op_code is one row of the library's op table (src/ops/op_table.hpp), which says how the request's
// fields are used, which kernel opcode it becomes, since which kernel, and how the emulation runs it.
// The values are ours, not the kernel's IORING_OP_* numbers, and the table's rows are in this order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uring::detail {

enum class op_code : std::uint8_t {
  nop,
  read,
  write,
  timeout,
  poll,
  openat,
  close,
  statx,
  fsync,
  accept,
  accept_multishot,
  connect,
  recv,
  send,
  recvmsg,
  sendmsg,
  shutdown,
  cancel_fd,
  recv_multishot,
  send_zc,
  splice,
  install_direct,
  plain_fd,
  send_direct,
  accept_direct,
  accept_multishot_direct,
  readv,
  writev,
  fallocate,
  ftruncate,
  unlinkat,
  renameat,
  mkdirat,
  symlinkat,
  linkat,
  fadvise,
  madvise,
  socket,
  socket_direct,
  bind,
  listen,
  futex_wait,
  futex_wake,
  waitid,
  read_fixed,
  write_fixed,
  send_fixed,
  send_zc_fixed,
  read_multishot,
  send_bundle,
};

inline constexpr std::size_t kOpCodeCount = static_cast<std::size_t>(op_code::send_bundle) + 1;

// A set of op_codes of any size the enum grows to: one bit each.
class op_set {
 public:
  constexpr op_set() noexcept = default;

  [[nodiscard]] constexpr bool contains(op_code c) const noexcept {
    const auto i = static_cast<std::size_t>(c);
    return ((words_[i / 64] >> (i % 64)) & 1u) != 0;
  }
  constexpr op_set& add(op_code c) noexcept {
    const auto i = static_cast<std::size_t>(c);
    words_[i / 64] |= std::uint64_t{1} << (i % 64);
    return *this;
  }
  [[nodiscard]] constexpr bool empty() const noexcept {
    for (std::uint64_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }
  // Every op_code not in this set.
  [[nodiscard]] constexpr op_set complement() const noexcept {
    op_set out;
    for (std::size_t i = 0; i < kOpCodeCount; ++i) {
      if (!contains(op_code(i))) out.add(op_code(i));
    }
    return out;
  }
  [[nodiscard]] constexpr op_set without(const op_set& other) const noexcept {
    op_set out = *this;
    for (std::size_t w = 0; w < kWords; ++w) out.words_[w] &= ~other.words_[w];
    return out;
  }
  // The first 64 codes as bits (1 << code): what the inline submit path tests in one instruction.
  [[nodiscard]] constexpr std::uint64_t low_bits() const noexcept { return words_[0]; }

  constexpr bool operator==(const op_set&) const noexcept = default;

 private:
  static constexpr std::size_t kWords = (kOpCodeCount + 63) / 64;
  std::array<std::uint64_t, kWords> words_{};
};

}  // namespace uring::detail
