// Sockets over the ring, on every backend: addresses, TCP and unix streams, multishot accept, UDP, errors,
// timeouts, cancellation, and no fd left behind.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "signal_storm.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::net::udp_socket;
using uring::test::open_fd_count;
using uring::test::pattern;
using uring::test::read_to_end;
using uring::test::send_and_end;

// Raises the soft RLIMIT_NOFILE to at least `n` for the test's lifetime.
class nofile_limit {
 public:
  explicit nofile_limit(rlim_t n) {
    ::getrlimit(RLIMIT_NOFILE, &old_);
    rlimit raised = old_;
    raised.rlim_cur = std::max<rlim_t>(old_.rlim_cur, std::min<rlim_t>(n, old_.rlim_max));
    ::setrlimit(RLIMIT_NOFILE, &raised);
    enough_ = raised.rlim_cur >= n;
  }
  ~nofile_limit() { ::setrlimit(RLIMIT_NOFILE, &old_); }
  [[nodiscard]] bool enough() const { return enough_; }

 private:
  rlimit old_{};
  bool enough_ = false;
};

address loopback() { return address::parse("127.0.0.1:0"); }

// Echoes until the peer ends its side, then closes.
task<void> echo_connection(tcp_stream s) {
  std::array<char, 4096> buf;
  for (;;) {
    std::size_t n = co_await s.read_some(buf);
    if (n == 0) break;
    co_await s.write_all(std::span(buf.data(), n));
  }
}

// Accepts `count` connections through one multishot accept and echoes on each.
task<void> echo_server(const tcp_listener& l, int count) {
  auto connections = l.accept_all();
  for (int i = 0; i < count; ++i) uring::spawn(echo_connection(co_await connections.next()));
}

// Sends `payload` and ends its side while it reads everything back (both at once: an echo of more than
// the socket buffers hold would otherwise stall both ends).
task<std::string> echo_client(address to, std::string payload) {
  tcp_stream s = co_await tcp_stream::connect_to(to);
  auto [sent, back] = co_await uring::when_all(send_and_end(&s, &payload), read_to_end(&s));
  co_return back;
}

template <class F>
std::error_code error_of(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const std::system_error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return {};
}

TEST(Address, ParsesAndFormatsEachFamily) {
  address v4 = address::parse("127.0.0.1:8080");
  EXPECT_EQ(v4.family(), AF_INET);
  EXPECT_EQ(v4.port(), 8080);
  EXPECT_EQ(v4.to_string(), "127.0.0.1:8080");
  EXPECT_EQ(v4.size(), sizeof(sockaddr_in));

  address v6 = address::parse("[::1]:443");
  EXPECT_EQ(v6.family(), AF_INET6);
  EXPECT_EQ(v6.port(), 443);
  EXPECT_EQ(v6.to_string(), "[::1]:443");
  EXPECT_EQ(address::ip("fe80::1", 7).to_string(), "[fe80::1]:7");
  EXPECT_EQ(address::ip("10.1.2.3", 0).with_port(99).to_string(), "10.1.2.3:99");

  address path = address::parse("unix:/tmp/some.sock");
  EXPECT_TRUE(path.is_unix());
  EXPECT_EQ(path.port(), 0);
  EXPECT_EQ(path.to_string(), "unix:/tmp/some.sock");
  address abstract = address::parse("unix:@hidden");
  EXPECT_EQ(abstract.to_string(), "unix:@hidden");
  EXPECT_NE(abstract, path);
  EXPECT_EQ(address::parse("127.0.0.1:8080"), v4);
  EXPECT_EQ(address().to_string(), "");
}

