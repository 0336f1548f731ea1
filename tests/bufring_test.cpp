// Leased receives from a buffer_pool and zero-copy sends, on every backend and on native with the buffer ring
// turned off (the one-recv-per-call path): byte-exact echo, exhaustion and recovery with no byte lost, end of
// stream, reset, cancellation while armed, leases that outlive their pool, streams dropped with data queued,
// idle connections holding no buffer, and no fd left behind.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
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

void write_fully(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << std::strerror(errno);
    done += static_cast<std::size_t>(n);
  }
}

// Every backend, plus native with `f` disabled (its fallback on a real ring), named `name`.
std::vector<uring::test::backend_config> backends_and_native_without(uring::feature f, const char* name) {
  auto configs = uring::test::all_backends();
  uring::executor_options without;
  without.backend = uring::backend_kind::native;
  without.disable = f;
  configs.push_back({name, without});
  return configs;
}

class LeasedRecv : public uring::test::backend_test {
 protected:
  // Whether this configuration's pools should be provided-buffer rings.
  [[nodiscard]] bool expect_ring() const {
    const auto& k = uring::probed_kernel();
    return !emulated() && !options().disable.contains(uring::feature::buf_ring) && k.buf_ring &&
           k.multishot_recv;
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
  EXPECT_TRUE(back == payload) << "echoed " << back.size() << " of " << payload.size()
                               << " bytes, or wrong bytes";
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
    buffer_pool pool({.count = 2, .size = 64, .max_per_stream = 2});  // one stream may take them all
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

// ---- timeouts, stop tokens and .nothrow() on the leased receive ----

// Bytes from a pseudo-random sequence: no period, so a lost, repeated or reordered chunk always shows.
std::string noise(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  for (auto& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return s;
}

// A receive awaited as a task, for when_all.
task<recv_result> as_task(uring::net::basic_recv_awaitable<false> r) { co_return co_await std::move(r); }

// An idle stream: the timed receive fails with ETIMEDOUT naming recv, holds no buffer, and the bytes sent
// afterwards reach the next receive.
TEST_P(LeasedRecv, TimeoutFailsWithEtimedoutAndTakesNoBytes) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::string what;
    std::error_code code;
    try {
      (void)co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(20));
    } catch (const std::system_error& e) {
      code = e.code();
      what = e.what();
    }
    EXPECT_EQ(code, std::error_code(ETIMEDOUT, std::system_category())) << what;
    EXPECT_EQ(what.rfind("recv: ", 0), 0u) << what;
    EXPECT_EQ(pool.available(), 4u);
    EXPECT_EQ(::write(peer, "after", 5), 5);
    std::string got;
    while (got.size() < 5)
      got.append((co_await uring::with_timeout(s.recv(pool), std::chrono::seconds(10))).view());
    EXPECT_EQ(got, "after");
  }(pair.ours, pair.peer.get()));
}

// .nothrow(): the chunk with its size, the error as -errno (no exception), 0 at end of stream.
TEST_P(LeasedRecv, NothrowYieldsTheChunkTheErrorOrEndOfStream) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    recv_result timed_out =
        co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(5));
    EXPECT_EQ(timed_out.res, -ETIMEDOUT);
    EXPECT_FALSE(timed_out);
    EXPECT_EQ(timed_out.error(), std::error_code(ETIMEDOUT, std::system_category()));
    EXPECT_TRUE(timed_out.buffer.empty());
    // The same forms compose either way round.
    recv_result again = co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(5)).nothrow();
    EXPECT_EQ(again.res, -ETIMEDOUT);
    std::stop_source stop;
    stop.request_stop();
    recv_result stopped = co_await uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token());
    EXPECT_EQ(stopped.res, -ECANCELED);
    EXPECT_EQ(::write(peer, "abc", 3), 3);
    ::shutdown(peer, SHUT_WR);
    std::string got;
    for (;;) {
      recv_result r = co_await s.recv(pool).nothrow();
      EXPECT_TRUE(r) << r.error().message();
      if (!r) break;
      EXPECT_EQ(static_cast<std::size_t>(r.res), r.buffer.size());
      if (r.res == 0) break;
      got.append(r.buffer.view());
    }
    EXPECT_EQ(got, "abc");
    EXPECT_EQ((co_await s.recv(pool).nothrow()).res, 0);
  }(pair.ours, pair.peer.get()));
}

