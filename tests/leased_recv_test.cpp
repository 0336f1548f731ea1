// Leased receives from a buffer_pool, on every backend and on native with the buffer ring turned off (the
// one-recv-per-call path): byte-exact echo, exhaustion and recovery with no byte lost, end of stream, reset,
// cancellation while armed and while waiting for a buffer, and MSG_DONTWAIT.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <stop_token>
#include <string>
#include <system_error>
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

task<leased_buffer> recv_one(tcp_stream& s, buffer_pool& pool) { co_return co_await s.recv(pool); }

// Echoes by leased receives until the peer ends its side.
task<void> leased_echo(tcp_stream s, buffer_pool* pool) {
  for (;;) {
    leased_buffer chunk = co_await s.recv(*pool);
    if (chunk.empty()) break;
    co_await s.write_all(chunk);
  }
  co_await s.shutdown(SHUT_WR);
}

TEST_P(LeasedRecv, TcpEchoIsByteExactAndThePoolComesBackFull) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const std::string payload = pattern(3 << 20, 1);
  bool ring = false;
  std::uint32_t available_after = 0;
  std::string back = run([](const tcp_listener& l, const std::string& p, bool& ring,
                            std::uint32_t& available_after) -> task<std::string> {
    buffer_pool pool({.count = 16, .size = 4096});
    ring = pool.uses_ring();
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    uring::spawn(leased_echo(co_await l.accept(), &pool));
    auto [sent, echoed] = co_await uring::when_all(send_and_end(&client, &p), read_to_end(&client));
    for (int i = 0; i < 4; ++i) co_await uring::nop();  // the echo task finishes and drops its state
    available_after = pool.available();
    co_return echoed;
  }(listener, payload, ring, available_after));
  EXPECT_EQ(ring, expect_ring());
  EXPECT_TRUE(back == payload) << "echoed " << back.size() << " of " << payload.size()
                               << " bytes, or wrong bytes";
  EXPECT_EQ(available_after, 16u);
}

// A pool of 2 small buffers, a writer sending megabytes, a reader that asks for more while it holds every
// buffer: each such receive must wait for a return (natively the multishot ends with ENOBUFS and re-arms),
// and every byte arrives, in order.
TEST_P(LeasedRecv, ExhaustionAndRecoveryLoseNoByte) {
  stream_pair pair;
  const std::string payload = pattern(2 << 20, 7);
  std::thread writer([&] {
    write_fully(pair.peer.get(), payload);
    pair.peer.reset();  // end of stream
  });
  std::uint64_t exhausted = 0;
  std::string got = run([](tcp_stream& s, std::uint64_t& exhausted) -> task<std::string> {
    buffer_pool pool({.count = 2, .size = 64, .max_per_stream = 2});  // one stream may take them all
    std::string got = co_await read_holding_every_buffer(pool, [&] { return recv_one(s, pool); });
    exhausted = pool.exhausted();
    co_return got;
  }(pair.ours, exhausted));
  writer.join();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes differ";
  EXPECT_GT(exhausted, 0u) << "the pool never ran dry: the test did not exercise recovery";
}

TEST_P(LeasedRecv, EndOfStreamIsAnEmptyLeaseEveryTime) {
  stream_pair pair;
  write_fully(pair.peer.get(), "abc");
  ::shutdown(pair.peer.get(), SHUT_WR);
  run([](tcp_stream& s) -> task<void> {
    buffer_pool pool({.count = 4, .size = 16});
    std::string got;
    for (;;) {
      leased_buffer l = co_await s.recv(pool);
      if (l.empty()) break;
      got.append(l.view());
    }
    EXPECT_EQ(got, "abc");
    EXPECT_TRUE((co_await s.recv(pool)).empty());
    EXPECT_TRUE((co_await s.recv(pool)).empty());
    EXPECT_EQ(pool.available(), 4u);
  }(pair.ours));
}

