// Bundled leased receives: where the plan has them (natively IORING_RECVSEND_BUNDLE, emulated a recvmsg into
// several pool buffers) one receive fills several buffers, and each still comes out as its own chunk, in
// order; a receive never takes more than what is left of its stream's share. On every backend, and natively
// without the buffer ring and without bundles, where each receive takes one buffer.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "leased_recv.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;

constexpr std::uint32_t kSize = 256;

// A few turns of the executor: completions in flight are reaped, and buffers given back are re-armed for.
task<void> settle() {
  for (int i = 0; i < 4; ++i) co_await uring::nop();
}

struct counts {
  std::uint64_t receives = 0;
  std::uint32_t available = 0;
};

// Eight buffers' worth waiting, a share of 8: with bundles one receive takes all eight (without a ring, one
// and then a bundle of seven), each its own chunk of the bytes in order; without, one receive per buffer.
// From a ring, and from a pool without one (natively then a recvmsg into several buffers too).
TEST_P(LeasedRecv, OneReceiveFillsSeveralBuffersEachItsOwnChunkInOrder) {
  for (const bool use_ring : {true, false}) {
    SCOPED_TRACE(use_ring ? "ring" : "no ring");
    stream_pair pair;
    const std::string sent = pattern(8 * kSize, 3);
    write_fully(pair.peer.get(), sent);  // all there before the first receive
    bool bundles = false;
    counts after;
    std::vector<std::string> chunks =
        run([](tcp_stream& s, bool use_ring, bool& bundles, counts& after) -> task<std::vector<std::string>> {
          buffer_pool pool({.count = 16, .size = kSize, .use_ring = use_ring, .max_per_stream = 8});
          bundles = pool.uses_bundles();
          std::vector<std::string> got;
          std::vector<leased_buffer> held;  // kept: the stream's share is exactly the 8 chunks
          for (int i = 0; i < 8; ++i) {
            held.push_back(co_await s.recv(pool));
            got.emplace_back(held.back().view());
          }
          after = {pool.receives(), pool.available()};
          co_return got;
        }(pair.ours, use_ring, bundles, after));
    EXPECT_EQ(bundles, expect_bundle());
    ASSERT_EQ(chunks.size(), 8u);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i], sent.substr(i * kSize, kSize)) << "chunk " << i;
    }
    // Without a ring the first receive after readiness takes one buffer; once it filled, a bundle takes
    // the rest.
    EXPECT_EQ(after.receives, !expect_bundle() ? 8u : use_ring && expect_ring() ? 1u : 2u);
    EXPECT_EQ(after.available, 8u);
  }
}

// A share of 4 with 16 buffers' worth waiting: the first receive takes 4 (bundled: at once, or without a
// ring one and then a bundle of three), and with 2
// leases returned the stream takes exactly 2 more, never the buffers the socket has data for. (Each return
// re-arms at once, so the 2 may come in one receive or in two.)
TEST_P(LeasedRecv, AReceiveTakesNoMoreThanWhatIsLeftOfTheShare) {
  stream_pair pair;
  const std::string sent = pattern(16 * kSize, 5);
  write_fully(pair.peer.get(), sent);
  std::vector<counts> seen;
  std::string got = run([](tcp_stream& s, std::vector<counts>& seen) -> task<std::string> {
    buffer_pool pool({.count = 16, .size = kSize, .max_per_stream = 4});
    std::string got;
    std::vector<leased_buffer> held;
    for (int i = 0; i < 4; ++i) held.push_back(co_await s.recv(pool));
    co_await settle();
    seen.push_back({pool.receives(), pool.available()});
    for (int i = 0; i < 2; ++i) got.append(held[i].view());
    held.erase(held.begin(), held.begin() + 2);  // two back: room for two more
    for (int i = 0; i < 2; ++i) held.push_back(co_await s.recv(pool));
    co_await settle();
    seen.push_back({pool.receives(), pool.available()});
    for (auto& l : held) got.append(l.view());
    co_return got;
  }(pair.ours, seen));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].available, 12u) << "the first receive took more than the share";
  EXPECT_EQ(seen[1].available, 12u) << "the second took more than the share left";
  EXPECT_EQ(seen[0].receives, !expect_bundle() ? 4u : expect_ring() ? 1u : 2u);
  EXPECT_LE(seen[1].receives - seen[0].receives, 2u);
  EXPECT_EQ(got, sent.substr(0, 6 * kSize));
}

// A stream that goes with a bundle's chunks queued (and natively a receive armed): every buffer returns to
// the pool.
TEST_P(LeasedRecv, AStreamGoneWithABundleQueuedReturnsEveryBuffer) {
  stream_pair pair;
  write_fully(pair.peer.get(), pattern(6 * kSize, 9));
  counts before, after;
  run([](stream_pair& pair, counts& before, counts& after) -> task<void> {
    buffer_pool pool({.count = 8, .size = kSize, .max_per_stream = 8});
    {
      tcp_stream s = std::move(pair.ours);
      leased_buffer first = co_await s.recv(pool);  // without a ring one buffer, then a bundle of five
      leased_buffer second = co_await s.recv(pool);
      EXPECT_EQ(first.size(), kSize);
      EXPECT_EQ(second.size(), kSize);
      co_await settle();
      before = {pool.receives(), pool.available()};
    }  // the lease and the stream go; the stream's armed receive is cancelled
    co_await settle();
    after = {pool.receives(), pool.available()};
  }(pair, before, after));
  if (expect_bundle()) {
    EXPECT_EQ(before.available, 2u) << "six buffers' worth waited: the receives should have taken six";
  }
  EXPECT_EQ(after.available, 8u);
}

// Many laps of a small ring (past the ring's 16-bit tail wrapping), with leases returned out of order so
// that ring order and buffer order part: every byte arrives once, in order.
TEST_P(LeasedRecv, ManyLapsOfTheRingWithLeasesReturnedOutOfOrderLoseNoByte) {
  stream_pair pair;
  const std::string payload = noise(static_cast<std::size_t>(scaled(80'000)) * 64, 11);
  std::thread writer([&] {
    write_fully(pair.peer.get(), payload);
    pair.peer.reset();  // end of stream
  });
  std::string got = run([](tcp_stream& s) -> task<std::string> {
    buffer_pool pool({.count = 8, .size = 64, .max_per_stream = 8});
    std::string got;
    std::vector<leased_buffer> held;
    for (unsigned round = 0;; ++round) {
      leased_buffer next = co_await s.recv(pool);
      if (next.empty()) break;
      got.append(next.view());
      held.push_back(std::move(next));
      if (held.size() >= 1 + round % 7) {  // give back all but one, from the middle outwards
        while (held.size() > 1) held.erase(held.begin() + static_cast<std::ptrdiff_t>(held.size() / 2));
      }
    }
    co_return got;
  }(pair.ours));
  writer.join();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes differ";
}

}  // namespace

INSTANTIATE_LEASED_RECV();
