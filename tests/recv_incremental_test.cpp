// Incremental pools (buffer_pool::options::incremental): many chunks share one buffer, each a sub-range that
// keeps its buffer out until returned. Natively (kernel 6.12+) a ring consumed by the kernel
// (IOU_PBUF_RING_INC), elsewhere carved in-process; the chunks, the bytes and the memory behaviour are the
// same on every backend, natively without the buffer ring and without the kernel's incremental rings.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::feature;
using uring::task;

std::vector<backend_config> incremental_backends() {
  return backends_and_native_without(
      {{feature::buf_ring, "native_no_buf_ring"}, {feature::recv_incremental, "native_no_recv_incremental"}});
}

class RecvIncremental : public backend_test {
 protected:
  // Whether this configuration's incremental pools are rings the kernel consumes incrementally.
  [[nodiscard]] bool expect_kernel_ring() const {
    const auto& k = uring::probed_kernel();
    return !emulated() && !options().disable.contains(feature::buf_ring) &&
           !options().disable.contains(feature::recv_incremental) && k.buf_ring && k.multishot_recv &&
           k.recv_incremental;
  }
};

// A few turns of the executor: completions in flight are reaped, and buffers given back are re-armed for.
task<void> settle() {
  for (int i = 0; i < 4; ++i) co_await uring::nop();
}

// Sends `data` from `fd` (a peer with room in its socket buffer: it does not block).
void send_now(int fd, const std::string& data) { write_fully(fd, data); }

// Whether `lease`'s bytes lie in [base, base + size).
bool within(const leased_buffer& lease, const char* base, std::size_t size) {
  return lease.data() >= base && lease.data() + lease.size() <= base + size;
}

// Forty 100-byte messages, each received before the next is sent (so each is a chunk of its own), all held:
// they fill one 4 KiB buffer one after another, where a plain pool takes forty buffers.
TEST_P(RecvIncremental, ManySmallMessagesShareOneBuffer) {
  stream_pair pair;
  struct result {
    std::vector<std::string> chunks;
    std::uint64_t filled = 0, receives = 0;
    std::uint32_t available = 0;
    bool ring = false, inc = false, bundles = true;
    bool contiguous = true;
  } r;
  run([](stream_pair& pair, result& r) -> task<void> {
    buffer_pool pool({.count = 8, .size = 4096, .max_per_stream = 64, .incremental = true});
    std::vector<leased_buffer> held;
    for (int i = 0; i < 40; ++i) {
      send_now(pair.peer.get(), pattern(100, static_cast<unsigned>(i)));
      held.push_back(co_await pair.ours.recv(pool));
      r.chunks.emplace_back(held.back().view());
      if (i > 0) r.contiguous = r.contiguous && held[i].data() == held[i - 1].data() + 100;
    }
    co_await settle();
    r.filled = pool.buffers_filled();
    r.receives = pool.receives();
    r.available = pool.available();
    r.ring = pool.uses_ring();
    r.inc = pool.incremental();
    r.bundles = pool.uses_bundles();
  }(pair, r));
  ASSERT_EQ(r.chunks.size(), 40u);
  for (std::size_t i = 0; i < r.chunks.size(); ++i) {
    EXPECT_EQ(r.chunks[i], pattern(100, static_cast<unsigned>(i))) << "chunk " << i;
  }
  EXPECT_TRUE(r.inc);
  EXPECT_FALSE(r.bundles) << "incremental pools take one buffer's rest per receive";
  EXPECT_EQ(r.ring, expect_kernel_ring());
  EXPECT_TRUE(r.contiguous) << "each chunk should continue where the previous one ended";
  EXPECT_EQ(r.receives, 40u);
  EXPECT_EQ(r.filled, 1u) << "4000 bytes fit one 4 KiB buffer";
  EXPECT_EQ(r.available, 7u);
}

