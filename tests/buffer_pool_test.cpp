// The buffer_pool behind leased receives, on every backend and on native with the buffer ring turned off:
// leases that outlive their pool and executor, streams dropped with data queued and executors shut down
// with a receive armed leak nothing, idle connections hold no buffer, a pool belongs to its executor, and
// bad sizes are refused.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <string>
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

// Leases keep the pool's memory: they stay readable after the stream, the pool and the executor are gone.
TEST_P(LeasedRecv, LeasesOutliveTheStreamThePoolAndTheExecutor) {
  std::vector<leased_buffer> kept;
  {
    stream_pair pair;
    write_fully(pair.peer.get(), "first-second");
    kept = run([](tcp_stream s) -> task<std::vector<leased_buffer>> {
      buffer_pool pool({.count = 2, .size = 6, .max_per_stream = 2});
      std::vector<leased_buffer> out;
      out.push_back(co_await s.recv(pool));
      out.push_back(co_await s.recv(pool));
      co_return out;  // the stream (with its armed receive) and the pool go first
    }(std::move(pair.ours)));
  }
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(std::string(kept[0].view()) + std::string(kept[1].view()), "first-second");
  kept.clear();  // the last lease frees the memory (ASan: no leak, no use after free)
}

// A stream dropped while chunks wait in it, and an executor shut down with a receive armed: buffers go back,
// nothing leaks, no fd is left open.
TEST_P(LeasedRecv, DroppingStreamsAndShuttingDownLeakNothing) {
  const long baseline = open_fd_count();
  {
    stream_pair a, b;
    write_fully(a.peer.get(), pattern(500, 1));
    uring::executor ex(options());
    ex.run([](tcp_stream sa, tcp_stream* sb) -> task<void> {
      buffer_pool pool({.count = 8, .size = 32});
      {
        tcp_stream dropped = std::move(sa);
        leased_buffer first = co_await dropped.recv(pool);
        EXPECT_EQ(first.size(), 32u);
        for (int i = 0; i < 3; ++i) co_await uring::nop();  // more chunks queue up in the stream
      }
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      EXPECT_EQ(pool.available(), 8u);
      // sb's receive stays armed when this task ends; the executor then shuts down around it.
      auto armed = [](tcp_stream* s, buffer_pool* p) -> task<void> { (void)co_await s->recv(*p); };
      uring::spawn(armed(sb, &pool));
      co_await uring::nop();
      co_await uring::nop();
    }(std::move(a.ours), &b.ours));
  }
  EXPECT_EQ(open_fd_count(), baseline);
}

// Many idle connections with a receive armed hold no buffer; data on each then arrives on each.
TEST_P(LeasedRecv, IdleConnectionsHoldNoBuffer) {
  constexpr int kConns = 64;
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  run([](const tcp_listener& l) -> task<void> {
    buffer_pool pool({.count = 8, .size = 128});
    std::vector<tcp_stream> clients;
    std::vector<tcp_stream> servers;
    for (int i = 0; i < kConns; ++i) {
      clients.push_back(co_await tcp_stream::connect_to(l.local_address()));
      servers.push_back(co_await l.accept());
    }
    int received = 0;
    auto reader = [](tcp_stream* s, buffer_pool* p, int* received) -> task<void> {
      leased_buffer b = co_await s->recv(*p);
      if (b.view() == "ping") ++*received;
    };
    for (auto& s : servers) uring::spawn(reader(&s, &pool, &received));
    for (int i = 0; i < 4; ++i) co_await uring::nop();
    EXPECT_EQ(pool.available(), 8u);  // every receive armed, none holding a buffer
    for (auto& c : clients) co_await c.write_all(std::string_view("ping"));
    while (received < kConns) co_await uring::nop();
    EXPECT_EQ(pool.available(), 8u);
  }(listener));
}

// Receiving with a pool from an executor other than the pool's is refused, not a data race.
TEST_P(LeasedRecv, APoolIsBoundToItsExecutor) {
  uring::executor other(options());
  buffer_pool pool(other, {.count = 2, .size = 16});
  stream_pair pair;
  std::string what;
  run([](tcp_stream& s, buffer_pool& p, std::string& what) -> task<void> {
    try {
      (void)co_await s.recv(p);
    } catch (const std::logic_error& e) {
      what = e.what();
    }
  }(pair.ours, pool, what));
  EXPECT_EQ(what, "recv: the buffer pool belongs to another executor");
}

TEST(BufferPool, RejectsBadSizes) {
  uring::executor ex;
  EXPECT_THROW(buffer_pool(ex, {.count = 0}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.count = 40000}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.size = 0}), std::invalid_argument);
}

INSTANTIATE_LEASED_RECV();

}  // namespace
