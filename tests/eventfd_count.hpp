// Reading a registered eventfd's count in tests: at once, or once its signal has come.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cstdint>

namespace uring::test {

// Reads and clears an eventfd's count without blocking: 0 if it was not signalled.
inline std::uint64_t take(int efd) {
  std::uint64_t v = 0;
  return ::read(efd, &v, sizeof v) == sizeof v ? v : 0;
}

// Waits up to 10 s for an eventfd's signal, then takes it: 0 if none came. An io-wq worker
// publishes a CQE before it signals the eventfd, so the executor can see the completion first.
inline std::uint64_t take_signalled(int efd) {
  pollfd p{.fd = efd, .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 10'000) != 1) return 0;
  return take(efd);
}

}  // namespace uring::test
