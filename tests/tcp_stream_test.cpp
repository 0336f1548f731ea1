// TCP streams over the ring, on every backend: echo, connect and read errors, end of stream, timeouts,
// cancellation by stop token and by close, short writes, and sockets left blocking.
#include <fcntl.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_fixture.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::test::echo_client;
using uring::test::echo_server;
using uring::test::error_of;
using uring::test::loopback;
using uring::test::Net;
using uring::test::pattern;

TEST_P(Net, TcpEchoRoundTrip) {
  auto listener = tcp_listener::bind(loopback());
  ASSERT_NE(listener.local_address().port(), 0);
  std::string back = run([](const tcp_listener& l) -> task<std::string> {
    uring::spawn(echo_server(l, 1));
    co_return co_await echo_client(l.local_address(), "hello, ring");
  }(listener));
  EXPECT_EQ(back, "hello, ring");
}

TEST_P(Net, RefusedConnectNamesTheOperation) {
  address gone = [] {
    auto listener = tcp_listener::bind(loopback());
    return listener.local_address();  // closed when it goes: nobody listens there any more
  }();
  std::string what;
  auto code = error_of([&] { run(tcp_stream::connect_to(gone)); }, &what);
  EXPECT_EQ(code, std::errc::connection_refused);
  EXPECT_EQ(what.rfind("connect: ", 0), 0u) << what;
}

TEST_P(Net, ResetPeerFailsTheReadWithEconnreset) {
  auto listener = tcp_listener::bind(loopback());
  auto r = run([](const tcp_listener& l) -> task<uring::io_result> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    ::linger hard{1, 0};  // close with RST instead of FIN
    ::setsockopt(server.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    co_await server.close();
    char buf[8];
    co_return co_await client.read_some(buf).nothrow();
  }(listener));
  EXPECT_EQ(r.res, -ECONNRESET);
}

TEST_P(Net, PeerShutdownReadsAsEndOfStream) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    co_await client.write_all(std::string_view("abc"));
    co_await client.shutdown(SHUT_WR);
    char buf[8];
    std::size_t n = co_await server.read_some(buf);
    EXPECT_EQ(std::string(buf, n), "abc");
    EXPECT_EQ(co_await server.read_some(buf), 0u);  // end of stream
    // read_exactly says how far it got.
    co_await server.write_all(std::string_view("12"));
    co_await server.shutdown(SHUT_WR);
    std::string what;
    try {
      co_await client.read_exactly(std::span(buf, 4));
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::no_message_available);
      what = e.what();
    }
    EXPECT_EQ(what, "read_exactly: end of stream after 2 of 4 bytes: No data available");
  }(listener));
}

TEST_P(Net, ReadsTimeOut) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    char buf[8];
    auto r = co_await uring::with_timeout(server.read_some(buf), 20ms).nothrow();
    EXPECT_EQ(r.res, -ETIMEDOUT);
    auto code = std::error_code();
    try {
      co_await uring::with_timeout(server.read_exactly(buf), 20ms);
    } catch (const std::system_error& e) {
      code = e.code();
    }
    EXPECT_EQ(code, std::errc::timed_out);
    // The socket still works afterwards.
    co_await client.write_all(std::string_view("late"));
    co_await uring::with_timeout(server.read_exactly(std::span(buf, 4)), 5s);
    EXPECT_EQ(std::string(buf, 4), "late");
  }(listener));
}

// A listener that never accepts and has a full queue drops further SYNs: connect waits, and times out.
TEST_P(Net, ConnectTimesOut) {
  uring::net::listen_options tiny;
  tiny.backlog = 0;
  auto listener = tcp_listener::bind(loopback(), tiny);
  auto result = run([](address to) -> task<std::pair<int, int>> {
    std::vector<tcp_stream> queued;
    for (int i = 0; i < 16; ++i) {
      auto s = tcp_stream::open(AF_INET);
      auto r = co_await uring::with_timeout(s.connect(to), 100ms).nothrow();
      if (r.res == -ETIMEDOUT) {
        std::error_code code;
        try {
          (void)co_await uring::with_timeout(tcp_stream::connect_to(to), 50ms);
        } catch (const std::system_error& e) {
          code = e.code();
        }
        co_return std::pair{i, code.value()};
      }
      EXPECT_EQ(r.res, 0);
      queued.push_back(std::move(s));
    }
    co_return std::pair{-1, 0};
  }(listener.local_address()));
  EXPECT_GE(result.first, 0) << "every connect completed: the accept queue never filled";
  EXPECT_EQ(result.second, ETIMEDOUT);
}

TEST_P(Net, StopTokenCancelsAReadFromAnotherCoroutine) {
  auto listener = tcp_listener::bind(loopback());
  auto r = run([](const tcp_listener& l) -> task<uring::io_result> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    std::stop_source stop;
    auto stopper = [](std::stop_source* s) -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      s->request_stop();
    };
    uring::spawn(stopper(&stop));
    char buf[8];
    co_return co_await uring::with_stop_token(server.read_some(buf), stop.get_token()).nothrow();
  }(listener));
  EXPECT_EQ(r.res, -ECANCELED);
}

