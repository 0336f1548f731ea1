// Accepting into direct descriptors on every backend: accept_direct and the multishot accept_all_direct,
// without a table and with a full one, a stream dropped with slots not taken, a stream that outlives its
// executor.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "direct_fixture.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::direct_fd;
using uring::task;
using uring::test::contains;
using uring::test::Direct;
using uring::test::failure_of;
using uring::test::pipe_pair;

// A connection accepted straight into the table: the server side reads and writes through the slot.
TEST_P(Direct, AcceptDirectPutsTheConnectionInASlot) {
  run_with_table(4, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    const long fds_before = uring::test::open_fd_count();
    auto [slot, client] = co_await uring::when_all(
        listener.accept_direct(), uring::net::tcp_stream::connect_to(listener.local_address()));
    EXPECT_LT(slot.index, 4u);
    // Natively the connection is in no fd table but the ring's; emulated, the slot's dup is the one fd.
    EXPECT_EQ(uring::test::open_fd_count(),
              fds_before + 1 + (GetParam().options.backend == uring::backend_kind::emulated));
    co_await client.write_all(std::string_view("ping"));
    char buf[8] = {};
    EXPECT_EQ(co_await uring::read(slot, uring::mutable_buffer(buf, 4)), 4u);
    EXPECT_EQ(std::string(buf, 4), "ping");
    EXPECT_EQ(co_await uring::write(slot, uring::const_buffer("pong", 4)), 4u);
    co_await uring::close_direct(slot);  // the server's side closes: the client reads the reply, then EOF
    std::string back;
    for (;;) {
      const std::size_t n = co_await client.read_some(std::span<char>(buf, sizeof buf));
      if (n == 0) break;
      back.append(buf, n);
    }
    EXPECT_EQ(back, "pong");
  }());
}

TEST_P(Direct, AcceptDirectWithoutATableFailsWithEnxioAndAFullTableWithEnfile) {
  run([]() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto [err, what] = co_await failure_of(listener.accept_direct());
    EXPECT_EQ(err, ENXIO);
    EXPECT_TRUE(contains(what, "direct_files")) << what;
  }());
  run_with_table(1, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    pipe_pair filler;
    const direct_fd taken = co_await uring::install_direct(filler.read_end.get());
    auto client = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto [err, what] = co_await failure_of(listener.accept_direct());
    EXPECT_EQ(err, ENFILE);
    EXPECT_TRUE(contains(what, "full")) << what;
    // The connection was closed, not leaked: the client sees its end.
    char c;
    const uring::io_result r = co_await uring::read(client.fd(), uring::mutable_buffer(&c, 1)).nothrow();
    EXPECT_TRUE(r.res == 0 || r.res == -ECONNRESET) << r.res;
    co_await uring::close_direct(taken);
  }());
}

// Every connection of one multishot accept straight into a slot: no plain fd is made (natively).
TEST_P(Direct, AcceptAllDirectPutsEachConnectionInASlot) {
  run_with_table(8, [](bool emulated) -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto connections = listener.accept_all_direct();
    const long fds_before = uring::test::open_fd_count();
    std::vector<uring::net::tcp_stream> clients;
    std::vector<direct_fd> slots;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(co_await uring::net::tcp_stream::connect_to(listener.local_address()));
      slots.push_back(co_await connections.next());
    }
    // Natively only the clients' fds are new; emulated, each slot's dup too.
    EXPECT_EQ(uring::test::open_fd_count(), fds_before + 3 * (emulated ? 2 : 1));
    std::set<std::uint32_t> distinct;
    for (int i = 0; i < 3; ++i) {
      EXPECT_LT(slots[i].index, 8u);
      distinct.insert(slots[i].index);
      const char c = static_cast<char>('a' + i);
      co_await clients[i].write_all(std::string_view(&c, 1));
      char got = 0;
      EXPECT_EQ(co_await uring::recv(slots[i], uring::mutable_buffer(&got, 1)), 1u);
      EXPECT_EQ(got, c) << "connection " << i << " is not in the slot it was yielded with";
      co_await uring::close_direct(slots[i]);
    }
    EXPECT_EQ(distinct.size(), 3u);
  }(emulated()));
}

