// leased_recv.hpp — the LeasedRecv suite's fixture, shared by the files that test leased receives
// (leased_recv_test, leased_recv_timeout_test, buffer_pool_test, recv_bundle_test): every backend, plus
// native with the buffer ring turned off (the one-recv-per-call path) and native without bundles (one ring
// buffer per receive).
//
// Use: TEST_P(LeasedRecv, ...), then INSTANTIATE_LEASED_RECV(); once in each file.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"

namespace uring::test {

inline std::vector<backend_config> leased_recv_backends() {
  return backends_and_native_without(
      {{feature::buf_ring, "native_no_buf_ring"}, {feature::recv_bundle, "native_no_recv_bundle"}});
}

class LeasedRecv : public backend_test {
 protected:
  // Whether this configuration's pools should be provided-buffer rings.
  [[nodiscard]] bool expect_ring() const {
    const auto& k = probed_kernel();
    return !emulated() && !options().disable.contains(feature::buf_ring) && k.buf_ring && k.multishot_recv;
  }
  // Whether this configuration's receives may fill several buffers at once.
  [[nodiscard]] bool expect_bundle() const {
    if (options().disable.contains(feature::recv_bundle)) return false;
    return emulated() || (expect_ring() && probed_kernel().recv_bundle);
  }
};

// Returns the held leases after a few turns, appending their bytes in order.
inline task<void> give_back_later(std::vector<net::leased_buffer>* held, std::string* got) {
  for (int i = 0; i < 3; ++i) co_await nop();
  for (auto& l : *held) got->append(l.view());
  held->clear();
}

// Every chunk to the end, from a reader that asks for the next one (`next()`: a task yielding a lease)
// while it holds every buffer of `pool`: such a read waits for the leases, given back a few turns later.
// The bytes in order.
template <class Next>
task<std::string> read_holding_every_buffer(net::buffer_pool& pool, Next next) {
  std::string got;
  std::vector<net::leased_buffer> held;
  for (;;) {
    net::leased_buffer chunk;
    if (held.size() == pool.count()) {
      auto [given, c] = co_await when_all(give_back_later(&held, &got), next());
      chunk = std::move(c);
    } else {
      chunk = co_await next();
    }
    if (chunk.empty()) break;
    EXPECT_LE(chunk.size(), pool.buffer_size());
    held.push_back(std::move(chunk));
  }
  for (auto& l : held) got.append(l.view());
  co_return got;
}

}  // namespace uring::test

#define INSTANTIATE_LEASED_RECV()                                                                          \
  INSTANTIATE_TEST_SUITE_P(Backends, LeasedRecv, ::testing::ValuesIn(uring::test::leased_recv_backends()), \
                           [](const auto& test_info) { return test_info.param.name; })
