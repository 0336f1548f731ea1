// Zero-copy sends (send_zc, write_all_zc, write_all from 64 KiB), on every backend and on native with
// send_zc turned off: byte-exact, the buffer free when the send returns, unix streams by copy, errors that
// name the operation, and a large write_all that times out and stops.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;

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
      co_await uring::with_timeout(client.write_all(big), std::chrono::milliseconds(50));
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
        co_await uring::with_stop_token(c->write_all(*b), t);
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

}  // namespace
