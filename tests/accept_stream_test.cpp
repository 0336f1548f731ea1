// Accepting connections, on every backend: a single accept, the multishot accept stream (its stop tokens,
// time-outs and re-arming, a late stop that must not cancel a later accept), and a listener closed, a stream
// dropped or an executor shut down with connections or accepts waiting.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_fixture.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
using uring::test::loopback;
using uring::test::Net;

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
        (void)co_await uring::with_stop_token(connections.next(), t);
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
    code = co_await accept_error(
        uring::with_timeout(uring::with_stop_token(connections.next(), stop.get_token()), 5s));
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
        accepted.push_back(co_await uring::with_stop_token(connections.next(), stop.get_token()));
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

INSTANTIATE_BACKENDS(Net);

}  // namespace
