// net_fixture.hpp — the Net suites' fixtures and the echo helpers their files share (tcp_stream_test,
// accept_stream_test, socket_test, net_soak_test).
//
// Use: TEST_P(Net, ...) then INSTANTIATE_BACKENDS(Net); TEST_P(NetSoak, ...) then
// INSTANTIATE_STORM_BACKENDS(NetSoak, uring::test::all_backends()).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <system_error>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "signal_storm.hpp"
#include "test_util.hpp"

namespace uring::test {

// Every test checks that no fd is left open (fd_leak.hpp, for all tests).
class Net : public storm_backend_test {};

// The long runs, again inside a SIGALRM storm (signal_storm.hpp): EINTR anywhere changes no result.
class NetSoak : public Net {};

inline net::address loopback() { return net::address::parse("127.0.0.1:0"); }

// Echoes until the peer ends its side, then closes.
inline task<void> echo_connection(net::tcp_stream s) {
  std::array<char, 4096> buf;
  for (;;) {
    std::size_t n = co_await s.read_some(buf);
    if (n == 0) break;
    co_await s.write_all(std::span(buf.data(), n));
  }
}

// Accepts `count` connections through one multishot accept and echoes on each.
inline task<void> echo_server(const net::tcp_listener& l, int count) {
  auto connections = l.accept_all();
  for (int i = 0; i < count; ++i) spawn(echo_connection(co_await connections.next()));
}

// Sends `payload` and ends its side while it reads everything back (both at once: an echo of more than
// the socket buffers hold would otherwise stall both ends).
inline task<std::string> echo_client(net::address to, std::string payload) {
  net::tcp_stream s = co_await net::tcp_stream::connect_to(to);
  auto [sent, back] = co_await when_all(send_and_end(&s, &payload), read_to_end(&s));
  co_return back;
}

}  // namespace uring::test
