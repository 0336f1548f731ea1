// The heap blocks of the library's per-connection and per-command paths, counted (alloc_count.hpp): a
// task_scope member adds one frame to its task's (no join state, no second frame); an untimed leased
// receive armed on a buffer ring is one small block (its timer and the no-ring receive's buffer list are
// made only when used); the RESP parser takes one block for a command's argument list, not one per
// doubling. These are what a server pays per idle connection and per command.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include <uring/resp/parser.hpp>
#include <uring/task_scope.hpp>
#include <uring/uring.hpp>

#include "alloc_count.hpp"
#include "backends.hpp"
#include "leased_recv.hpp"
#include "net_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;
using uring::task_scope;

class IdleCost : public LeasedRecv {};

task<void> nothing() { co_return; }

// Receives one chunk, which it drops.
task<void> receive_one(tcp_stream* s, buffer_pool* pool) { (void)co_await s->recv(*pool); }

TEST_P(IdleCost, AScopeMemberAddsOneFrameToItsTask) {
  std::vector<std::size_t> member;
  run([](std::vector<std::size_t>& member) -> task<void> {
    task_scope scope;
    // The executor's two ready lists (swapped each turn) have their room before the count.
    for (int i = 0; i < 8; ++i) scope.spawn(nothing());
    for (int i = 0; i < 4; ++i) co_await uring::nop();
    task<void> t = nothing();
    start_recording();
    scope.spawn(std::move(t));
    member = take();
    co_await scope.join();
  }(member));
  EXPECT_EQ(member.size(), 1u) << "blocks allocated by task_scope::spawn besides the task's own frame";
}

TEST_P(IdleCost, AnUntimedLeasedReceiveArmedOnARingIsOneSmallBlock) {
  if (!expect_ring())
    GTEST_SKIP() << "no buffer ring on this configuration: a receive polls, then takes a buffer";
  stream_pair warm;
  stream_pair pair;
  std::vector<std::size_t> armed;
  run([](tcp_stream& warm_s, int warm_peer, tcp_stream& s, int peer,
         std::vector<std::size_t>& armed) -> task<void> {
    buffer_pool pool({.count = 8, .size = 256});
    task_scope scope;
    // A whole receive first, so that the executor's and the pool's own room is there before the count.
    scope.spawn(receive_one(&warm_s, &pool));
    write_fully(warm_peer, "w");
    for (int i = 0; i < 4; ++i) co_await uring::nop();

    scope.spawn(receive_one(&s, &pool));
    start_recording();
    for (int i = 0; i < 4; ++i) co_await uring::nop();  // the member starts and arms its receive
    armed = take();
    write_fully(peer, "x");
    co_await scope.join();
  }(warm.ours, warm.peer.get(), pair.ours, pair.peer.get(), armed));
  ASSERT_EQ(armed.size(), 1u) << "blocks allocated to arm an untimed leased receive";
  // The state holds the armed request (an operation), its chunk queue and the stop token its waits use,
  // watched once for all of them; the timer (about 160 B) and the no-ring buffer list (about 100 B) are
  // not part of it.
  EXPECT_LE(armed[0], 352u);
  // What the waiting coroutine's frame holds: the state's pointer, a token and a timeout, and no stop
  // registration of its own (80 B each).
  EXPECT_LE(sizeof(uring::net::basic_recv_awaitable<false>), 48u);
}

// A RESP command of many arguments, split as it would arrive, yields its arguments.
TEST(RespParserCost, ACommandsArgumentListIsOneBlock) {
  std::string mset = "*21\r\n$4\r\nMSET\r\n";
  for (int i = 0; i < 10; ++i) mset += "$4\r\nkey" + std::to_string(i) + "\r\n$1\r\nv\r\n";
  uring::resp::command_parser parser;
  parser.feed(mset.substr(0, 40));  // the input's own buffer, allocated outside the count
  start_recording();
  ASSERT_EQ(parser.next(), uring::resp::parse_status::need_more);
  std::vector<std::size_t> started = take();
  parser.feed(mset.substr(40));
  start_recording();
  ASSERT_EQ(parser.next(), uring::resp::parse_status::command);
  std::vector<std::size_t> finished = take();
  ASSERT_EQ(parser.args().size(), 21u);
  EXPECT_EQ(parser.args()[20], "v");
  // The count line reserves the spans of all 21 arguments, and the argument views are made in one go.
  EXPECT_EQ(started.size(), 1u) << "blocks while the first arguments arrive";
  EXPECT_EQ(finished.size(), 1u) << "blocks to complete the command";

  // The next command of the same length reuses both.
  parser.feed(mset);
  start_recording();
  ASSERT_EQ(parser.next(), uring::resp::parse_status::command);
  EXPECT_EQ(take().size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, IdleCost, ::testing::ValuesIn(leased_recv_backends()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