// Eight 128-byte chunks fill a 1 KiB buffer exactly (natively the last completion lacks BUF_MORE): with one
// of them held the buffer stays out, and the next data goes elsewhere; with the last one back it returns.
TEST_P(RecvIncremental, ABufferGoesBackOnlyAfterItsLastLease) {
  stream_pair pair;
  struct result {
    std::uint32_t all_held = 0, one_held = 0, none_held = 0;
    bool same_buffer = true, next_elsewhere = false;
    std::string next;
  } r;
  run([](stream_pair& pair, result& r) -> task<void> {
    buffer_pool pool({.count = 4, .size = 1024, .max_per_stream = 64, .incremental = true});
    std::vector<leased_buffer> held;
    for (int i = 0; i < 8; ++i) {
      send_now(pair.peer.get(), pattern(128, static_cast<unsigned>(i)));
      held.push_back(co_await pair.ours.recv(pool));
      r.same_buffer = r.same_buffer && held[i].size() == 128 && within(held[i], held[0].data(), 1024);
    }
    const char* const base = held[0].data();
    co_await settle();
    r.all_held = pool.available();
    leased_buffer last = std::move(held[5]);
    held.clear();  // seven back, one held
    co_await settle();
    r.one_held = pool.available();
    send_now(pair.peer.get(), "after");
    leased_buffer next = co_await pair.ours.recv(pool);
    r.next = next.view();
    r.next_elsewhere = !within(next, base, 1024);
    next.reset();
    last.reset();
    co_await settle();
    r.none_held = pool.available();
  }(pair, r));
  EXPECT_TRUE(r.same_buffer);
  EXPECT_EQ(r.all_held, 3u);
  EXPECT_EQ(r.one_held, 3u) << "a buffer went back with a lease of it still out";
  EXPECT_EQ(r.next, "after");
  EXPECT_TRUE(r.next_elsewhere) << "data went into a buffer with a lease still out";
  EXPECT_EQ(r.none_held, 4u) << "the buffer did not come back with its last lease";
}

// 300 bytes, then 2000: the first chunks of the 2000 fill the rest of the first buffer (right after the 300),
// the rest go on in fresh buffers; no chunk crosses a buffer's end, and the bytes are all there in order.
TEST_P(RecvIncremental, ALargeMessageSpansTheBufferEnd) {
  stream_pair pair;
  const std::string first = pattern(300, 1), second = noise(2000, 2);
  struct result {
    std::string got;
    bool continues = false, fits = true;
  } r;
  run([](stream_pair& pair, const std::string& first, const std::string& second, result& r) -> task<void> {
    buffer_pool pool({.count = 4, .size = 1024, .max_per_stream = 64, .incremental = true});
    send_now(pair.peer.get(), first);
    std::vector<leased_buffer> held;
    held.push_back(co_await pair.ours.recv(pool));
    r.got.append(held.back().view());
    send_now(pair.peer.get(), second);
    while (r.got.size() < first.size() + second.size()) {
      held.push_back(co_await pair.ours.recv(pool));
      if (held.back().empty()) break;
      r.got.append(held.back().view());
      r.fits = r.fits && held.back().size() <= 1024;
    }
    r.continues = held.size() > 1 && held[1].data() == held[0].data() + held[0].size();
    // Every chunk lies in one of the pool's buffers, i.e. never across a 1 KiB boundary from its buffer's
    // start: the first two share one, and the chunk after the first buffer's end starts a buffer.
    std::size_t in_first = 0;
    for (const auto& l : held) {
      if (within(l, held[0].data(), 1024)) in_first += l.size();
    }
    r.fits = r.fits && in_first == 1024;
  }(pair, first, second, r));
  EXPECT_EQ(r.got, first + second);
  EXPECT_TRUE(r.continues) << "the second chunk should continue the first buffer";
  EXPECT_TRUE(r.fits) << "a chunk crossed its buffer's end, or the first buffer was not filled";
}

// Many laps of a small pool, leases returned out of order so that buffers come back out of order and
// partly used ones are shared with later chunks: every byte arrives once, in order.
TEST_P(RecvIncremental, ManyLapsWithLeasesReturnedOutOfOrderLoseNoByte) {
  stream_pair pair;
  const std::string payload = noise(static_cast<std::size_t>(scaled(4'000'000)), 11);
  std::thread writer([&] {
    write_fully(pair.peer.get(), payload);
    pair.peer.reset();  // end of stream
  });
  struct result {
    std::string got;
    std::uint64_t filled = 0, receives = 0;
    std::uint32_t available = 0;
  } r;
  run([](tcp_stream& s, result& r) -> task<void> {
    // At most 7 chunks held (each may fill a buffer when the writer outruns the reader): never all 8
    // buffers, which would leave this reader waiting for its own returns.
    buffer_pool pool({.count = 8, .size = 4096, .max_per_stream = 8, .incremental = true});
    std::vector<leased_buffer> held;
    for (unsigned round = 0;; ++round) {
      leased_buffer next = co_await s.recv(pool);
      if (next.empty()) break;
      r.got.append(next.view());
      held.push_back(std::move(next));
      if (held.size() >= 1 + round % 7) {  // give back all but one, from the middle outwards
        while (held.size() > 1) held.erase(held.begin() + static_cast<std::ptrdiff_t>(held.size() / 2));
      }
    }
    held.clear();
    co_await settle();
    r.filled = pool.buffers_filled();
    r.receives = pool.receives();
    r.available = pool.available();
  }(pair.ours, r));
  writer.join();
  EXPECT_EQ(r.got.size(), payload.size());
  EXPECT_EQ(std::hash<std::string>{}(r.got), std::hash<std::string>{}(payload)) << "bytes differ";
  EXPECT_EQ(r.available, 8u);
  EXPECT_LE(r.filled, r.receives);
}

