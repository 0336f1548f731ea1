// samples/get/url.cpp — parsing uring-get's URLs and --resolve entries (url.hpp).
#include "url.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace get {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool is_ipv6(const std::string& s) {
  in6_addr a{};
  return ::inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

bool is_ipv4(const std::string& s) {
  in_addr a{};
  return ::inet_pton(AF_INET, s.c_str(), &a) == 1;
}

// A host name (letters, digits, '-', '.', '_'; no empty label) or an IPv4 address.
bool is_host_name(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.find("..") != std::string_view::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v == 0 || v > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

// "[v6]" or a name / IPv4 address at the front of `s`: the host (brackets removed) and what follows it.
bool split_host(std::string_view s, std::string& host, bool& ipv6, std::string_view& rest, std::string& why) {
  if (s.starts_with('[')) {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) {
      why = "'[' without ']' around an IPv6 address";
      return false;
    }
    host = lowered(s.substr(1, close - 1));
    if (!is_ipv6(host)) {
      why = "'" + host + "' is not an IPv6 address";
      return false;
    }
    ipv6 = true;
    rest = s.substr(close + 1);
    return true;
  }
  std::size_t colon = s.find(':');
  host = lowered(s.substr(0, colon));
  rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
  if (!is_host_name(host)) {
    why = host.empty() ? "no host" : "'" + host + "' is not a host name or address";
    return false;
  }
  ipv6 = false;
  return true;
}

}  // namespace

std::string url::authority() const {
  std::string out = ipv6 ? "[" + host + "]" : host;
  if (port != (https ? 443 : 80)) out += ":" + std::to_string(port);
  return out;
}

std::string url::host_port() const { return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port); }

std::string url::key() const { return std::string(https ? "https://" : "http://") + host_port(); }

std::optional<url> parse_url(std::string_view text, std::string& why) {
  url u;
  u.text = std::string(text);
  const std::string scheme = lowered(text.substr(0, text.find("://")));
  if (scheme == "http") {
    u.https = false;
  } else if (scheme == "https") {
    u.https = true;
  } else {
    why = text.find("://") == std::string_view::npos ? "not a URL (it needs http:// or https://)"
                                                     : "scheme '" + scheme + "' is not http or https";
    return std::nullopt;
  }
  std::string_view rest = text.substr(scheme.size() + 3);
  if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c > 0x20 && c < 0x7F; })) {
    why = "a space, control byte or non-ASCII byte (percent-encode it)";
    return std::nullopt;
  }
  const std::size_t end_of_authority = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end_of_authority);
  if (authority.find('@') != std::string_view::npos) {
    why = "user information ('user@') is not supported";
    return std::nullopt;
  }
  std::string_view after_host;
  if (!split_host(authority, u.host, u.ipv6, after_host, why)) return std::nullopt;
  u.port = u.https ? 443 : 80;
  if (!after_host.empty()) {
    std::optional<std::uint16_t> port;
    if (after_host.front() == ':') port = parse_port(after_host.substr(1));
    if (!port) {
      why = "bad port '" + std::string(after_host) + "' (1-65535)";
      return std::nullopt;
    }
    u.port = *port;
  }
  std::string_view target =
      end_of_authority == std::string_view::npos ? std::string_view() : rest.substr(end_of_authority);
  target = target.substr(0, target.find('#'));
  u.target = target.starts_with('/') ? std::string(target) : "/" + std::string(target);
  return u;
}

std::optional<resolve_entry> parse_resolve(std::string_view text, std::string& why) {
  resolve_entry e;
  bool ipv6 = false;
  std::string_view rest;
  if (!split_host(text, e.host, ipv6, rest, why)) return std::nullopt;
  std::size_t colon = rest.size() > 1 ? rest.find(':', 1) : std::string_view::npos;
  std::optional<std::uint16_t> port;
  if (rest.starts_with(':') && colon != std::string_view::npos) port = parse_port(rest.substr(1, colon - 1));
  if (!port) {
    why = "not HOST:PORT:ADDRESS";
    return std::nullopt;
  }
  e.port = *port;
  std::string_view address = rest.substr(colon + 1);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  e.address = std::string(address);
  if (!is_ipv4(e.address) && !is_ipv6(e.address)) {
    why = "'" + e.address + "' is not an IPv4 or IPv6 address";
    return std::nullopt;
  }
  return e;
}

}  // namespace get