// No table: ENXIO. A full table ends the request with ENFILE and closes that connection; the next
// next() arms it again.
TEST_P(Direct, AcceptAllDirectWithoutATableFailsWithEnxioAndAFullTableWithEnfile) {
  run([]() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto connections = listener.accept_all_direct();
    int err = 0;
    try {
      (void)co_await connections.next();
    } catch (const std::system_error& e) {
      err = e.code().value();
      EXPECT_TRUE(contains(e.what(), "direct_files")) << e.what();
    }
    EXPECT_EQ(err, ENXIO);
  }());
  run_with_table(2, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    pipe_pair filler;
    const direct_fd taken = co_await uring::install_direct(filler.read_end.get());
    // Both wait in the backlog; the first next() arms the accept, which takes both in turn.
    auto first = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto second = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto connections = listener.accept_all_direct();
    const direct_fd got = co_await connections.next();
    int err = 0;
    try {
      (void)co_await connections.next();
    } catch (const std::system_error& e) {
      err = e.code().value();
    }
    EXPECT_EQ(err, ENFILE);
    // That connection was closed, not leaked: its client sees its end.
    char c;
    const uring::io_result r = co_await uring::read(second.fd(), uring::mutable_buffer(&c, 1)).nothrow();
    EXPECT_TRUE(r.res == 0 || r.res == -ECONNRESET) << r.res;
    // Room again, and the next next() re-arms.
    co_await uring::close_direct(got);
    auto third = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    const direct_fd again = co_await connections.next();
    co_await third.write_all(std::string_view("3"));
    EXPECT_EQ(co_await uring::recv(again, uring::mutable_buffer(&c, 1)), 1u);
    EXPECT_EQ(c, '3');
    co_await uring::close_direct(again);
    co_await uring::close_direct(taken);
  }());
}

// A stream dropped with connections accepted but not taken empties their slots: the table has room for
// as many files as before. (A connection still in the listener's backlog never took a slot.)
TEST_P(Direct, DroppingAnAcceptAllDirectStreamEmptiesTheSlotsNotTaken) {
  run_with_table(2, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto a = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto b = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    direct_fd first{};
    {
      auto connections = listener.accept_all_direct();
      first = co_await connections.next();  // b was accepted with it, into the other slot
      co_await uring::nop();
    }
    co_await uring::nop();  // the cancel's completion
    pipe_pair p;
    const direct_fd other = co_await uring::install_direct(p.read_end.get());  // ENFILE if b's slot leaked
    co_await uring::close_direct(other);
    co_await uring::close_direct(first);
  }());
}

// A stream may outlive its executor: the shutdown ends its request, and the slots it held close with the
// table. Dropping the stream afterwards must not touch the executor (the ASan preset catches it).
TEST_P(Direct, AnAcceptAllDirectStreamMayOutliveItsExecutor) {
  std::optional<uring::net::accept_direct_stream> kept;
  uring::net::tcp_listener listener =
      uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  std::vector<uring::net::tcp_stream> clients;
  {
    uring::executor_options o = options();
    o.direct_files = 4;
    uring::executor ex(o);
    ex.run([](uring::net::tcp_listener& l, std::optional<uring::net::accept_direct_stream>& keep,
              std::vector<uring::net::tcp_stream>& cs) -> task<void> {
      cs.push_back(co_await uring::net::tcp_stream::connect_to(l.local_address()));
      cs.push_back(co_await uring::net::tcp_stream::connect_to(l.local_address()));
      keep.emplace(l.accept_all_direct());
      (void)co_await keep->next();  // the other waits in the stream, or in the backlog
    }(listener, kept, clients));
  }
  kept.reset();  // must not touch the executor: ASan fails the test if it does
}

INSTANTIATE_BACKENDS(Direct);

}  // namespace
