// ktls.cpp — whether setsockopt(TCP_ULP, "tls") works here: tried once on a loopback connection.
#include "uring/tls/ktls.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "uring/owned_fd.hpp"

namespace uring::tls {

namespace {

std::string failed(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// An established loopback TCP connection is what the kernel asks for before it attaches a ULP.
ktls_status probe() {
  owned_fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) return {false, failed("socket")};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return {false, failed("bind")};
  if (::listen(listener.get(), 1) != 0) return {false, failed("listen")};
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return {false, failed("getsockname")};
  }
  owned_fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!client) return {false, failed("socket")};
  if (::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return {false, failed("connect")};
  owned_fd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!accepted) return {false, failed("accept")};
  static constexpr char kUlp[] = "tls";
  if (::setsockopt(client.get(), IPPROTO_TCP, TCP_ULP, kUlp, sizeof kUlp) != 0) {
    return {false, failed("setsockopt(TCP_ULP, \"tls\")")};
  }
  return {true, {}};
}

}  // namespace

const ktls_status& ktls_available() {
  static const ktls_status status = probe();
  return status;
}

std::string to_json(const ktls_status& s) {
  std::string reason;
  for (char ch : s.reason) {  // strerror's text and call names: printable ASCII, quotes included
    if (ch == '"' || ch == '\\') reason += '\\';
    reason += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;
  }
  return std::string("{\"available\":") + (s.available ? "true" : "false") + ",\"reason\":\"" + reason +
         "\"}";
}

}  // namespace uring::tls
