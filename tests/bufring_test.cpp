// Leased receives from a buffer_pool, on every backend and on native with the buffer ring turned off (the
// one-recv-per-call path): byte-exact echo, exhaustion and recovery with no byte lost, end of stream,
// reset, cancellation while armed, leases that outlive their pool, streams dropped with data queued, idle
// connections holding no buffer, and no fd left behind.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;

// A connected unix stream pair: ours (for the executor) and the peer's plain fd (for a thread).
struct stream_pair {
  tcp_stream ours;
  unique_fd peer;
  stream_pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::system_error(errno, std::system_category(), "socketpair");
    }
    ours = tcp_stream(fds[0]);
    peer.reset(fds[1]);
  }
};

void write_fully(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << std::strerror(errno);
    done += static_cast<std::size_t>(n);
  }
}

// Backends, plus native with the buffer ring disabled: the one-recv-per-call path on a real ring.
std::vector<uring::test::backend_config> pool_backends() {
  auto configs = uring::test::all_backends();
  uring::executor_options no_ring;
  no_ring.backend = uring::backend_kind::native;
  no_ring.disable = uring::feature::buf_ring;
  configs.push_back({"native_no_buf_ring", no_ring});
  return configs;
}

class LeasedRecv : public uring::test::backend_test {
 protected:
  // Whether this configuration's pools should be provided-buffer rings.
  [[nodiscard]] bool expect_ring() const {
    const auto& k = uring::probed_kernel();
    return !emulated() && !options().disable.contains(uring::feature::buf_ring) && k.buf_ring && k.multishot_recv;
  }
};

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
  EXPECT_TRUE(back == payload) << "echoed " << back.size() << " of " << payload.size() << " bytes, or wrong bytes";
  EXPECT_EQ(available_after, 16u);
}

// Returns the held leases after a few turns, appending their bytes in order.
task<void> give_back_later(std::vector<leased_buffer>* held, std::string* got) {
  for (int i = 0; i < 3; ++i) co_await uring::nop();
  for (auto& l : *held) got->append(l.view());
  held->clear();
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
    buffer_pool pool({.count = 2, .size = 64});
    std::string got;
    std::vector<leased_buffer> held;
    for (;;) {
      leased_buffer next;
      if (held.size() == pool.count()) {
        auto [given, chunk] = co_await uring::when_all(give_back_later(&held, &got), recv_one(s, pool));
        next = std::move(chunk);
      } else {
        next = co_await s.recv(pool);
      }
      if (next.empty()) break;
      EXPECT_LE(next.size(), 64u);
      held.push_back(std::move(next));
    }
    for (auto& l : held) got.append(l.view());
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
  run([](const tcp_listener& l, std::error_code& code, std::string& what) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    auto waiting = [](tcp_stream& c, buffer_pool& p, std::error_code& code, std::string& what) -> task<void> {
      try {
        (void)co_await c.recv(p);
      } catch (const std::system_error& e) {
        code = e.code();
        what = e.what();
      }
    };
    auto reset = [](tcp_stream& srv) -> task<void> {
      co_await uring::nop();  // the receive is armed first
      ::linger hard{1, 0};    // close with RST instead of FIN
      ::setsockopt(srv.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
      co_await srv.close();
    };
    co_await uring::when_all(waiting(client, pool, code, what), reset(server));
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
        (void)co_await s.recv(p, t);
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
      (void)co_await s.recv(pool, stop.get_token());
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

// Leases keep the pool's memory: they stay readable after the stream, the pool and the executor are gone.
TEST_P(LeasedRecv, LeasesOutliveTheStreamThePoolAndTheExecutor) {
  std::vector<leased_buffer> kept;
  {
    stream_pair pair;
    write_fully(pair.peer.get(), "first-second");
    kept = run([](tcp_stream s) -> task<std::vector<leased_buffer>> {
      buffer_pool pool({.count = 2, .size = 6});
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
  const int baseline = open_fd_count();
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

// MSG_DONTWAIT on a socket operation fails with EAGAIN instead of waiting, on every backend (the no-ring
// path relies on it).
TEST_P(LeasedRecv, DontWaitReceiveOnAnEmptySocketSaysEagain) {
  stream_pair pair;
  auto r = run([](int fd) -> task<uring::io_result> {
    char buf[8];
    co_return co_await uring::detail::io_awaitable<std::size_t>(
        "recv", {.code = uring::detail::op_code::recv, .fd = fd, .len = 8, .op_flags = MSG_DONTWAIT, .addr = buf})
        .nothrow();
  }(pair.ours.fd()));
  EXPECT_EQ(r.res, -EAGAIN);
}

TEST(BufferPool, RejectsBadSizes) {
  uring::executor ex;
  EXPECT_THROW(buffer_pool(ex, {.count = 0}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.count = 40000}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.size = 0}), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Backends, LeasedRecv, ::testing::ValuesIn(pool_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
