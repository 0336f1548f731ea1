// Cancellation fuzz, on every backend: many recv, sleep_for and accept operations, each cancelled through
// a stop token at a random point while what completes it (bytes written to the stream, a client
// connecting, the timer's own expiry) happens at another random point.
//
// The points, counted in turns of the executor's loop (one nop each):
//   stop:       before the operation starts | in the turn it starts, before the enter hands it to the kernel
//   |
//               after 1-3 turns, when the kernel (the emulation) holds it | from another thread, racing the
//               loop | never
//   completion: before the operation starts | after 0-3 turns | never (only with a stop)
//
// What cancellation promises (io_awaitable.hpp, socket.hpp), and what is asserted for every operation:
// - the awaiting coroutine resumes exactly once, with success or ECANCELED and no other error;
// - a cancelled recv consumed nothing: the stream's bytes (a counter sequence) arrive in order, none lost
//   or repeated, across recvs that succeeded and recvs that were cancelled; what no recv took is still
//   readable at the end;
// - a cancelled accept took no connection: every client that connected is accepted by a later accept, or
//   is still in the listener's queue at the end;
// - a sleep either ran its course or was cancelled;
// and after each operation and at the end: no operation in flight on the executor
// (executor::operations_in_flight); at the end the fd count is back where it started.
//
// Size: URING_TEST_SCALE * 1'000'000 operations at scale 1, spread over the backends (see kOpsAtScale1).
// Seed: random, or URING_FUZZ_SEED; every failure message carries it and the failing operation's plan.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stop_token>
#include <string>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::task;
using uring::net::address;
using uring::net::tcp_listener;
using uring::net::tcp_stream;

// 1M operations at scale 1, a third on each backend configuration.
constexpr long kOpsAtScale1 = 1'000'000 / 3;

