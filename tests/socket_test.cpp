// The other sockets and their set-up, on every backend: unix streams on paths and abstract names, a unix
// connect to a full queue, UDP, bind errors that name the call, and SO_REUSEPORT listeners.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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
using uring::net::udp_socket;
using uring::test::echo_client;
using uring::test::echo_server;
using uring::test::error_of;
using uring::test::loopback;
using uring::test::Net;
using uring::test::pattern;

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

INSTANTIATE_BACKENDS(Net);

}  // namespace
