// The long socket runs, on every backend, quiet and inside a SIGALRM storm: a thousand connections through
// one accept stream, and a thousand concurrent echo clients, byte-exact.
#include <sys/resource.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_fixture.hpp"
#include "net_util.hpp"
#include "signal_storm.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::test::echo_client;
using uring::test::echo_server;
using uring::test::loopback;
using uring::test::NetSoak;
using uring::test::pattern;

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

INSTANTIATE_STORM_BACKENDS(NetSoak, uring::test::all_backends());

}  // namespace
