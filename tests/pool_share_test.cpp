// A buffer_pool shared fairly: one stream holds at most max_per_stream buffers (chunks queued in it plus
// leases not yet returned), so a stream whose application never returns its chunks (a peer that sends
// without reading its replies, in an echo server) cannot drain the pool for the others; and when the pool
// is dry, a returned buffer goes to a stream that holds none before the one that returned it. On every
// backend, and natively without the buffer ring (the one-recv-per-call path).
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::net;  // NOLINT
using uring::task;
using uring::test::stream_pair;

constexpr auto kEventually = std::chrono::seconds(20);   // for what must happen (a loaded 2-core VM)
constexpr auto kNever = std::chrono::milliseconds(300);  // for what must not: a wait that has to time out

// Fills `p` from the peer's side as far as it takes without blocking (a peer that floods).
std::size_t flood(const stream_pair& p) {
  static const std::string block(4096, 'h');
  std::size_t sent = 0;
  for (int i = 0; i < 4096; ++i) {
    const ssize_t n = ::send(p.peer.get(), block.data(), block.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  return sent;
}

std::vector<uring::test::backend_config> configs() {
  auto c = uring::test::all_backends();
  uring::executor_options without;
  without.backend = uring::backend_kind::native;
  without.disable = uring::feature::buf_ring;
  c.push_back({"native_no_buf_ring", without});
  without.disable = uring::feature::recv_bundle;
  c.push_back({"native_no_recv_bundle", without});
  return c;
}

class PoolShare : public uring::test::backend_test {};

// Receives (with a timeout of `wait`) until a receive times out; keeps every lease. The hog.
task<std::vector<leased_buffer>> take_all_you_can(tcp_stream* s, buffer_pool* pool, std::size_t at_most) {
  std::vector<leased_buffer> held;
  while (held.size() < at_most) {
    recv_result r = co_await uring::with_timeout(s->recv(*pool).nothrow(), kNever);
    if (!r) {
      EXPECT_EQ(r.res, -ETIMEDOUT) << r.error().message();
      break;
    }
    held.push_back(std::move(r.buffer));
  }
  co_return held;
}

TEST_P(PoolShare, AStreamHoldsAtMostItsLimit) {
  stream_pair hog;
  ASSERT_GT(flood(hog), 64u * 1024);
  run([](stream_pair& hog) -> task<void> {
    buffer_pool pool({.count = 16, .size = 256, .max_per_stream = 4});
    EXPECT_EQ(pool.max_per_stream(), 4u);
    std::vector<leased_buffer> held = co_await take_all_you_can(&hog.ours, &pool, 16);
    EXPECT_EQ(held.size(), 4u) << "the stream took more than its limit, or less";
    EXPECT_EQ(pool.available(), 12u) << "buffers queued in the stream beyond its limit";
    // One back: the stream receives one more, and no more than that.
    held.pop_back();
    std::vector<leased_buffer> more = co_await take_all_you_can(&hog.ours, &pool, 16);
    EXPECT_EQ(more.size(), 1u);
    EXPECT_EQ(pool.available(), 12u);
  }(hog));
}

TEST_P(PoolShare, TheDefaultLimitIsAQuarterOfThePoolAtMostSixteen) {
  uring::executor ex(options());
  EXPECT_EQ(buffer_pool(ex, {.count = 1}).max_per_stream(), 1u);
  EXPECT_EQ(buffer_pool(ex, {.count = 8}).max_per_stream(), 2u);
  EXPECT_EQ(buffer_pool(ex, {.count = 256}).max_per_stream(), 16u);
  EXPECT_EQ(buffer_pool(ex, {.count = 4, .max_per_stream = 9}).max_per_stream(), 4u);
}

// Echoes `rounds` messages through `s` (the peer side writes, then reads back); each receive must come.
task<int> echo_rounds(tcp_stream* s, int peer, buffer_pool* pool, int rounds) {
  int done = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string msg = "ping " + std::to_string(i);
    EXPECT_EQ(::send(peer, msg.data(), msg.size(), MSG_DONTWAIT), static_cast<ssize_t>(msg.size()));
    std::string got;
    while (got.size() < msg.size()) {
      recv_result r = co_await uring::with_timeout(s->recv(*pool).nothrow(), kEventually);
      if (!r || r.buffer.empty()) {
        ADD_FAILURE() << "round " << i << ": no echo: " << r.error().message();
        co_return done;
      }
      got.append(r.buffer.view());
    }
    EXPECT_EQ(got, msg);
    ++done;
  }
  co_return done;
}

// Two hogs hold their limit each (half the pool, never returned) while six other streams receive 50
// messages each through what is left.
TEST_P(PoolShare, OtherStreamsReceiveWhileHogsHoldTheirLimit) {
  stream_pair hog_a, hog_b;
  ASSERT_GT(flood(hog_a), 64u * 1024);
  ASSERT_GT(flood(hog_b), 64u * 1024);
  std::vector<stream_pair> others(6);
  run([](stream_pair& a, stream_pair& b, std::vector<stream_pair>& others) -> task<void> {
    buffer_pool pool({.count = 8, .size = 256, .max_per_stream = 2});
    std::vector<leased_buffer> held_a = co_await take_all_you_can(&a.ours, &pool, 8);
    std::vector<leased_buffer> held_b = co_await take_all_you_can(&b.ours, &pool, 8);
    EXPECT_EQ(held_a.size() + held_b.size(), 4u);
    std::vector<task<int>> echoes;
    for (auto& o : others) echoes.push_back(echo_rounds(&o.ours, o.peer.get(), &pool, 50));
    for (auto& e : echoes) EXPECT_EQ(co_await std::move(e), 50);
    EXPECT_EQ(pool.available(), 4u) << "the hogs' streams took buffers meanwhile";
  }(hog_a, hog_b, others));
}

// A dry pool: two hogs hold every buffer; a third stream with data waits. When a hog returns one and asks
// for more at once, the stream that holds nothing gets it first; once everything is returned, everyone
// receives again.
TEST_P(PoolShare, ADryPoolServesAStreamHoldingNothingFirstAndRecovers) {
  stream_pair hog_a, hog_b, starved;
  ASSERT_GT(flood(hog_a), 64u * 1024);
  ASSERT_GT(flood(hog_b), 64u * 1024);
  run([](stream_pair& a, stream_pair& b, stream_pair& c) -> task<void> {
    buffer_pool pool({.count = 4, .size = 256, .max_per_stream = 2});
    std::vector<leased_buffer> held_a = co_await take_all_you_can(&a.ours, &pool, 4);
    std::vector<leased_buffer> held_b = co_await take_all_you_can(&b.ours, &pool, 4);
    EXPECT_EQ(held_a.size() + held_b.size(), 4u);
    EXPECT_EQ(pool.available(), 0u);
    const std::uint64_t dry_before = pool.exhausted();  // the hogs' own waits
    EXPECT_EQ(::write(c.peer.get(), "hello", 5), 5);
    std::vector<int> order;  // 1: the starved stream got a chunk, 2: the hog did
    auto receive = [](tcp_stream* s, buffer_pool* p, std::vector<int>* order,
                      int who) -> task<leased_buffer> {
      recv_result r = co_await uring::with_timeout(s->recv(*p).nothrow(), kEventually);
      EXPECT_TRUE(r.ok()) << who << ": " << r.error().message();
      order->push_back(who);
      co_return std::move(r.buffer);
    };
    auto return_one_then_receive = [&](std::vector<int>* order) -> task<leased_buffer> {
      // Until the starved stream, its data seen, waits for a buffer (bounded: its receive times out).
      while (pool.exhausted() == dry_before && order->empty()) co_await uring::nop();
      EXPECT_GT(pool.exhausted(), dry_before);
      held_a.pop_back();
      leased_buffer got = co_await receive(&a.ours, &pool, order, 2);
      co_return got;
    };
    auto release_after_first = [&](std::vector<int>* order) -> task<void> {
      while (order->empty()) co_await uring::nop();  // bounded: the receives above time out at worst
      held_b.clear();                                // then the hog gets one too
    };
    auto [from_c, from_a, unused] = co_await uring::when_all(
        receive(&c.ours, &pool, &order, 1), return_one_then_receive(&order), release_after_first(&order));
    EXPECT_EQ(order.size(), 2u);
    EXPECT_EQ(order.empty() ? 0 : order[0], 1)
        << "the hog that returned a buffer took it back before the stream holding none";
    EXPECT_EQ(from_c.view(), "hello");
    EXPECT_FALSE(from_a.empty());
    from_c.reset();
    from_a.reset();
    held_a.clear();
    // Recovered: every stream receives again, and every buffer comes home.
    EXPECT_EQ(::write(c.peer.get(), "again", 5), 5);
    leased_buffer again = co_await uring::with_timeout(c.ours.recv(pool), kEventually);
    EXPECT_EQ(again.view(), "again");
    again.reset();
    std::vector<leased_buffer> a2 = co_await take_all_you_can(&a.ours, &pool, 4);
    EXPECT_EQ(a2.size(), 2u);
  }(hog_a, hog_b, starved));
}

INSTANTIATE_TEST_SUITE_P(Backends, PoolShare, ::testing::ValuesIn(configs()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