TEST(Address, RejectsBadInputSayingWhatIsWrong) {
  auto message = [](std::string_view text) -> std::string {
    try {
      (void)address::parse(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message("127.0.0.1"),
            "address \"127.0.0.1\": missing ':port' (use host:port, [v6]:port or unix:path)");
  EXPECT_EQ(message("127.0.0.1:"), "address \"127.0.0.1:\": missing port after ':'");
  EXPECT_EQ(message("127.0.0.1:http"), "address \"127.0.0.1:http\": the port is not a number");
  EXPECT_EQ(message("127.0.0.1:70000"), "address \"127.0.0.1:70000\": the port is out of range (0-65535)");
  EXPECT_EQ(message("300.1.1.1:80"), "address \"300.1.1.1:80\": not an IPv4 address (a.b.c.d)");
  EXPECT_EQ(message("localhost:80"), "address \"localhost:80\": not an IPv4 address (a.b.c.d)");
  EXPECT_EQ(message("::1:80"), "address \"::1:80\": an IPv6 address with a port needs brackets: [addr]:port");
  EXPECT_EQ(message("[::1"), "address \"[::1\": missing ']' after an IPv6 address");
  EXPECT_EQ(message("[::1]"), "address \"[::1]\": missing ':port' after ']'");
  EXPECT_EQ(message("[zz::1]:80"), "address \"[zz::1]:80\": not an IPv6 address inside [ ]");
  EXPECT_EQ(message("unix:"), "address \"\": empty unix socket path");
  EXPECT_EQ(message("unix:" + std::string(120, 'x')).find("longer than 107 bytes") != std::string::npos,
            true);
  EXPECT_EQ(message(""), "address \"\": empty address");
  // A NUL byte would end the text for inet_pton and the kernel, which would take a prefix (found by
  // fuzz/address_fuzz): refused. In an abstract name it is just a byte, and round-trips.
  using namespace std::string_literals;
  EXPECT_EQ(message("1.2.3.4\0junk:80"s), "address \"1.2.3.4"s) << "what() ends at the NUL";
  EXPECT_NE(message("unix:/tmp/a\0b"s), "(accepted)");
  EXPECT_THROW((void)address::ip("::1\0zz"s, 80), std::invalid_argument);
  address abstract_nul = address::parse("unix:@a\0b"s);
  EXPECT_EQ(abstract_nul.to_string(), "unix:@a\0b"s);
  EXPECT_EQ(address::parse(abstract_nul.to_string()), abstract_nul);
}

// Every test checks that no fd is left open (fd_leak.hpp, for all tests).
class Net : public uring::test::storm_backend_test {};

// The long runs, again inside a SIGALRM storm (signal_storm.hpp): EINTR anywhere changes no result.
class NetSoak : public Net {};

TEST_P(Net, TcpEchoRoundTrip) {
  auto listener = tcp_listener::bind(loopback());
  ASSERT_NE(listener.local_address().port(), 0);
  std::string back = run([](const tcp_listener& l) -> task<std::string> {
    uring::spawn(echo_server(l, 1));
    co_return co_await echo_client(l.local_address(), "hello, ring");
  }(listener));
  EXPECT_EQ(back, "hello, ring");
}

TEST_P(Net, SingleAcceptAndPeerAddresses) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    auto accept_one = [](const tcp_listener* l) -> task<tcp_stream> { co_return co_await l->accept(); };
    auto [server_side, client_side] =
        co_await uring::when_all(accept_one(&l), tcp_stream::connect_to(l.local_address()));
    EXPECT_EQ(server_side.peer_address(), client_side.local_address());
    EXPECT_EQ(client_side.peer_address(), l.local_address());
    co_await client_side.write_all(std::string_view("x"));
    char c = 0;
    co_await server_side.read_exactly(std::span(&c, 1));
    EXPECT_EQ(c, 'x');
    co_await server_side.close();
    co_await client_side.close();
    EXPECT_FALSE(server_side.is_open());
  }(listener));
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
      co_await server.read_exactly(buf, 20ms);
    } catch (const std::system_error& e) {
      code = e.code();
    }
    EXPECT_EQ(code, std::errc::timed_out);
    // The socket still works afterwards.
    co_await client.write_all(std::string_view("late"));
    co_await server.read_exactly(std::span(buf, 4), 5s);
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
          (void)co_await tcp_stream::connect_to(to, 50ms);
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

TEST_P(Net, CloseOfAListenerEndsItsAcceptStream) {
  auto listener = tcp_listener::bind(loopback());
  auto code = run([](tcp_listener* l) -> task<std::error_code> {
    auto connections = l->accept_all();
    auto closer = [](tcp_listener* l) -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      co_await l->close();
    };
    uring::spawn(closer(l));
    try {
      (void)co_await connections.next();
    } catch (const std::system_error& e) {
      co_return e.code();
    }
    co_return std::error_code();
  }(&listener));
  EXPECT_EQ(code, std::errc::operation_canceled);
}