// End of stream in a partly used buffer: the data, then an empty lease, every buffer back once the lease
// goes. A peer reset after part of a buffer: the bytes that came are a prefix of those sent, the receive
// ends (error or end of stream), and the pool serves the next connection whole.
TEST_P(RecvIncremental, EndOfStreamAndPeerResetMidBuffer) {
  struct result {
    std::string eof_data;
    bool eof_empty = false;
    std::uint32_t held_one = 0, after_eof = 0;
    std::string reset_got;
    int reset_error = 0;
    std::uint32_t after_reset = 0;
    std::string next_conn;
  } r;
  stream_pair a, b, c;
  run([](stream_pair& a, stream_pair& b, stream_pair& c, result& r) -> task<void> {
    buffer_pool pool({.count = 4, .size = 4096, .max_per_stream = 64, .incremental = true});
    send_now(a.peer.get(), "last words");
    a.peer.reset();
    leased_buffer data = co_await a.ours.recv(pool);
    r.eof_data = data.view();
    r.eof_empty = (co_await a.ours.recv(pool)).empty();
    co_await settle();
    r.held_one = pool.available();
    data.reset();
    co_await settle();
    r.after_eof = pool.available();

    send_now(b.peer.get(), std::string(100, 'r'));
    leased_buffer part = co_await b.ours.recv(pool);  // a buffer partly used, held
    r.reset_got.append(part.view());
    send_now(b.peer.get(), std::string(50, 's'));
    linger hard{1, 0};
    ::setsockopt(b.peer.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    b.peer.reset();  // RST
    for (;;) {
      recv_result next = co_await b.ours.recv(pool).nothrow();
      if (!next.ok()) {
        r.reset_error = next.error().value();
        break;
      }
      if (next.buffer.empty()) break;
      r.reset_got.append(next.buffer.view());
    }
    part.reset();
    co_await settle();
    r.after_reset = pool.available();

    send_now(c.peer.get(), pattern(5000, 4));
    c.peer.reset();
    for (;;) {
      leased_buffer l = co_await c.ours.recv(pool);
      if (l.empty()) break;
      r.next_conn.append(l.view());
    }
  }(a, b, c, r));
  EXPECT_EQ(r.eof_data, "last words");
  EXPECT_TRUE(r.eof_empty);
  EXPECT_EQ(r.held_one, 3u);
  EXPECT_EQ(r.after_eof, 4u);
  const std::string sent = std::string(100, 'r') + std::string(50, 's');
  EXPECT_EQ(sent.substr(0, r.reset_got.size()), r.reset_got) << "bytes after a reset are not a prefix";
  EXPECT_GE(r.reset_got.size(), 100u);
  EXPECT_TRUE(r.reset_error == 0 || r.reset_error == ECONNRESET) << r.reset_error;
  EXPECT_EQ(r.after_reset, 4u);
  EXPECT_EQ(r.next_conn, pattern(5000, 4));
}

// A share of 4 chunks: with four 100-byte chunks held (all in one buffer) the stream receives nothing
// more, though data waits; with one lease back it takes the next message.
TEST_P(RecvIncremental, AStreamAtItsShareStopsReceivingAndResumes) {
  stream_pair pair;
  struct result {
    std::uint64_t at_share = 0, resumed = 0;
    std::string fifth;
  } r;
  run([](stream_pair& pair, result& r) -> task<void> {
    buffer_pool pool({.count = 8, .size = 4096, .max_per_stream = 4, .incremental = true});
    std::vector<leased_buffer> held;
    for (int i = 0; i < 4; ++i) {
      send_now(pair.peer.get(), pattern(100, static_cast<unsigned>(i)));
      held.push_back(co_await pair.ours.recv(pool));
    }
    send_now(pair.peer.get(), "fifth");
    co_await settle();
    r.at_share = pool.receives();
    held.erase(held.begin());
    r.fifth = (co_await pair.ours.recv(pool)).view();
    r.resumed = pool.receives();
  }(pair, r));
  EXPECT_EQ(r.at_share, 4u) << "the stream received past its share";
  EXPECT_EQ(r.fifth, "fifth");
  EXPECT_EQ(r.resumed, 5u);
}

// Every buffer out with leases (a pool of 2 buffers of 256 bytes, filled by 512 bytes): the next receive
// waits for a return (counted in exhausted()), and takes the data once one comes back.
TEST_P(RecvIncremental, AnExhaustedPoolWaitsForAReturn) {
  stream_pair pair;
  const std::string sent = noise(512 + 100, 6);
  struct result {
    std::string got;
    std::uint64_t exhausted = 0;
  } r;
  run([](stream_pair& pair, const std::string& sent, result& r) -> task<void> {
    buffer_pool pool({.count = 2, .size = 256, .max_per_stream = 64, .incremental = true});
    send_now(pair.peer.get(), sent.substr(0, 512));
    std::vector<leased_buffer> held;
    std::size_t have = 0;
    while (have < 512) {
      held.push_back(co_await pair.ours.recv(pool));
      have += held.back().size();
    }
    send_now(pair.peer.get(), sent.substr(512));
    auto give_back = [](std::vector<leased_buffer>& held, std::string& got) -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      for (auto& l : held) got.append(l.view());
      held.clear();
    };
    auto receive = [](tcp_stream& s, buffer_pool& pool) -> task<leased_buffer> {
      co_return co_await s.recv(pool);
    };
    auto [gave, next] = co_await uring::when_all(give_back(held, r.got), receive(pair.ours, pool));
    r.got.append(next.view());
    while (r.got.size() < sent.size()) r.got.append((co_await pair.ours.recv(pool)).view());
    r.exhausted = pool.exhausted();
  }(pair, sent, r));
  EXPECT_EQ(r.got, sent);
  EXPECT_GE(r.exhausted, 1u);
}