// with_stop_token, stopped from another thread while the receive waits.
TEST_P(LeasedRecv, WithStopTokenFromAnotherThreadCancels) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::stop_source stop;
    auto stopper = [](std::stop_source* src) -> task<void> {
      co_await uring::nop();  // the receive waits first
      std::jthread([src] { src->request_stop(); }).join();
    };
    auto [r, unused] = co_await uring::when_all(
        as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())), stopper(&stop));
    EXPECT_EQ(r.res, -ECANCELED);
    EXPECT_EQ(pool.available(), 4u);
    EXPECT_EQ(::write(peer, "x", 1), 1);
    EXPECT_EQ((co_await s.recv(pool)).view(), "x");
  }(pair.ours, pair.peer.get()));
}

// Waiting for a buffer to come back (pool exhausted) also times out.
TEST_P(LeasedRecv, TimeoutWhileWaitingForABuffer) {
  stream_pair pair;
  const std::string sent = noise(1000, 4);
  write_fully(pair.peer.get(), sent);
  run([](tcp_stream& s, const std::string& sent) -> task<void> {
    buffer_pool pool({.count = 1, .size = 16});
    leased_buffer only = co_await s.recv(pool);
    recv_result r = co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(20));
    EXPECT_EQ(r.res, -ETIMEDOUT);
    std::string got(only.view());
    only.reset();
    while (got.size() < sent.size()) got.append((co_await s.recv(pool)).view());
    EXPECT_TRUE(got == sent) << "bytes differ";
  }(pair.ours, sent));
}

// A timed receive that got its chunk leaves the timer armed for its (later) deadline: a following receive
// with an earlier deadline still times out on time, and one without a deadline is not interrupted when
// the old timer fires.
TEST_P(LeasedRecv, DeadlinesOfEarlierReceivesDoNotLeak) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    EXPECT_EQ(::write(peer, "1", 1), 1);
    EXPECT_EQ((co_await uring::with_timeout(s.recv(pool), std::chrono::seconds(30))).view(), "1");
    const auto start = std::chrono::steady_clock::now();
    recv_result r = co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(20));
    EXPECT_EQ(r.res, -ETIMEDOUT);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
        << "waited for the old timer";
    // A 30 ms deadline that the receive meets, then a receive without one across that deadline.
    EXPECT_EQ(::write(peer, "2", 1), 1);
    EXPECT_EQ((co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(30))).view(), "2");
    auto late_writer = [](int fd) -> task<void> {
      co_await uring::sleep_for(std::chrono::milliseconds(80));  // past the deadline above
      EXPECT_EQ(::write(fd, "3", 1), 1);
    };
    auto [l, unused] = co_await uring::when_all(as_task(s.recv(pool).nothrow()), late_writer(peer));
    EXPECT_EQ(l.res, 1) << l.error().message();
    EXPECT_EQ(l.buffer.view(), "3");
  }(pair.ours, pair.peer.get()));
}