// A stop request from another thread reaches the multishot accept through the owner's mailbox, whenever
// it comes (before the request is armed, or while it waits).
TEST_P(Net, AcceptStreamNextFollowsAStopTokenFromAnotherThread) {
  auto listener = tcp_listener::bind(loopback());
  for (int round = 0; round < 20; ++round) {
    std::stop_source stop;
    std::thread stopper([&] { stop.request_stop(); });
    auto code = run([](const tcp_listener& l, std::stop_token t) -> task<std::error_code> {
      auto connections = l.accept_all();
      try {
        (void)co_await connections.next(t);
      } catch (const std::system_error& e) {
        co_return e.code();
      }
      co_return std::error_code();
    }(listener, stop.get_token()));
    stopper.join();
    EXPECT_EQ(code, std::errc::operation_canceled);
  }
}

// A time limit on next(): race it against a sleep; the loser's stop token cancels the accept, and the
// stream takes the next connection afterwards.
TEST_P(Net, AcceptStreamNextRacesASleepWithWhenAny) {
  auto listener = tcp_listener::bind(loopback());
  auto winner = run([](const tcp_listener& l) -> task<std::size_t> {
    auto connections = l.accept_all();
    auto take = [](uring::net::accept_stream* c) -> task<void> { (void)co_await c->next(); };
    auto sleep = []() -> task<void> { co_await uring::sleep_for(20ms); };
    auto first = co_await uring::when_any(take(&connections), sleep());  // the loser saw ECANCELED
    auto client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream s = co_await connections.next();
    EXPECT_EQ(s.peer_address(), client.local_address());
    co_return first.index();
  }(listener));
  EXPECT_EQ(winner, 1u);
}

// The error an accept fails with ({} if it yields a connection).
task<std::error_code> accept_error(uring::net::accept_stream::next_awaitable next) {
  try {
    (void)co_await std::move(next);
  } catch (const std::system_error& e) {
    co_return e.code();
  }
  co_return std::error_code();
}

// with_timeout(next(), d): a wait that sees no connection in time fails ETIMEDOUT, and only that wait:
// the multishot accept keeps running, so the connection that comes later is taken by the next next().
TEST_P(Net, AcceptNextTimesOutAndTheStreamKeepsAccepting) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    auto connections = l.accept_all();
    auto code = co_await accept_error(uring::with_timeout(connections.next(), 20ms));
    EXPECT_EQ(code, std::errc::timed_out);
    auto client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream s = co_await uring::with_timeout(connections.next(), 5s);
    EXPECT_EQ(s.peer_address(), client.local_address());
    // A long deadline's timer is still armed: a shorter one after it must still fire on time (the timer is
    // cancelled and re-armed), and a connection already waiting beats a zero timeout.
    code = co_await accept_error(uring::with_timeout(connections.next(), 10ms));
    EXPECT_EQ(code, std::errc::timed_out);
    auto second = co_await tcp_stream::connect_to(l.local_address());
    co_await uring::sleep_for(10ms);  // let the accept complete
    tcp_stream t = co_await uring::with_timeout(connections.next(), 0ms);
    EXPECT_EQ(t.peer_address(), second.local_address());
    // A stop still wins over a pending timeout.
    std::stop_source stop;
    stop.request_stop();
    code = co_await accept_error(uring::with_timeout(connections.next(stop.get_token()), 5s));
    EXPECT_EQ(code, std::errc::operation_canceled);
  }(listener));
}

