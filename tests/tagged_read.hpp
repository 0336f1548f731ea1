// tagged_read.hpp — a read that shows in the in-flight registry under a label: for the tests of
// executor::inflight and the stuck-operation watchdog.
#pragma once

#include <span>
#include <stop_token>
#include <utility>

#include <uring/uring.hpp>

namespace uring::test {

// Reads one byte from `fd`, labelled `tag`, following `stop`; yields the read's result (1, or -errno).
inline task<int> read_one(int fd, const char* tag, std::stop_token stop = {}) {
  char byte = 0;
  auto r = co_await with_stop_token(
      [](int f, char* b, const char* t) -> task<io_result> {
        co_return co_await read(f, std::span(b, 1)).tag(t).nothrow();
      }(fd, &byte, tag),
      std::move(stop));
  co_return r.res;
}

}  // namespace uring::test