// The guarantee under fire: a stream of varied writes read by receives that keep being timed out (at once,
// or after a moment) and stopped (before they wait, while they wait, from another thread), with the pool
// small enough to run dry. Every byte arrives once, in order.
TEST_P(LeasedRecv, InterruptedReceivesLoseAndRepeatNoByteMidStream) {
  stream_pair pair;
  const std::string sent = noise(1 << 20, 99);
  struct counts {
    int timeouts = 0, stops = 0, chunks = 0;
  };
  counts n;
  std::string got = run([](tcp_stream& s, int peer, const std::string& sent, counts& n) -> task<std::string> {
    buffer_pool pool({.count = 8, .size = 512, .max_per_stream = 8});
    std::string got;
    std::size_t written = 0;
    std::vector<leased_buffer> held;  // some leases kept a while, so the pool runs dry now and then
    auto take = [&](recv_result r) {
      if (r.res > 0) {
        ++n.chunks;
        held.push_back(std::move(r.buffer));
        if (held.size() >= 6) {
          for (auto& l : held) got.append(l.view());
          held.clear();
        }
      } else if (r.res == -ETIMEDOUT) {
        ++n.timeouts;
      } else if (r.res == -ECANCELED) {
        ++n.stops;
      } else {
        ADD_FAILURE() << "recv: " << r.error().message() << " (" << r.res << ")";
      }
    };
    auto stop_later = [](std::stop_source* src, bool other_thread) -> task<void> {
      co_await uring::nop();
      if (other_thread) {
        std::jthread([src] { src->request_stop(); }).join();
      } else {
        src->request_stop();
      }
    };
    for (unsigned round = 0; written < sent.size(); ++round) {
      if (round % 3 != 2) {  // every third round nothing new is sent: interrupts then meet an empty socket
        const std::size_t piece = std::min<std::size_t>(sent.size() - written, 1 + (round * 7919u) % 3000);
        ssize_t w = ::send(peer, sent.data() + written, piece, MSG_DONTWAIT);
        if (w > 0) written += static_cast<std::size_t>(w);
      }
      // Nothing in flight (all read, all returned): a plain receive would wait forever; interrupts only.
      switch (round % 5) {
        case 0:
          take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::nanoseconds(0)));
          break;
        case 1:
          take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::microseconds(200)));
          break;
        case 2: {
          std::stop_source stop;
          stop.request_stop();
          take(co_await uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token()));
          break;
        }
        default: {
          std::stop_source stop;
          auto [r, unused] = co_await uring::when_all(
              as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())),
              stop_later(&stop, round % 5 == 4));
          take(std::move(r));
          break;
        }
      }
      if (round % 7 == 0) {
        for (auto& l : held) got.append(l.view());
        held.clear();
      }
      if (round % 10 == 9) {
        // Catch up with the writes, then interrupt receives that meet an empty stream (on every backend).
        for (auto& l : held) got.append(l.view());
        held.clear();
        while (got.size() < written) got.append((co_await s.recv(pool)).view());
        std::stop_source stop;
        auto [r, unused] = co_await uring::when_all(
            as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())),
            stop_later(&stop, false));
        take(std::move(r));
        take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::nanoseconds(0)));
      }
    }
    for (auto& l : held) got.append(l.view());
    held.clear();
    ::shutdown(peer, SHUT_WR);
    for (;;) {
      leased_buffer l = co_await s.recv(pool);
      if (l.empty()) break;
      got.append(l.view());
    }
    EXPECT_EQ(pool.available(), 8u);
    co_return got;
  }(pair.ours, pair.peer.get(), sent, n));
  EXPECT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent) << "bytes lost, repeated or reordered";
  EXPECT_GT(n.timeouts, 0);
  EXPECT_GT(n.stops, 0);
  EXPECT_GT(n.chunks, 0);
}

TEST(BufferPool, RejectsBadSizes) {
  uring::executor ex;
  EXPECT_THROW(buffer_pool(ex, {.count = 0}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.count = 40000}), std::invalid_argument);
  EXPECT_THROW(buffer_pool(ex, {.size = 0}), std::invalid_argument);
}

// ---- zero-copy sends ----

class ZeroCopySend : public uring::test::backend_test {};

task<void> write_all_zc_and_end(const tcp_stream* s, const std::string* payload) {
  co_await s->write_all_zc(*payload);
  co_await s->shutdown(SHUT_WR);
}

// Connects to `l`, sends `p` by `send` (then ends the stream) and yields what the accepted side read.
task<std::string> send_through(const tcp_listener& l, const std::string& p,
                               task<void> (*send)(const tcp_stream*, const std::string*)) {
  tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
  tcp_stream server = co_await l.accept();
  auto [sent, back] = co_await uring::when_all(send(&client, &p), read_to_end(&server));
  co_return back;
}

TEST_P(ZeroCopySend, WriteAllZcIsByteExactAndUsesTheOpWhereItCan) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const std::string payload = pattern(8 << 20, 5);
  uring::executor ex(options());
  std::string got = ex.run(send_through(listener, payload, write_all_zc_and_end));
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes differ";
  const bool zc =
      !emulated() && !options().disable.contains(uring::feature::send_zc) && uring::probed_kernel().send_zc;
  EXPECT_EQ(ex.stats().started(uring::op_kind::send_zc) > 0, zc);
  EXPECT_EQ(ex.stats().started(uring::op_kind::send) > 0, !zc);
}

// When send_zc returns, the buffer is the caller's again: overwriting it at once changes nothing sent.
TEST_P(ZeroCopySend, TheBufferIsFreeWhenTheSendReturns) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  constexpr int kRounds = 16;
  constexpr std::size_t kChunk = 64 << 10;
  std::string expected;
  for (int i = 0; i < kRounds; ++i) expected += pattern(kChunk, static_cast<unsigned>(i));
  std::string got = run([](const tcp_listener& l) -> task<std::string> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    auto sender = [](const tcp_stream* s) -> task<void> {
      std::string buf;
      for (int i = 0; i < kRounds; ++i) {
        buf = pattern(kChunk, static_cast<unsigned>(i));
        for (std::size_t done = 0; done < buf.size();) {
          done += co_await s->send_zc(std::string_view(buf).substr(done));
        }
        std::fill(buf.begin(), buf.end(), 'X');  // the kernel must be done with these pages
      }
      co_await s->shutdown(SHUT_WR);
    };
    auto [sent, back] = co_await uring::when_all(sender(&client), read_to_end(&server));
    co_return back;
  }(listener));
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "bytes differ: a buffer was overwritten while the kernel still read it";
}