std::uint64_t fuzz_seed() {
  if (const char* s = std::getenv("URING_FUZZ_SEED")) return std::strtoull(s, nullptr, 0);
  return (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
}

enum class kind : std::uint8_t { recv, sleep, accept };
enum class stop_at : std::uint8_t { before_start, same_turn, after_turns, other_thread, never };
enum class complete_at : std::uint8_t { before_start, after_turns, never };

struct op_plan {
  kind what;
  stop_at stop;
  int stop_turns;  // after_turns: 1-3; other_thread: the loop turns the stopper thread races with
  complete_at completion;
  int completion_turns;   // 0-3
  std::size_t recv_size;  // recv: the buffer; the completion writes write_size bytes
  std::size_t write_size;
  std::chrono::microseconds sleep;  // sleep: its duration (the completion is its expiry)
};

const char* name(kind k) { return k == kind::recv ? "recv" : k == kind::sleep ? "sleep" : "accept"; }

std::string describe(long index, const op_plan& p) {
  static constexpr std::array<const char*, 5> stops{"before start", "same turn", "after turns",
                                                    "other thread", "never"};
  static constexpr std::array<const char*, 3> completions{"before start", "after turns", "never"};
  return "op #" + std::to_string(index) + " " + name(p.what) + ": stop " + stops[static_cast<int>(p.stop)] +
         " (" + std::to_string(p.stop_turns) + "), completion " +
         completions[static_cast<int>(p.completion)] + " (" + std::to_string(p.completion_turns) + ")";
}

op_plan draw(std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  op_plan p{};
  p.what = static_cast<kind>(pick(3));
  int s = pick(100);
  p.stop = s < 10   ? stop_at::before_start
           : s < 30 ? stop_at::same_turn
           : s < 75 ? stop_at::after_turns
           : s < 80 ? stop_at::other_thread
                    : stop_at::never;
  p.stop_turns = p.stop == stop_at::after_turns ? 1 + pick(3) : pick(4);
  int c = pick(100);
  p.completion = c < 15 ? complete_at::before_start : c < 85 ? complete_at::after_turns : complete_at::never;
  if (p.stop == stop_at::never && p.completion == complete_at::never) p.completion = complete_at::after_turns;
  p.completion_turns = pick(4);
  p.recv_size = 1 + static_cast<std::size_t>(pick(32));
  p.write_size = 1 + static_cast<std::size_t>(pick(32));
  p.sleep = std::chrono::microseconds(pick(40));
  return p;
}

// The byte at position `pos` of the stream: a sequence that shows a lost or repeated byte.
std::uint8_t stream_byte(std::uint64_t pos) { return static_cast<std::uint8_t>(pos % 251); }

struct fuzz_state {
  tcp_stream reader;      // recvs are awaited on this end
  tcp_stream writer;      // completions write here (plain non-blocking send)
  tcp_listener listener;  // unix-domain (abstract): no ports to run out of
  address listen_address;

  std::uint64_t written = 0;   // stream bytes sent
  std::uint64_t consumed = 0;  // stream bytes received by recvs
  long connected = 0, accepted = 0;

  long ok[3] = {}, cancelled[3] = {};
  bool failed = false;
};

// One turn of the loop.
task<void> turns(int n) {
  for (int i = 0; i < n; ++i) co_await uring::nop();
}

// What makes the operation complete, when it does not complete by itself (a sleep does).
void complete_now(fuzz_state& st, const op_plan& p) {
  if (p.what == kind::recv) {
    // Keep what no recv has taken small, so that most recvs find the stream empty and really wait (and
    // race their completion); the recv this was for completes from what is there.
    if (st.written - st.consumed > 256) return;
    std::array<std::uint8_t, 32> bytes;
    for (std::size_t i = 0; i < p.write_size; ++i) bytes[i] = stream_byte(st.written + i);
    ssize_t n = ::send(st.writer.fd(), bytes.data(), p.write_size, MSG_DONTWAIT | MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << "send: " << std::strerror(errno);
    st.written += static_cast<std::uint64_t>(n);
  } else if (p.what == kind::accept) {
    if (st.connected - st.accepted > 1) return;  // as for the stream: accepts should mostly wait
    uring::test::unique_fd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(client) << "socket: " << std::strerror(errno);
    // A unix-domain connect to a listener with room in its queue completes at once; the client may close
    // before the accept: the connection stays queued, and accept still takes it.
    ASSERT_EQ(::connect(client.get(), st.listen_address.data(), st.listen_address.size()), 0)
        << "connect: " << std::strerror(errno);
    ++st.connected;
  }
}

task<void> completer(fuzz_state& st, const op_plan& p) {
  if (p.completion != complete_at::after_turns) co_return;
  co_await turns(p.completion_turns);
  complete_now(st, p);
}

task<void> stopper(std::stop_source& src, const op_plan& p) {
  switch (p.stop) {
    case stop_at::same_turn:
      src.request_stop();  // the operation was queued just before (when_all starts it first)
      break;
    case stop_at::after_turns:
      co_await turns(p.stop_turns);
      src.request_stop();
      break;
    case stop_at::other_thread: {
      // The stop callback runs on that thread and posts the cancel to the executor, while the loop turns.
      std::thread t([&src] { src.request_stop(); });
      co_await turns(p.stop_turns);
      t.join();  // does not wait on the loop: the callback only posts
      break;
    }
    default:
      break;
  }
}

task<void> run_one(fuzz_state& st, const op_plan& p, std::stop_token tok, int& resumed, std::string& error) {
  auto check_result = [&](uring::io_result r) {
    ++resumed;
    if (r.ok()) return true;
    if (r.res == -ECANCELED) {
      if (!tok.stop_requested()) error = "ECANCELED without a stop request";
      ++st.cancelled[static_cast<int>(p.what)];
      return false;
    }
    error = "unexpected error " + r.error().message();
    return false;
  };
  switch (p.what) {
    case kind::recv: {
      std::array<std::uint8_t, 32> buf;
      auto r = co_await uring::with_stop_token(st.reader.read_some({buf.data(), p.recv_size}), tok).nothrow();
      if (!check_result(r)) co_return;
      auto n = static_cast<std::size_t>(r.res);
      if (n == 0 || n > p.recv_size) {
        error = "recv gave " + std::to_string(n) + " bytes";
        co_return;
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (buf[i] != stream_byte(st.consumed + i)) {
          error = "stream byte " + std::to_string(st.consumed + i) + " is wrong: a byte was lost or repeated";
          co_return;
        }
      }
      st.consumed += n;
      break;
    }
    case kind::sleep: {
      auto r = co_await uring::with_stop_token(uring::sleep_for(p.sleep), tok).nothrow();
      if (!check_result(r)) co_return;
      break;
    }
    case kind::accept: {
      auto r = co_await uring::with_stop_token(st.listener.accept(), tok).nothrow();
      if (!check_result(r)) co_return;
      tcp_stream conn(r.res);  // closed at once
      ++st.accepted;
      break;
    }
  }
  ++st.ok[static_cast<int>(p.what)];
}

task<void> fuzz(fuzz_state& st, std::uint64_t seed, long count) {
  std::mt19937_64 rng(seed);
  for (long i = 0; i < count; ++i) {
    op_plan p = draw(rng);
    std::stop_source src;
    if (p.stop == stop_at::before_start) src.request_stop();
    if (p.completion == complete_at::before_start) complete_now(st, p);
    int resumed = 0;
    std::string error;
    co_await uring::when_all(run_one(st, p, src.get_token(), resumed, error), stopper(src, p),
                             completer(st, p));
    if (resumed != 1) error += " resumed " + std::to_string(resumed) + " times";
    // Everything this operation started (itself, the nops of the turns) has completed, and a cancel
    // leaves nothing behind in the executor's count.
    if (std::size_t n = uring::executor::current()->operations_in_flight(); n != 0) {
      error += " " + std::to_string(n) + " operations still in flight after it";
    }
    if (!error.empty() || ::testing::Test::HasFailure()) {
      ADD_FAILURE() << describe(i, p) << ": " << error;
      st.failed = true;
      co_return;
    }
  }
}

std::size_t readable_bytes(int fd, fuzz_state& st, std::string& error) {
  std::size_t n = 0;
  std::array<std::uint8_t, 4096> buf;
  for (;;) {
    ssize_t r = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (r <= 0) break;
    for (ssize_t i = 0; i < r; ++i) {
      if (buf[static_cast<std::size_t>(i)] != stream_byte(st.consumed + n + static_cast<std::size_t>(i))) {
        error = "a left-over stream byte is wrong";
      }
    }
    n += static_cast<std::size_t>(r);
  }
  return n;
}

class CancelFuzz : public uring::test::backend_test {};

TEST_P(CancelFuzz, EveryOperationResumesOnceWithItsResultOrECANCELED) {
  const std::uint64_t seed = fuzz_seed();
  const long count = uring::test::scaled(kOpsAtScale1);
  RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE("URING_FUZZ_SEED=" + std::to_string(seed) + " (" + std::to_string(count) + " operations)");

  fuzz_state st;
  {
    // A TCP connection for the stream (loopback), through a listener that is closed again at once.
    auto tcp = tcp_listener::bind(address::parse("127.0.0.1:0"));
    st.writer = tcp_stream(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    address a = tcp.local_address();
    ASSERT_EQ(::connect(st.writer.fd(), a.data(), a.size()), 0) << std::strerror(errno);
    int accepted = ::accept4(tcp.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(accepted, 0) << std::strerror(errno);
    st.reader = tcp_stream(accepted);
  }
  st.listen_address =
      address::parse("unix:@uring-cancel-fuzz-" + std::to_string(::getpid()) + "-" + GetParam().name);
  st.listener = tcp_listener::bind(st.listen_address);
  const long fds_during = uring::test::open_fd_count();

  const auto start = std::chrono::steady_clock::now();
  {
    uring::executor ex(options());
    ex.run(fuzz(st, seed, count));
    EXPECT_EQ(ex.operations_in_flight(), 0u);
    RecordProperty("cancels", std::to_string(ex.stats().cancels));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (st.failed) return;

  // Nothing lost: what no recv took is still there, in sequence; every connection is accepted or queued.
  std::string error;
  std::size_t left = readable_bytes(st.reader.fd(), st, error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(st.consumed + left, st.written) << "stream bytes lost";
  long queued = 0;
  ASSERT_EQ(::fcntl(st.listener.fd(), F_SETFL, O_NONBLOCK), 0);  // accept4's SOCK_NONBLOCK is the new fd's
  while (true) {
    int fd = ::accept4(st.listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) break;
    ::close(fd);
    ++queued;
  }
  EXPECT_EQ(st.accepted + queued, st.connected) << "connections lost";
  EXPECT_EQ(uring::test::open_fd_count(), fds_during) << "accepted sockets left open";

  // Every kind both succeeded and was cancelled (otherwise the fuzz did not reach what it is for).
  long total = 0;
  for (int k = 0; k < 3; ++k) {
    total += st.ok[k] + st.cancelled[k];
    if (count >= 3000) {
      EXPECT_GT(st.ok[k], 0) << name(static_cast<kind>(k));
      EXPECT_GT(st.cancelled[k], 0) << name(static_cast<kind>(k));
    }
  }
  EXPECT_EQ(total, count);
  std::printf(
      "[ cancel fuzz ] %s: %ld operations in %.2f s (seed %llu): recv %ld ok / %ld cancelled, sleep %ld / "
      "%ld, "
      "accept %ld / %ld; %zu stream bytes left, %ld connections queued\n",
      GetParam().name.c_str(), count, seconds, static_cast<unsigned long long>(seed), st.ok[0],
      st.cancelled[0], st.ok[1], st.cancelled[1], st.ok[2], st.cancelled[2], left, queued);
}

INSTANTIATE_BACKENDS(CancelFuzz);

}  // namespace
