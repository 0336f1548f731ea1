// libFuzzer target for uring::net::address (see fuzz/README.md).
//
// The input is the text, whole (no knob byte: the seeds are plain address strings). Checked besides the
// sanitizers, for address::parse(text), address::ip(text, port) and address::unix_path(text):
// - each either throws std::invalid_argument whose message quotes the text, or gives an address;
//   any other exception escapes and is reported by libFuzzer as a crash;
// - an address given is a round trip: its to_string() parses back to an equal address, which prints the
//   same text again (to_string is canonical);
// - an IP address was given by text without a NUL byte (inet_pton would stop there and accept a prefix);
// - the family matches the form: "unix:..." is AF_UNIX, "[...]:port" AF_INET6, "a.b.c.d:port" AF_INET.
// from_native() on the raw bytes must print without reading outside the address (ASan).
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <uring/net/address.hpp>

namespace {

using uring::net::address;

void check(bool ok) {
  if (!ok) std::abort();
}

// Runs `make`; nullopt if it refused the text the documented way.
template <class F>
std::optional<address> attempt(F make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    check(std::string_view(e.what()).starts_with("address \""));
    return std::nullopt;
  }
}

void check_round_trip(const address& a) {
  std::string text = a.to_string();
  check(!text.empty());
  auto back = attempt([&] { return address::parse(text); });
  check(back.has_value());
  check(*back == a);
  check(back->to_string() == text);
  check(back->family() == a.family() && back->port() == a.port());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool has_nul = text.find('\0') != std::string_view::npos;

  if (auto a = attempt([&] { return address::parse(text); })) {
    if (text.starts_with("unix:")) {
      check(a->is_unix());
    } else {
      check(!has_nul);
      check(a->family() == (text.starts_with('[') ? AF_INET6 : AF_INET));
    }
    check_round_trip(*a);
  }

  // The same bytes as a bare host with a port taken from them, and as a unix path.
  std::uint16_t port = size >= 2 ? static_cast<std::uint16_t>(data[0] << 8 | data[1]) : 0;
  if (auto a = attempt([&] { return address::ip(text, port); })) {
    check(!has_nul && a->is_ip() && a->port() == port);
    check_round_trip(*a);
    check(a->with_port(7).port() == 7);
  }
  if (auto a = attempt([&] { return address::unix_path(text); })) {
    check(a->is_unix() && a->port() == 0);
    check_round_trip(*a);
  }

  // Raw bytes as a native address: printing must stay inside it; whatever prints as an address of a
  // known family parses (a native one may carry bytes the text form drops, such as sin_zero).
  if (size <= address::capacity()) {
    address a = address::from_native(reinterpret_cast<const sockaddr*>(data), static_cast<socklen_t>(size));
    std::string printed = a.to_string();
    if (a.is_ip()) check(attempt([&] { return address::parse(printed); }).has_value());
  }
  return 0;
}
