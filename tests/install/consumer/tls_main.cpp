// tls_consumer: built against an installed uring::tls (find_package(uring COMPONENTS tls) pulls in
// OpenSSL), run by the install_consumer test. Makes a client context and asks for the kTLS probe's answer.
#include <cstdio>
#include <exception>

#include <uring/tls/tls.hpp>

int main() {
  try {
    auto ctx = uring::tls::tls_context::client();
    const auto& ktls = uring::tls::ktls_available();
    std::printf("tls consumer: ok (kTLS %s%s)\n", ktls ? "available" : "unavailable: ", ktls.reason.c_str());
    return ctx.is_server() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tls consumer: %s\n", e.what());
    return 3;
  }
}