// A stop from another thread reaches the owner as a posted cancel, which may arrive after its next() got
// a connection: it must not cancel the following next() calls, which wait under no token at all.
TEST_P(Net, ALateStopFromAnotherThreadNeverCancelsALaterAccept) {
  const int kRounds = static_cast<int>(std::max(20L, uring::test::scaled(300)));
  auto listener = tcp_listener::bind(loopback());
  int spurious = run([](const tcp_listener& l, int rounds) -> task<int> {
    auto connections = l.accept_all();
    std::vector<tcp_stream> clients, accepted;
    int connected = 0;
    auto connect_three = [](address to, std::vector<tcp_stream>* out, int* count) -> task<void> {
      for (int k = 0; k < 3; ++k) {
        out->push_back(co_await tcp_stream::connect_to(to));
        ++*count;
      }
    };
    for (int i = 0; i < rounds; ++i) {
      std::stop_source stop;
      uring::spawn(connect_three(l.local_address(), &clients, &connected));  // starts once we wait below
      std::thread stopper([&stop] { stop.request_stop(); });                 // races the first next()
      int got = 0;
      try {
        accepted.push_back(co_await connections.next(stop.get_token()));
        ++got;
      } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_canceled);
      }
      bool failed = false;
      try {
        while (got < 3) {
          co_await uring::nop();  // a turn in which a late posted cancel could arrive
          accepted.push_back(co_await connections.next());
          ++got;
        }
      } catch (const std::system_error& e) {
        ADD_FAILURE() << "round " << i << ": an accept nobody stopped failed: " << e.what();
        failed = true;
      }
      stopper.join();
      if (failed) co_return 1;
      while (connected < 3 * (i + 1)) co_await uring::nop();
      if (clients.size() > 300) clients.clear(), accepted.clear();
    }
    co_return 0;
  }(listener, kRounds));
  EXPECT_EQ(spurious, 0);
}

TEST_P(NetSoak, AcceptStreamTakesAThousandConnections) {
  nofile_limit limit(4096);
  if (!limit.enough()) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below 4096";
  const int kCount = 1000;
  auto listener = tcp_listener::bind(loopback());
  auto [accepted, connected] =
      run([](const tcp_listener& l, int count) -> task<std::pair<std::set<int>, std::set<int>>> {
        std::set<int> accepted_ports, connected_ports;
        std::vector<tcp_stream> keep;
        auto client = [](address to, int count, std::set<int>* ports,
                         std::vector<tcp_stream>* keep) -> task<void> {
          for (int i = 0; i < count; ++i) {
            tcp_stream s = co_await tcp_stream::connect_to(to);
            ports->insert(s.local_address().port());
            keep->push_back(std::move(s));
          }
        };
        uring::spawn(client(l.local_address(), count, &connected_ports, &keep));
        auto connections = l.accept_all();
        std::vector<tcp_stream> streams;
        for (int i = 0; i < count; ++i) {
          streams.push_back(co_await connections.next());
          accepted_ports.insert(streams.back().peer_address().port());
        }
        while (static_cast<int>(keep.size()) < count) co_await uring::nop();
        co_return std::pair{accepted_ports, connected_ports};
      }(listener, kCount));
  EXPECT_EQ(accepted.size(), static_cast<std::size_t>(kCount));
  EXPECT_EQ(accepted, connected);
}

// Without a free fd the multishot accept ends with EMFILE (a completion without IORING_CQE_F_MORE); next()
// throws it, and the next call re-arms and takes the connection that waited in the backlog.
TEST_P(Net, AcceptStreamRearmsAfterTheRequestEnds) {
  auto listener = tcp_listener::bind(loopback());
  uring::test::unique_fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  address to = listener.local_address();
  ASSERT_EQ(::connect(client.get(), to.data(), to.size()), 0);  // waits in the backlog
  rlimit old{};
  ::getrlimit(RLIMIT_NOFILE, &old);
  auto codes = run([](const tcp_listener& l, rlimit old) -> task<std::vector<std::string>> {
    std::vector<std::string> seen;
    auto connections = l.accept_all();
    // While the limit is tight nothing may check a type for the first time: UBSan's first check of each
    // (class, vptr) makes a pipe, which fails with EMFILE then. So the loop turns once and the awaitable
    // is made before, and the limit is restored before the exception is looked at.
    co_await uring::nop();
    auto first = connections.next();
    std::string warm = std::system_error(EMFILE, std::system_category(), "warm up").what();
    // The lowest free fd number becomes the limit: no fd is left to accept into.
    int probe = ::dup(0);
    ::close(probe);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(probe);
    ::setrlimit(RLIMIT_NOFILE, &tight);
    try {
      (void)co_await std::move(first);
      seen.push_back("accepted");
    } catch (const std::system_error& e) {
      ::setrlimit(RLIMIT_NOFILE, &old);
      seen.push_back(e.what());
    }
    ::setrlimit(RLIMIT_NOFILE, &old);
    tcp_stream s = co_await connections.next();
    seen.push_back(s.is_open() ? "re-armed" : "closed");
    co_return seen;
  }(listener, old));
  ::setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], "accept: Too many open files");
  EXPECT_EQ(codes[1], "re-armed");
}

