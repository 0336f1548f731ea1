// consumer: a program built against an installed uring (find_package or pkg-config), run by the
// install_consumer test. Prints the version, then runs an executor: a nop, and a write to a pipe read
// back. Exits 0 when the bytes read equal the bytes written.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include <uring/uring.hpp>

namespace {

uring::task<int> round_trip() {
  co_await uring::nop();
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("consumer: pipe");
    co_return 2;
  }
  constexpr std::string_view sent = "uring consumer round trip";
  std::size_t written = co_await uring::write(fds[1], sent);
  std::string received(sent.size(), '\0');
  std::size_t got = co_await uring::read(fds[0], received);
  ::close(fds[0]);
  ::close(fds[1]);
  if (written != sent.size() || got != sent.size() || received != sent) {
    std::fprintf(stderr, "consumer: wrote %zu bytes \"%.*s\", read %zu bytes \"%s\"\n", written,
                 static_cast<int>(sent.size()), sent.data(), got, received.c_str());
    co_return 1;
  }
  co_return 0;
}

}  // namespace

int main() {
  std::printf("consumer: uring %.*s (%d.%d.%d)\n", static_cast<int>(uring::version_string.size()),
              uring::version_string.data(), URING_VERSION_MAJOR, uring::version_minor, uring::version_patch);
  try {
    int rc = uring::sync_wait(round_trip());
    std::printf("consumer: round trip %s\n", rc == 0 ? "ok" : "FAILED");
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 3;
  }
}