// Unix-domain sockets refuse zero-copy (EOPNOTSUPP): the send goes as a copy, transparently, by write_all_zc
// and by a large write_all (which goes on by copy after the first refusal).
TEST_P(ZeroCopySend, UnixStreamsFallBackToACopy) {
  stream_pair pair;
  const std::string payload = pattern(1 << 20, 9) + noise(4 << 20, 23);
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = ::read(pair.peer.get(), buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<std::size_t>(n));
  });
  run([](tcp_stream s, const std::string& p) -> task<void> {
    const std::string_view all(p);
    co_await s.write_all_zc(all.substr(0, 1 << 20));
    co_await s.write_all(all.substr(1 << 20));
  }(std::move(pair.ours), payload));  // the stream closes at the end: the reader sees end of stream
  reader.join();
  EXPECT_TRUE(got == payload) << got.size() << " of " << payload.size() << " bytes, or wrong bytes";
}

TEST_P(ZeroCopySend, SendingToAClosedPeerNamesTheOperation) {
  stream_pair pair;
  pair.peer.reset();
  std::string what;
  auto code = run([](tcp_stream& s, std::string& what) -> task<std::error_code> {
    try {
      std::string big(1 << 20, 'z');
      co_await s.write_all_zc(big);
    } catch (const std::system_error& e) {
      what = e.what();
      co_return e.code();
    }
    co_return std::error_code{};
  }(pair.ours, what));
  EXPECT_EQ(code, std::error_code(EPIPE, std::system_category())) << what;
  EXPECT_EQ(what.rfind("send_zc: ", 0), 0u) << what;
}

// write_all picks by size: a large buffer goes by zero-copy sends where the executor has them, a small one by
// a copy; both arrive byte-exact.
TEST_P(ZeroCopySend, WriteAllSendsLargeBuffersZeroCopyAndSmallOnesByCopy) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const std::string large = noise((8 << 20) + 12345, 21);
  const std::string small = noise(1000, 22);
  for (const std::string* payload : {&large, &small}) {
    uring::executor ex(options());
    std::string got = ex.run(send_through(listener, *payload, send_and_end));
    EXPECT_EQ(got.size(), payload->size());
    EXPECT_TRUE(got == *payload) << "bytes differ";
    const bool zc = payload == &large && !emulated() &&
                    !options().disable.contains(uring::feature::send_zc) && uring::probed_kernel().send_zc;
    EXPECT_EQ(ex.stats().started(uring::op_kind::send_zc) > 0, zc) << payload->size() << " bytes";
  }
}

// A large write_all to a peer that does not read keeps write_all's limits on the zero-copy path: its
// timeout fails it with ETIMEDOUT, a stop (from another thread) with ECANCELED, naming write_all, although
// the kernel holds pages that only the peer's reading would release.
TEST_P(ZeroCopySend, LargeWriteAllTimesOutAndStops) {
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const std::string big(64 << 20, 'b');  // far more than the socket buffers hold
  run([](const tcp_listener& l, const std::string& big) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();  // never read
    std::string what;
    std::error_code code;
    try {
      co_await client.write_all(big, std::chrono::milliseconds(50));
    } catch (const std::system_error& e) {
      code = e.code();
      what = e.what();
    }
    EXPECT_EQ(code, std::error_code(ETIMEDOUT, std::system_category())) << what;
    EXPECT_EQ(what.rfind("write_all: ", 0), 0u) << what;
    // Natively the kernel held pages of the buffer that the peer never acknowledged: to get them back the
    // connection was reset. A new one for the stop.
    client = co_await tcp_stream::connect_to(l.local_address());
    server = co_await l.accept();
    std::stop_source stop;
    auto stopper = [](std::stop_source* src) -> task<void> {
      // Most likely the write is blocked by then; a stop before a step fails it the same way.
      co_await uring::sleep_for(std::chrono::milliseconds(20));
      std::jthread([src] { src->request_stop(); }).join();
    };
    auto writer = [](const tcp_stream* c, const std::string* b, std::stop_token t) -> task<std::error_code> {
      try {
        co_await c->write_all(*b, uring::net::no_timeout, t);
      } catch (const std::system_error& e) {
        co_return e.code();
      }
      co_return std::error_code{};
    };
    auto [stopped, unused] =
        co_await uring::when_all(writer(&client, &big, stop.get_token()), stopper(&stop));
    EXPECT_EQ(stopped, std::error_code(ECANCELED, std::system_category()));
  }(listener, big));
}