TEST_P(Net, CloseCancelsTheSocketsOperationsInFlight) {
  auto listener = tcp_listener::bind(loopback());
  auto results = run([](const tcp_listener& l) -> task<std::vector<int>> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    std::vector<int> results;
    auto reader = [](const tcp_stream* s, std::vector<int>* out) -> task<void> {
      char buf[8];
      out->push_back((co_await s->read_some(buf).nothrow()).res);
    };
    uring::spawn(reader(&server, &results));
    uring::spawn(reader(&server, &results));
    for (int i = 0; i < 3; ++i) co_await uring::nop();  // both reads are parked
    co_await server.close();
    for (int i = 0; i < 3 && results.size() < 2; ++i) co_await uring::nop();
    // The peer sees the close: the reads no longer hold the socket open.
    char buf[8];
    EXPECT_EQ(co_await uring::with_timeout(client.read_some(buf), 5s), 0u);
    co_return results;
  }(listener));
  EXPECT_EQ(results, (std::vector<int>{-ECANCELED, -ECANCELED}));
}

TEST_P(Net, LargeWriteAllLoopsOnShortWrites) {
  auto listener = tcp_listener::bind(loopback());
  std::string payload = pattern(8 << 20, 3);
  std::string back = run([](const tcp_listener& l, const std::string* payload) -> task<std::string> {
    uring::spawn(echo_server(l, 1));
    co_return co_await echo_client(l.local_address(), *payload);
  }(listener, &payload));
  EXPECT_EQ(back.size(), payload.size());
  EXPECT_TRUE(back == payload);
}

// What awaiting `t` fails with (none: it succeeded).
task<std::error_code> failure_of(task<void> t) {
  std::error_code code;
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    code = e.code();
  }
  co_return code;
}

// Under a time limit or a stop token, a write_all the socket has room for goes by one send that cannot
// wait: natively no linked timeout is armed beside it (one SQE, not two), and the bytes all arrive.
TEST_P(Net, WriteAllWithRoomSendsWithoutItsLimitsCost) {
  auto listener = tcp_listener::bind(loopback());
  const bool native = !emulated();
  run([](const tcp_listener& l, bool counts_sqes) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    const uring::executor_stats& stats = uring::executor::current()->stats();
    std::stop_source source;
    const std::uint64_t before = stats.sqes;
    co_await uring::with_timeout(client.write_all(std::string_view("hello")), 5s);
    const std::uint64_t timed = stats.sqes;
    co_await uring::with_stop_token(client.write_all(std::string_view(" world")), source.get_token());
    const std::uint64_t stoppable = stats.sqes;
    if (counts_sqes) {
      EXPECT_EQ(timed - before, 1u);
      EXPECT_EQ(stoppable - timed, 1u);
    }
    char buf[11];
    co_await uring::with_timeout(server.read_exactly(buf), 5s);
    EXPECT_EQ(std::string_view(buf, sizeof buf), "hello world");
  }(listener, native));
}

// Limits that have passed before write_all starts fail it, and nothing goes out.
TEST_P(Net, WriteAllPastItsLimitsSendsNothing) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    std::stop_source source;
    source.request_stop();
    EXPECT_EQ(co_await failure_of(
                  uring::with_stop_token(client.write_all(std::string_view("x")), source.get_token())),
              std::errc::operation_canceled);
    EXPECT_EQ(co_await failure_of(uring::with_timeout(client.write_all(std::string_view("y")), 0ms)),
              std::errc::timed_out);
    char byte = 0;
    EXPECT_EQ(::recv(server.fd(), &byte, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
  }(listener));
}

// A socket with no room: the send that cannot wait takes nothing, and the rest waits within the limit.
TEST_P(Net, WriteAllIntoAFullSocketTimesOut) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    std::string block(64 * 1024, 'f');
    std::size_t filled = 0;
    for (;;) {  // the peer never reads: fill both sides' buffers
      const ssize_t n = ::send(client.fd(), block.data(), block.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) break;
      filled += static_cast<std::size_t>(n);
    }
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_GT(filled, 0u);
    EXPECT_EQ(co_await failure_of(uring::with_timeout(client.write_all(std::string_view("more")), 50ms)),
              std::errc::timed_out);
  }(listener));
}

// The emulation switches a blocking socket to non-blocking only for the accept or connect call itself.
TEST_P(Net, SocketsStayBlocking) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    auto client = tcp_stream::open(AF_INET);
    co_await client.connect(l.local_address());
    tcp_stream server = co_await l.accept();
    for (int fd : {l.fd(), client.fd(), server.fd()}) EXPECT_EQ(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  }(listener));
}

INSTANTIATE_BACKENDS(Net);

}  // namespace
