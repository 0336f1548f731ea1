// samples/get/url.hpp — the URLs uring-get fetches, and its --resolve entries.
//
// Provides: get::url, get::parse_url, get::resolve_entry, get::parse_resolve.
// Threads: plain values; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace get {

struct url {
  std::string text;  // as given, for messages
  bool https = false;
  std::string host;   // lower case; an IPv6 address without its brackets
  bool ipv6 = false;  // host is an IPv6 address (written in brackets in the Host header)
  std::uint16_t port = 0;
  std::string target;  // path and query, "/" at least; the fragment is dropped

  // The Host header's value: the host, and the port when it is not the scheme's default.
  [[nodiscard]] std::string authority() const;
  // "HOST:PORT" ("[::1]:8443" for IPv6), for messages.
  [[nodiscard]] std::string host_port() const;
  // Requests to URLs with the same key may share a connection: scheme, host and port.
  [[nodiscard]] std::string key() const;
};

// http:// or https://, a host name, IPv4 address or [IPv6] address, an optional port, then the path and
// query (visible ASCII only; percent-encode the rest). Anything else, user info included, is refused: the
// result is empty and `why` says what is wrong.
std::optional<url> parse_url(std::string_view text, std::string& why);

// --resolve HOST:PORT:ADDR: connections for HOST and PORT go to ADDR (an IPv4 or IPv6 address, the latter
// optionally in brackets); the Host header, SNI and the certificate check keep HOST.
struct resolve_entry {
  std::string host;  // lower case, without brackets
  std::uint16_t port = 0;
  std::string address;  // numeric, without brackets
};
std::optional<resolve_entry> parse_resolve(std::string_view text, std::string& why);

}  // namespace get