INSTANTIATE_TEST_SUITE_P(Backends, ZeroCopySend,
                         ::testing::ValuesIn(backends_and_native_without(uring::feature::send_zc,
                                                                         "native_no_send_zc")),
                         [](const auto& test_info) { return test_info.param.name; });

// ---- send_file: file -> pipe -> socket by splice ----

class SendFile : public uring::test::backend_test {};

// A temporary file holding `content`.
unique_fd file_with(const std::string& content) {
  unique_fd f = temp_file();
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::pwrite(f.get(), content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n <= 0) throw std::system_error(errno, std::system_category(), "pwrite");
    done += static_cast<std::size_t>(n);
  }
  return f;
}

task<std::size_t> send_file_and_end(const tcp_stream* s, int file, std::uint64_t offset, std::size_t len) {
  std::size_t n = co_await s->send_file(file, offset, len);
  co_await s->shutdown(SHUT_WR);
  co_return n;
}

TEST_P(SendFile, AMultiMegabyteFileArrivesByteExact) {
  const std::string content = pattern((6 << 20) + 12345, 11);
  unique_fd file = file_with(content);
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const long baseline = open_fd_count();
  struct result {
    std::size_t sent;
    std::string got;
  };
  auto r = run([](const tcp_listener& l, int f, std::size_t size) -> task<result> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    auto [sent, got] = co_await uring::when_all(send_file_and_end(&server, f, 0, size), read_to_end(&client));
    co_return result{sent, std::move(got)};
  }(listener, file.get(), content.size()));
  EXPECT_EQ(r.sent, content.size());
  EXPECT_EQ(r.got.size(), content.size());
  EXPECT_TRUE(r.got == content) << "bytes differ";
  EXPECT_EQ(open_fd_count(), baseline);  // its pipe is closed
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 0) << "send_file moved the file's position";
}

// A peer that is gone: send_file fails (EPIPE or ECONNRESET) and raises no SIGPIPE, on every backend (the
// process's default action for SIGPIPE, left in place here, would end the test).
TEST_P(SendFile, APeerThatIsGoneFailsWithoutSigpipe) {
  const std::string content = pattern(1 << 20, 5);
  unique_fd file = file_with(content);
  stream_pair pair;
  pair.peer.reset();
  const int err = run([](const tcp_stream& s, int f) -> task<int> {
    try {
      for (int i = 0; i < 64; ++i) co_await s.send_file(f, 0, 1 << 20);
    } catch (const std::system_error& e) {
      co_return e.code().value();
    }
    co_return 0;
  }(pair.ours, file.get()));
  EXPECT_TRUE(err == EPIPE || err == ECONNRESET) << "send_file to a closed peer: " << std::strerror(err);
}

// A range from an offset, and a length past the end of the file: what there is, and the count says so.
TEST_P(SendFile, SendsARangeAndStopsAtTheEndOfTheFile) {
  const std::string content = pattern(300000, 2);
  unique_fd file = file_with(content);
  stream_pair pair;
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = ::read(pair.peer.get(), buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<std::size_t>(n));
  });
  auto sent = run([](tcp_stream s, int f) -> task<std::array<std::size_t, 2>> {
    std::size_t a = co_await s.send_file(f, 1000, 5000);
    std::size_t b = co_await s.send_file(f, 250000, 1 << 20);  // 50000 bytes are left
    co_return std::array<std::size_t, 2>{a, b};
  }(std::move(pair.ours), file.get()));
  reader.join();
  EXPECT_EQ(sent[0], 5000u);
  EXPECT_EQ(sent[1], 50000u);
  EXPECT_TRUE(got == content.substr(1000, 5000) + content.substr(250000)) << got.size() << " bytes";
}

TEST_P(SendFile, ABadFileNamesTheOperation) {
  stream_pair pair;
  std::string what;
  run([](tcp_stream& s, std::string& what) -> task<void> {
    try {
      (void)co_await s.send_file(-1, 0, 100);
    } catch (const std::system_error& e) {
      what = e.what();
    }
  }(pair.ours, what));
  EXPECT_EQ(what.rfind("send_file: ", 0), 0u) << what;
}

INSTANTIATE_BACKENDS(SendFile);

INSTANTIATE_TEST_SUITE_P(Backends, LeasedRecv,
                         ::testing::ValuesIn(backends_and_native_without(uring::feature::buf_ring,
                                                                         "native_no_buf_ring")),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
