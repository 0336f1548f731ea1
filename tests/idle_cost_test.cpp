// The heap blocks behind an idle connection's library state, counted by replacing operator new in this
// executable: a task_scope member adds one frame to its task's (no join state, no second frame), and an
// untimed leased receive armed on a buffer ring is one small block (its timer and the no-ring receive's
// buffer list are made only when used). These are what a server pays per idle connection.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include <uring/task_scope.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "leased_recv.hpp"
#include "net_util.hpp"

namespace {

// What this thread allocated while `recording`: each block's requested size, in order.
thread_local bool recording = false;
thread_local std::size_t recorded = 0;
thread_local std::size_t sizes[64];

void note(std::size_t n) noexcept {
  if (!recording) return;
  if (recorded < std::size(sizes)) sizes[recorded] = n;
  ++recorded;
}

// Starts recording; the sizes allocated since come back from take().
void start_recording() noexcept {
  recorded = 0;
  recording = true;
}
std::vector<std::size_t> take() {
  recording = false;
  return {sizes, sizes + std::min(recorded, std::size(sizes))};
}

}  // namespace

void* operator new(std::size_t n) {
  note(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  note(n);
  if (void* p = std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) &
                                                                    ~(static_cast<std::size_t>(a) - 1)))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

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
  // The state holds the armed request (an operation), its chunk queue and its stop bookkeeping; the
  // timer (about 160 B) and the no-ring buffer list (about 100 B) are not part of it.
  EXPECT_LE(armed[0], 320u);
}

INSTANTIATE_TEST_SUITE_P(Backends, IdleCost, ::testing::ValuesIn(leased_recv_backends()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