TEST_P(Net, AcceptStreamDestroyedWithConnectionsWaitingClosesThem) {
  auto listener = tcp_listener::bind(loopback());
  run([](const tcp_listener& l) -> task<void> {
    std::vector<tcp_stream> clients;
    {
      auto connections = l.accept_all();
      clients.push_back(co_await tcp_stream::connect_to(l.local_address()));
      (void)co_await connections.next();
      for (int i = 0; i < 3; ++i) clients.push_back(co_await tcp_stream::connect_to(l.local_address()));
      for (int i = 0; i < 5; ++i) co_await uring::nop();  // the stream holds them, untaken
    }
    // The server side of each is closed: every client reads end of stream.
    for (auto& c : clients) {
      char buf[4];
      EXPECT_EQ(co_await uring::with_timeout(c.read_some(buf), 5s), 0u);
    }
  }(listener));
}

TEST_P(Net, ExecutorShutdownWithAnArmedAcceptStreamLeaksNothing) {
  auto listener = tcp_listener::bind(loopback());
  {
    uring::executor ex(options());
    auto server = [](const tcp_listener* l) -> task<void> {
      auto connections = l->accept_all();
      for (;;) (void)co_await connections.next();
    };
    ex.run([](const tcp_listener* l, decltype(server) srv) -> task<void> {
      uring::spawn(srv(l));
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      // A connection the armed request takes but nobody awaits any more, then the executor goes.
      uring::test::unique_fd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      address to = l->local_address();
      ::connect(c.get(), to.data(), to.size());
      for (int i = 0; i < 3; ++i) co_await uring::nop();
    }(&listener, server));
  }
}

// The same with a timed next() waiting (its timer in flight) and an abandoned stream whose timer is
// still armed: shutdown reaps both, nothing leaks (ASan) and no fd stays open (the leak check).
TEST_P(Net, ExecutorShutdownWithATimedAcceptWaitingLeaksNothing) {
  auto listener = tcp_listener::bind(loopback());
  {
    uring::executor ex(options());
    auto waiter = [](const tcp_listener* l) -> task<void> {
      auto connections = l->accept_all();
      (void)co_await uring::with_timeout(connections.next(), std::chrono::hours(1));
    };
    auto quitter = [](const tcp_listener* l) -> task<void> {
      auto connections = l->accept_all();
      auto take = [](uring::net::accept_stream* c) -> task<void> {
        (void)co_await uring::with_timeout(c->next(), std::chrono::hours(1));
      };
      auto nap = []() -> task<void> { co_await uring::sleep_for(1ms); };
      (void)co_await uring::when_any(take(&connections), nap());  // the accept loses, stopped
    };
    ex.run([](const tcp_listener* l, decltype(waiter) w, decltype(quitter) q) -> task<void> {
      uring::spawn(w(l));
      co_await q(l);  // its stream is destroyed with the timer armed
      for (int i = 0; i < 3; ++i) co_await uring::nop();
    }(&listener, waiter, quitter));
  }
}

