// uring::tls from fibers, on every backend: a client written in blocking style on a fiber (connect,
// handshake, write, read, close_notify through this_fiber::await) against a coroutine server, and a
// handshake a fiber bounds with with_timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>

#include <uring/fiber.hpp>
#include <uring/tls/tls.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "tls_certs.hpp"
#include "tls_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::test::test_pki;
using uring::tls::tls_context;
using uring::tls::tls_stream;
using namespace uring::test::tls_util;
namespace this_fiber = uring::this_fiber;

class TlsFiber : public uring::test::backend_test {};

TEST_P(TlsFiber, AClientOnAFiberTalksToACoroutineServer) {
  auto server = server_context(test_pki::get().server);
  auto client = client_context({"http/1.1"});
  const std::string payload = uring::test::pattern(50'000, 11);  // several records each way
  std::string back = run([&]() -> task<std::string> {
    auto listener = tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto fiber = uring::spawn_fiber(*uring::executor::current(), [&, peer = listener.local_address()] {
      tls_stream s =
          tls_stream::client(client, this_fiber::await(step(tcp_stream::connect_to(peer))), "localhost");
      this_fiber::await(step(s.handshake()));
      this_fiber::await(step(s.write_all(payload)));
      std::string got(payload.size(), '\0');
      this_fiber::await(step(s.read_exactly(std::span(got.data(), got.size()))));
      this_fiber::await(step(s.shutdown()));
      char end[1];
      const std::size_t after = this_fiber::await(step(s.read_some(end)));  // the server's close_notify
      return after == 0 ? got : std::string("no close_notify");
    });
    side s = co_await accept_one(&listener, &server);
    if (s.error) std::rethrow_exception(s.error);
    co_await echo_until_closed(&*s.stream);
    co_return co_await fiber.join();
  }());
  EXPECT_EQ(back, payload);
}

// A server that never answers: the fiber's with_timeout ends its handshake with ETIMEDOUT.
TEST_P(TlsFiber, AFibersHandshakeEndsAtItsTimeout) {
  auto client = client_context();
  int code = run([&]() -> task<int> {
    auto listener = tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto fiber = uring::spawn_fiber(*uring::executor::current(), [&, peer = listener.local_address()] {
      tls_stream s =
          tls_stream::client(client, this_fiber::await(step(tcp_stream::connect_to(peer))), "localhost");
      try {
        this_fiber::await(uring::with_timeout(s.handshake(), 100ms));
      } catch (const std::system_error& e) {
        return e.code().value();
      }
      return 0;
    });
    tcp_stream silent = co_await listener.accept();  // accepted, never answered
    co_return co_await fiber.join();
  }());
  EXPECT_EQ(code, ETIMEDOUT);
}

INSTANTIATE_BACKENDS(TlsFiber);

}  // namespace
