// address.cpp — parsing and formatting socket addresses, with errors that quote the text.
#include "uring/net/address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>
#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace uring::net {

namespace {

[[noreturn]] void bad(std::string_view text, const char* why) {
  throw std::invalid_argument("address \"" + std::string(text) + "\": " + why);
}

std::uint16_t parse_port(std::string_view whole, std::string_view digits) {
  if (digits.empty()) bad(whole, "missing port after ':'");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) bad(whole, "the port is not a number");
  if (value > 65535) bad(whole, "the port is out of range (0-65535)");
  return static_cast<std::uint16_t>(value);
}

}  // namespace

address::address() noexcept {
  std::memset(&storage_, 0, sizeof storage_);
  storage_.ss_family = AF_UNSPEC;
}

address address::ip(std::string_view ip, std::uint16_t port) {
  // inet_pton wants a terminated string, and would stop at a NUL inside the text, accepting its prefix.
  if (ip.find('\0') != std::string_view::npos) bad(ip, "a NUL byte inside an IP address");
  std::string text(ip);
  address a;
  if (text.find(':') == std::string::npos) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
    if (::inet_pton(AF_INET, text.c_str(), &in->sin_addr) != 1) bad(ip, "not an IPv4 address (a.b.c.d)");
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    a.size_ = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    if (::inet_pton(AF_INET6, text.c_str(), &in6->sin6_addr) != 1) bad(ip, "not an IPv6 address");
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    a.size_ = sizeof(sockaddr_in6);
  }
  return a;
}

address address::unix_path(std::string_view path) {
  address a;
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage_);
  if (path.empty()) bad(path, "empty unix socket path");
  if (path.size() >= sizeof un->sun_path) bad(path, "unix socket path longer than 107 bytes");
  const bool abstract = path.front() == '@';
  // A path ends at its first NUL for the kernel (and for to_string): refuse one rather than bind a prefix.
  // An abstract name is a byte string: NULs are part of it.
  if (!abstract && path.find('\0') != std::string_view::npos)
    bad(path, "a NUL byte inside a unix socket path");
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  if (abstract) un->sun_path[0] = '\0';
  // An abstract name's length is exact (no terminator counts); a path's includes its terminator.
  a.size_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1));
  return a;
}

address address::parse(std::string_view text) {
  if (text.starts_with("unix:")) return unix_path(text.substr(5));
  if (text.empty()) bad(text, "empty address");
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) bad(text, "missing ']' after an IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') bad(text, "missing ':port' after ']'");
    std::string_view host = text.substr(1, close - 1);
    if (host.find(':') == std::string_view::npos) bad(text, "not an IPv6 address inside [ ]");
    try {
      return ip(host, parse_port(text, text.substr(close + 2)));
    } catch (const std::invalid_argument&) {
      bad(text, "not an IPv6 address inside [ ]");
    }
  }
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos) bad(text, "missing ':port' (use host:port, [v6]:port or unix:path)");
  std::string_view host = text.substr(0, colon);
  if (host.find(':') != std::string_view::npos)
    bad(text, "an IPv6 address with a port needs brackets: [addr]:port");
  std::uint16_t port = parse_port(text, text.substr(colon + 1));
  try {
    return ip(host, port);
  } catch (const std::invalid_argument&) {
    bad(text, "not an IPv4 address (a.b.c.d)");
  }
}

address address::from_native(const sockaddr* sa, socklen_t len) {
  address a;
  if (len > capacity()) throw std::invalid_argument("address: native address longer than sockaddr_storage");
  std::memcpy(&a.storage_, sa, len);
  a.size_ = len;
  return a;
}

std::uint16_t address::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

address address::with_port(std::uint16_t port) const noexcept {
  address a = *this;
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&a.storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&a.storage_)->sin6_port = htons(port);
  return a;
}

std::string address::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  switch (family()) {
    case AF_INET:
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
      return std::string(buf) + ":" + std::to_string(port());
    case AF_INET6:
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof buf);
      return "[" + std::string(buf) + "]:" + std::to_string(port());
    case AF_UNIX: {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
      const auto base = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path));
      if (size_ <= base) return "unix:";  // an unnamed socket (a socketpair, or a client that never bound)
      std::size_t n = size_ - base;
      if (un->sun_path[0] == '\0') return "unix:@" + std::string(un->sun_path + 1, n - 1);
      return "unix:" + std::string(un->sun_path, strnlen(un->sun_path, n));
    }
    default:
      return "";
  }
}

bool operator==(const address& a, const address& b) noexcept {
  return a.size_ == b.size_ && std::memcmp(&a.storage_, &b.storage_, a.size_) == 0;
}

}  // namespace uring::net