TEST_P(NetSoak, AThousandConcurrentEchoClientsByteExact) {
  nofile_limit limit(4096);
  if (!limit.enough()) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below 4096";
  const int kCount = 1000;
  auto listener = tcp_listener::bind(loopback());
  int exact = run([](const tcp_listener& l, int count) -> task<int> {
    uring::spawn(echo_server(l, count));
    int ok = 0, finished = 0;
    auto client = [](address to, unsigned seed, int* ok, int* finished) -> task<void> {
      std::string payload = pattern(3000 + seed % 5000, seed);
      std::string back = co_await echo_client(to, payload);
      if (back == payload) ++*ok;
      ++*finished;
    };
    for (int i = 0; i < count; ++i)
      uring::spawn(client(l.local_address(), static_cast<unsigned>(i), &ok, &finished));
    while (finished < count) co_await uring::sleep_for(1ms);
    co_return ok;
  }(listener, kCount));
  EXPECT_EQ(exact, kCount);
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

TEST_P(Net, UnixStreamsEchoOnPathsAndAbstractNames) {
  std::string path = "/tmp/uring_net_test_" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  for (const std::string& where : {"unix:" + path, "unix:@uring_net_test_" + std::to_string(::getpid())}) {
    auto listener = uring::net::unix_listener::bind(address::parse(where));
    EXPECT_EQ(listener.local_address().to_string(), where);
    std::string back = run([](const uring::net::unix_listener& l) -> task<std::string> {
      uring::spawn(echo_server(l, 1));
      co_return co_await echo_client(l.local_address(), pattern(100000, 1));
    }(listener));
    EXPECT_TRUE(back == pattern(100000, 1));
  }
  ::unlink(path.c_str());
}

TEST_P(Net, UdpSendToAndRecvFrom) {
  auto a = udp_socket::bind(loopback());
  auto b = udp_socket::bind(loopback());
  run([](const udp_socket& a, const udp_socket& b) -> task<void> {
    std::size_t sent = co_await a.send_to(std::string_view("ping"), b.local_address());
    EXPECT_EQ(sent, 4u);
    std::array<char, 64> buf;
    uring::net::datagram d = co_await b.recv_from(buf);
    EXPECT_EQ(std::string(buf.data(), d.size), "ping");
    EXPECT_EQ(d.from, a.local_address());
    co_await b.send_to(std::string_view("pong!"), d.from);
    auto back = co_await uring::with_timeout(a.recv_from(buf), 5s);
    EXPECT_EQ(std::string(buf.data(), back.size), "pong!");
    // Nothing more comes: a timeout.
    auto r = co_await uring::with_timeout(a.recv_from(buf), 20ms).nothrow();
    EXPECT_EQ(r.res, -ETIMEDOUT);
  }(a, b));
}

TEST_P(Net, BindErrorsNameTheCallAndTheAddress) {
  auto listener = tcp_listener::bind(loopback());
  uring::net::listen_options no_reuse;
  no_reuse.reuse_address = false;
  std::string what;
  auto code = error_of([&] { (void)tcp_listener::bind(listener.local_address(), no_reuse); }, &what);
  EXPECT_EQ(code, std::errc::address_in_use);
  EXPECT_EQ(what, "bind " + listener.local_address().to_string() + ": Address already in use");
}

TEST_P(Net, ReusePortListenersShareAPort) {
  uring::net::listen_options shared;
  shared.reuse_port = true;
  auto a = tcp_listener::bind(loopback(), shared);
  auto b = tcp_listener::bind(a.local_address(), shared);
  EXPECT_EQ(a.local_address(), b.local_address());
}

// A unix-domain connect to a listener whose queue is full waits (it does not fail with EAGAIN as a
// non-blocking connect(2) would), and completes once the listener accepts.
TEST_P(Net, UnixConnectToAFullQueueWaitsUntilAccepted) {
  std::string name = "unix:@uring_net_full_" + std::to_string(::getpid());
  uring::net::listen_options tiny;
  tiny.backlog = 0;
  auto listener = uring::net::unix_listener::bind(address::parse(name), tiny);
  run([](const uring::net::unix_listener& l) -> task<void> {
    auto first = co_await tcp_stream::connect_to(l.local_address());  // fills the queue
    auto second = tcp_stream::open(AF_UNIX);
    auto r = co_await uring::with_timeout(second.connect(l.local_address()), 50ms).nothrow();
    EXPECT_EQ(r.res, -ETIMEDOUT);
    auto third = tcp_stream::open(AF_UNIX);
    auto accept_later = [](const uring::net::unix_listener* l) -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();
      tcp_stream s = co_await l->accept();
    };
    uring::spawn(accept_later(&l));
    co_await uring::with_timeout(third.connect(l.local_address()), 5s);
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
INSTANTIATE_STORM_BACKENDS(NetSoak, uring::test::all_backends());

}  // namespace
