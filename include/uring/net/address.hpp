/// @file
/// uring/net/address.hpp — socket addresses: IPv4, IPv6 and unix-domain paths, parsed and formatted.
///
/// Provides: uring::net::address.
/// Threads: a plain value; any thread.
///
/// An address is a sockaddr_storage and its length: what bind(2), connect(2) and accept(2) take. Text
/// forms, accepted by parse() and produced by to_string():
///   "127.0.0.1:8080"       IPv4 and a port
///   "[::1]:8080"           IPv6 (brackets required when a port follows)
///   "unix:/run/app.sock"   a unix-domain socket path; "unix:@name" is Linux's abstract namespace
/// No name resolution is done here (no DNS: it would block the executor's thread). Bad input throws
/// std::invalid_argument saying what is wrong with which text.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace uring::net {

/// A socket address: IPv4, IPv6 or a unix-domain path, a sockaddr_storage and its length (what bind(2),
/// connect(2) and accept(2) take). Text forms, accepted by parse() and produced by to_string():
/// "127.0.0.1:8080" (IPv4 and a port), "[::1]:8080" (IPv6; brackets required when a port follows),
/// "unix:/run/app.sock" (a unix-domain path; "unix:@name" is Linux's abstract namespace). No name
/// resolution is done here. Bad input throws std::invalid_argument saying what is wrong with which text.
///
/// Threads: a plain value; any thread.
class address {
 public:
  /// An empty address (AF_UNSPEC): what accept fills in, or a default member.
  address() noexcept;

  /// One of the text forms above.
  static address parse(std::string_view text);
  /// "127.0.0.1" or "::1" (no brackets) and a port.
  static address ip(std::string_view ip, std::uint16_t port);
  /// A unix-domain path (at most 107 bytes); a leading '@' names an abstract socket.
  static address unix_path(std::string_view path);
  /// A copy of a native sockaddr (from getsockname, recvmsg ...). `len` must not exceed its storage.
  static address from_native(const sockaddr* sa, socklen_t len);

  /// AF_INET, AF_INET6, AF_UNIX, or AF_UNSPEC for an empty address.
  [[nodiscard]] int family() const noexcept { return storage_.ss_family; }
  /// True for an IPv4 or IPv6 address.
  [[nodiscard]] bool is_ip() const noexcept { return family() == AF_INET || family() == AF_INET6; }
  /// True for a unix-domain address.
  [[nodiscard]] bool is_unix() const noexcept { return family() == AF_UNIX; }
  /// The port of an IP address, 0 for the others.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// The same address with another port (IP addresses only; unchanged otherwise).
  [[nodiscard]] address with_port(std::uint16_t port) const noexcept;
  /// The text form; "" for an empty address.
  [[nodiscard]] std::string to_string() const;

  ///@{
  /// The native sockaddr, for a system call (the mutable one for the kernel to write into).
  [[nodiscard]] const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  [[nodiscard]] sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  ///@}
  /// The valid length of data().
  [[nodiscard]] socklen_t size() const noexcept { return size_; }
  /// The storage's length: how much the kernel may write into data().
  [[nodiscard]] static constexpr socklen_t capacity() noexcept { return sizeof(sockaddr_storage); }
  /// After the kernel wrote into data(): how much of it is valid.
  void resize(socklen_t n) noexcept { size_ = n <= capacity() ? n : capacity(); }

  friend bool operator==(const address& a, const address& b) noexcept;

 private:
  sockaddr_storage storage_;
  socklen_t size_ = 0;
};

}  // namespace uring::net