// Leases outlive the stream and the pool: their bytes stay readable, and they free the memory when they go.
TEST_P(RecvIncremental, LeasesOutliveThePoolAndTheStream) {
  stream_pair pair;
  std::vector<std::string> seen;
  run([](stream_pair& pair, std::vector<std::string>& seen) -> task<void> {
    std::vector<leased_buffer> kept;
    {
      buffer_pool pool({.count = 4, .size = 4096, .max_per_stream = 64, .incremental = true});
      tcp_stream s = std::move(pair.ours);
      for (int i = 0; i < 3; ++i) {
        send_now(pair.peer.get(), pattern(64, static_cast<unsigned>(i)));
        kept.push_back(co_await s.recv(pool));
      }
      send_now(pair.peer.get(), "unread");  // perhaps received ahead: dropped with the stream
      co_await settle();
    }
    co_await settle();
    for (auto& l : kept) seen.emplace_back(l.view());
  }(pair, seen));
  ASSERT_EQ(seen.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(seen[i], pattern(64, i));
}

// Without the option a pool is what it was: a buffer per chunk, whatever the backend; with it, the ring is
// the kernel's incremental one exactly where the plan has it (not with URING_DISABLE=recv_incremental).
TEST_P(RecvIncremental, WithoutTheOptionOrTheFeatureTheOldPathIsTaken) {
  stream_pair pair;
  struct result {
    std::uint64_t filled = 0, receives = 0;
    bool plan_has = false, inc_ring = false;
  } r;
  run([](stream_pair& pair, result& r) -> task<void> {
    buffer_pool plain({.count = 8, .size = 4096, .max_per_stream = 8});
    std::vector<leased_buffer> held;
    for (int i = 0; i < 4; ++i) {
      send_now(pair.peer.get(), pattern(100, static_cast<unsigned>(i)));
      held.push_back(co_await pair.ours.recv(plain));
    }
    r.filled = plain.buffers_filled();
    r.receives = plain.receives();
    buffer_pool inc({.count = 8, .size = 4096, .incremental = true});
    r.inc_ring = inc.uses_ring();
    r.plan_has = uring::executor::current()->plan().recv_incremental;
  }(pair, r));
  EXPECT_EQ(r.receives, 4u);
  EXPECT_EQ(r.filled, 4u) << "a plain pool takes a buffer per chunk";
  EXPECT_EQ(r.plan_has, expect_kernel_ring());
  EXPECT_EQ(r.inc_ring, expect_kernel_ring());
}

INSTANTIATE_TEST_SUITE_P(Backends, RecvIncremental, ::testing::ValuesIn(incremental_backends()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
