/// @file
/// uring/buffer.hpp — views of caller-owned memory handed to I/O operations.
///
/// Provides: uring::mutable_buffer (read into), uring::const_buffer (write from).
/// Threads: plain views; any thread.
///
/// A buffer never owns its bytes: the memory must stay valid until the operation that uses it completes
/// (until the co_await returns). Both convert implicitly from any contiguous range of byte-sized elements
/// (std::array<char, N>, std::string, std::vector<std::byte>, std::span<std::uint8_t>, ...). A string
/// literal converts to a const_buffer of its characters, without the terminating NUL.
#pragma once

#include <cstddef>
#include <ranges>
#include <type_traits>

namespace uring {

namespace detail {
template <class R>
concept byte_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
                         sizeof(std::ranges::range_value_t<R>) == 1 &&
                     std::is_trivially_copyable_v<std::ranges::range_value_t<R>>;

/// A string literal (an array of const char): it converts as the characters before its terminating NUL.
template <class R>
concept const_char_array = std::is_array_v<std::remove_reference_t<R>> &&
                           std::is_same_v < std::remove_extent_t<std::remove_reference_t<R>>,
const char > ;

template <class R>
concept mutable_byte_range =
    byte_range<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
}  // namespace detail

/// A view of caller-owned memory an operation reads into. It never owns its bytes: the memory must stay
/// valid until the operation that uses it completes (until the co_await returns). Threads: a plain view.
class mutable_buffer {
 public:
  /// An empty buffer.
  constexpr mutable_buffer() noexcept = default;
  /// `size` bytes at `data`.
  constexpr mutable_buffer(void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// Any contiguous range of mutable byte-sized elements (std::array<char, N>, std::string,
  /// std::vector<std::byte>, std::span<std::uint8_t>, ...), implicitly.
  template <detail::mutable_byte_range R>
  requires(!std::is_same_v<std::remove_cvref_t<R>, mutable_buffer>) constexpr mutable_buffer(
      R&& range) noexcept  // NOLINT(google-explicit-constructor)
      : data_(std::ranges::data(range)), size_(std::ranges::size(range)) {}

  /// The first byte.
  [[nodiscard]] constexpr void* data() const noexcept { return data_; }
  /// How many bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A view of caller-owned memory an operation writes from; as mutable_buffer, it never owns its bytes.
/// Threads: a plain view.
class const_buffer {
 public:
  /// An empty buffer.
  constexpr const_buffer() noexcept = default;
  /// `size` bytes at `data`.
  constexpr const_buffer(const void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// The same bytes as `b`, implicitly.
  constexpr const_buffer(mutable_buffer b) noexcept  // NOLINT(google-explicit-constructor)
      : data_(b.data()), size_(b.size()) {}
  /// A const char array ending in NUL (a string literal) is taken without that NUL: write(fd, "hi") writes
  /// two bytes, as std::string_view("hi") would.
  template <std::size_t N>
  constexpr const_buffer(const char (&s)[N]) noexcept  // NOLINT(google-explicit-constructor)
      : data_(s), size_(N > 0 && s[N - 1] == '\0' ? N - 1 : N) {}
  /// Any contiguous range of byte-sized elements (std::string_view, std::string, std::vector<std::byte>,
  /// std::span<const std::uint8_t>, ...), implicitly.
  template <detail::byte_range R>
  requires(
      !detail::const_char_array<R> && !std::is_same_v<std::remove_cvref_t<R>, const_buffer> &&
      !std::is_same_v<
          std::remove_cvref_t<R>,
          mutable_buffer>) constexpr const_buffer(R&& range) noexcept  // NOLINT(google-explicit-constructor)
      : data_(std::ranges::data(range)), size_(std::ranges::size(range)) {}

  /// The first byte.
  [[nodiscard]] constexpr const void* data() const noexcept { return data_; }
  /// How many bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }

 private:
  const void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace uring