TEST_P(LeasedRecv, ResetPeerFailsTheReceiveWithEconnreset) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  std::error_code code;
  std::string what;
  run([](const tcp_listener& l, std::error_code& out_code, std::string& out_what) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    auto waiting = [](tcp_stream& c, buffer_pool& p, std::error_code& err, std::string& text) -> task<void> {
      try {
        (void)co_await c.recv(p);
      } catch (const std::system_error& e) {
        err = e.code();
        text = e.what();
      }
    };
    auto reset = [](tcp_stream& srv) -> task<void> {
      co_await uring::nop();  // the receive is armed first
      ::linger hard{1, 0};    // close with RST instead of FIN
      ::setsockopt(srv.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
      co_await srv.close();
    };
    co_await uring::when_all(waiting(client, pool, out_code, out_what), reset(server));
  }(listener, code, what));
  EXPECT_EQ(code, std::error_code(ECONNRESET, std::system_category())) << what;
  EXPECT_EQ(what.rfind("recv: ", 0), 0u) << what;
}

// A stop request ends the armed receive with ECANCELED; data sent afterwards reaches the next receive.
TEST_P(LeasedRecv, CancelWhileArmedThenReceiveAgain) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::stop_source stop;
    auto waiting = [](tcp_stream& s, buffer_pool& p, std::stop_token t) -> task<int> {
      try {
        (void)co_await uring::with_stop_token(s.recv(p), t);
      } catch (const std::system_error& e) {
        co_return e.code().value();
      }
      co_return 0;
    };
    auto stopper = [](std::stop_source& src) -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      src.request_stop();
    };
    auto [err, unused] = co_await uring::when_all(waiting(s, pool, stop.get_token()), stopper(stop));
    EXPECT_EQ(err, ECANCELED);
    EXPECT_EQ(pool.available(), 4u);
    EXPECT_EQ(::write(peer, "after", 5), 5);
    std::string got;
    while (got.size() < 5) got.append((co_await s.recv(pool)).view());
    EXPECT_EQ(got, "after");
  }(pair.ours, pair.peer.get()));
}

// A stop request from another thread while the receive waits for a buffer to come back (pool exhausted).
TEST_P(LeasedRecv, CancelWhileWaitingForABufferFromAnotherThread) {
  stream_pair pair;
  write_fully(pair.peer.get(), pattern(1000, 3));
  run([](tcp_stream& s) -> task<void> {
    buffer_pool pool({.count = 1, .size = 16});
    leased_buffer only = co_await s.recv(pool);
    EXPECT_EQ(only.size(), 16u);
    std::stop_source stop;
    std::jthread stopper([&] { stop.request_stop(); });
    std::error_code code;
    try {
      (void)co_await uring::with_stop_token(s.recv(pool), stop.get_token());
    } catch (const std::system_error& e) {
      code = e.code();
    }
    stopper.join();
    // Without a buffer to receive into, only the stop can end the wait.
    EXPECT_EQ(code, std::error_code(ECANCELED, std::system_category()));
    only.reset();
    leased_buffer next = co_await s.recv(pool);  // recovers once the buffer is back
    EXPECT_EQ(next.view(), pattern(1000, 3).substr(16, next.size()));
  }(pair.ours));
}

// MSG_DONTWAIT on a socket operation fails with EAGAIN instead of waiting, on every backend (the no-ring
// path relies on it).
TEST_P(LeasedRecv, DontWaitReceiveOnAnEmptySocketSaysEagain) {
  stream_pair pair;
  auto r = run([](int fd) -> task<uring::io_result> {
    char buf[8];
    co_return co_await uring::detail::io_awaitable<std::size_t>(
        "recv",
        {.code = uring::detail::op_code::recv, .fd = fd, .len = 8, .op_flags = MSG_DONTWAIT, .addr = buf})
        .nothrow();
  }(pair.ours.fd()));
  EXPECT_EQ(r.res, -EAGAIN);
}

INSTANTIATE_LEASED_RECV();

}  // namespace
