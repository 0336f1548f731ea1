// send_queue: pushes leave in order, byte for byte, in fewer sends than pushes (natively bundled sends from
// the queue's own buffer ring, else one sendmsg of the queued buffers each); a full queue makes a push
// wait (bounded memory), and a deadline or a stop ends that wait; a failed send fails the next push and flush
// and sticks; a queue destroyed with a send in flight and a push waiting ends both cleanly. On every backend,
// and natively with URING_DISABLE=send_bundle (the fallback on a real ring).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <optional>
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
using namespace std::chrono_literals;
using uring::const_buffer;
using uring::task;

class SendQueue : public backend_test {
 protected:
  [[nodiscard]] bool bundles_disabled() const {
    return options().disable.contains(uring::feature::send_bundle);
  }
  // Whether the queue should send by bundles: natively where the kernel has them and nobody disabled them.
  [[nodiscard]] bool expect_bundles() const {
    return !emulated() && !bundles_disabled() && uring::probed_kernel().send_bundle;
  }
};

std::vector<backend_config> send_queue_backends() {
  return backends_and_native_without(uring::feature::send_bundle, "native_no_send_bundle");
}

// Reads `peer` to end of stream on a thread of its own.
struct peer_reader {
  std::string got;
  std::thread thread;
  explicit peer_reader(int fd)
      : thread([this, fd] {
          char buf[65536];
          for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
            got.append(buf, static_cast<std::size_t>(n));
          }
        }) {}
  std::string join() {
    thread.join();
    return std::move(got);
  }
};

task<int> push_all(send_queue& q, const std::string& bytes, std::size_t at, std::size_t n) {
  try {
    co_await q.push(const_buffer(bytes.data() + at, n));
  } catch (const std::system_error& e) {
    co_return e.code().value();
  }
  co_return 0;
}

// Messages of 1 to 200 bytes, a few MB in all: they arrive in order byte for byte, and take far fewer
// send operations than pushes (each send takes everything pushed while the one before it was in flight).
TEST_P(SendQueue, ManySmallPushesArriveInOrderInFewerSends) {
  stream_pair pair;
  const std::string payload = noise(static_cast<std::size_t>(scaled(4 << 20)), 11);
  peer_reader reader(pair.peer.get());
  std::uint64_t pushes = 0, sends = 0;
  bool bundles = false;
  uring::executor ex(options());
  ex.run([](tcp_stream& s, const std::string& payload, std::uint64_t& pushes, std::uint64_t& sends,
            bool& bundles) -> task<void> {
    send_queue q(s, {.count = 16, .size = 4096});
    bundles = q.uses_bundles();
    std::uint32_t seed = 7;
    for (std::size_t at = 0; at < payload.size(); ++pushes) {
      seed = seed * 1664525u + 1013904223u;
      const std::size_t n = std::min<std::size_t>(1 + (seed >> 24) % 200, payload.size() - at);
      co_await q.push(const_buffer(payload.data() + at, n));
      EXPECT_LE(q.queued(), q.capacity());
      at += n;
    }
    co_await q.flush();
    EXPECT_EQ(q.queued(), 0u);
    sends = q.sends();
    co_await s.shutdown(SHUT_WR);
  }(pair.ours, payload, pushes, sends, bundles));
  const std::string got = reader.join();
  ASSERT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes out of order or changed";
  EXPECT_EQ(bundles, expect_bundles());
  const auto& stats = ex.stats();
  const std::uint64_t bundled = stats.started(uring::op_kind::send_bundle);
  const std::uint64_t sendmsgs = stats.started(uring::op_kind::sendmsg);
  EXPECT_LT(sends * 10, pushes) << sends << " sends for " << pushes << " pushes";
  if (bundles) {
    EXPECT_GT(bundled, 0u);
    EXPECT_EQ(sendmsgs, 0u);
    EXPECT_GE(bundled + stats.started(uring::op_kind::send), sends);
  } else {
    EXPECT_EQ(bundled, 0u);
    EXPECT_EQ(sendmsgs, sends);
  }
}

// A peer that does not read: the socket fills, then the queue, and a push waits; under with_timeout it
// fails ETIMEDOUT having copied nothing, and the queue never held more than its capacity. Once the peer
// reads, everything pushed before arrives in order, without the timed-out message.
TEST_P(SendQueue, AFullQueueMakesAPushWaitAndADeadlineEndsIt) {
  stream_pair pair;
  const std::string message = pattern(1000, 3);
  std::optional<peer_reader> reader;
  std::uint64_t accepted = 0;
  int timed_out = 0;
  run([](tcp_stream& s, int peer, const std::string& message, std::optional<peer_reader>& reader,
         std::uint64_t& accepted, int& timed_out) -> task<void> {
    send_queue q(s, {.count = 4, .size = 4096});
    auto fill = [](send_queue& q, const std::string& m, std::uint64_t& n) -> task<void> {
      for (;;) {
        co_await q.push(m);
        ++n;
        EXPECT_LE(q.queued(), q.capacity());
      }
    };
    try {
      co_await uring::with_timeout(fill(q, message, accepted), 100ms);
    } catch (const std::system_error& e) {
      timed_out = e.code().value();
    }
    EXPECT_LE(q.queued(), q.capacity());
    EXPECT_GT(q.queued() + message.size(), q.capacity()) << "the push waited with room in the queue";
    reader.emplace(peer);
    co_await q.flush();
    co_await s.shutdown(SHUT_WR);
  }(pair.ours, pair.peer.get(), message, reader, accepted, timed_out));
  EXPECT_EQ(timed_out, ETIMEDOUT);
  const std::string got = reader->join();
  ASSERT_EQ(got.size(), accepted * message.size());
  for (std::uint64_t i = 0; i < accepted; ++i) {
    ASSERT_EQ(got.compare(i * message.size(), message.size(), message), 0) << "message " << i;
  }
}

// A stop request ends a push waiting for room (the socket is full) with ECANCELED, having copied nothing;
// the queue goes on: once the peer reads, everything pushed before arrives, in order.
TEST_P(SendQueue, AStopEndsAWaitingPushAndTheQueueGoesOn) {
  stream_pair pair;
  std::string filler;
  const std::string block = pattern(4096, 4);
  while (::send(pair.ours.fd(), block.data(), block.size(), MSG_DONTWAIT) > 0) filler += block;
  const std::string message = pattern(1000, 8);
  std::optional<peer_reader> reader;
  std::uint64_t accepted = 0;
  int stopped = 0;
  run([](tcp_stream& s, int peer, const std::string& message, std::optional<peer_reader>& reader,
         std::uint64_t& accepted, int& stopped) -> task<void> {
    send_queue q(s, {.count = 4, .size = 4096});
    std::stop_source source;
    bool waiting = false;  // the stopper runs only while the pusher is suspended: waiting for room
    auto fill = [](send_queue& q, const std::string& m, std::uint64_t& n, bool& waiting) -> task<int> {
      for (;;) {
        waiting = true;
        try {
          co_await q.push(m);
        } catch (const std::system_error& e) {
          co_return e.code().value();
        }
        waiting = false;
        ++n;
      }
    };
    auto stopper = [](std::stop_source& source, const bool& waiting) -> task<void> {
      while (!waiting) co_await uring::nop();
      source.request_stop();
    };
    auto [err, unused] = co_await uring::when_all(
        uring::with_stop_token(fill(q, message, accepted, waiting), source.get_token()),
        stopper(source, waiting));
    stopped = err;
    reader.emplace(peer);
    co_await q.flush();
    co_await s.shutdown(SHUT_WR);
  }(pair.ours, pair.peer.get(), message, reader, accepted, stopped));
  EXPECT_EQ(stopped, ECANCELED);
  const std::string got = reader->join();
  ASSERT_EQ(got.size(), filler.size() + accepted * message.size());
  EXPECT_EQ(got.compare(0, filler.size(), filler), 0);
  for (std::uint64_t i = 0; i < accepted; ++i) {
    ASSERT_EQ(got.compare(filler.size() + i * message.size(), message.size(), message), 0) << "message " << i;
  }
}

// The peer goes away: the send fails, the next flush says why, and every push and flush after it too.
TEST_P(SendQueue, AFailedSendFailsTheNextPushAndFlushAndSticks) {
  stream_pair pair;
  pair.peer.reset();
  int flushed = 0, pushed_after = 0, flushed_after = 0;
  run([](tcp_stream& s, int& flushed, int& pushed_after, int& flushed_after) -> task<void> {
    send_queue q(s);
    co_await q.push("hello");
    try {
      co_await q.flush();
    } catch (const std::system_error& e) {
      flushed = e.code().value();
    }
    try {
      co_await q.push("again");
    } catch (const std::system_error& e) {
      pushed_after = e.code().value();
    }
    try {
      co_await q.flush();
    } catch (const std::system_error& e) {
      flushed_after = e.code().value();
    }
  }(pair.ours, flushed, pushed_after, flushed_after));
  EXPECT_TRUE(flushed == EPIPE || flushed == ECONNRESET) << flushed;
  EXPECT_EQ(pushed_after, flushed);
  EXPECT_EQ(flushed_after, flushed);
}

// A reset TCP connection (the peer closes with unread data and SO_LINGER 0): the failure comes out of the
// next push or flush.
TEST_P(SendQueue, AResetConnectionFailsThePushesThatFollow) {
  int error = 0;
  run([](int& error) -> task<void> {
    auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
    tcp_stream client = co_await tcp_stream::connect_to(listener.local_address());
    tcp_stream server = co_await listener.accept();
    const ::linger l{1, 0};
    EXPECT_EQ(::setsockopt(server.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
    co_await server.close();  // RST
    send_queue q(client);
    const std::string chunk = pattern(4096, 1);
    for (int i = 0; i < 1000 && error == 0; ++i) {
      try {
        co_await q.push(chunk);
        if (i % 16 == 15) co_await q.flush();
      } catch (const std::system_error& e) {
        error = e.code().value();
      }
    }
  }(error));
  EXPECT_TRUE(error == ECONNRESET || error == EPIPE) << error;
}

// The queue goes while its send is stuck (the socket is full and the peer does not read) and a push waits
// for room: the push fails ECANCELED, the send is cancelled, and the peer then reads a prefix of the bytes.
TEST_P(SendQueue, DestroyingTheQueueMidSendIsClean) {
  stream_pair pair;
  std::string filler;  // the socket full before the queue starts: its first send cannot complete
  const std::string block = pattern(4096, 2);
  while (::send(pair.ours.fd(), block.data(), block.size(), MSG_DONTWAIT) > 0) filler += block;
  const std::string payload = noise(1 << 20, 5);
  int waiter = 0;
  run([](tcp_stream& s, const std::string& payload, int& waiter) -> task<void> {
    std::optional<send_queue> q;
    q.emplace(s, send_queue::options{.count = 4, .size = 4096});
    // The destroyer runs only while the pusher is suspended, which a push is only when it waits for room
    // (for good: no send completes).
    bool waiting = false;
    auto pusher = [](send_queue& q, const std::string& payload, bool& waiting) -> task<int> {
      for (std::size_t at = 0; at < payload.size(); at += 1024) {
        waiting = true;
        const int err = co_await push_all(q, payload, at, 1024);
        waiting = false;
        if (err != 0) co_return err;
      }
      co_return 0;
    };
    auto destroyer = [](std::optional<send_queue>& q, const bool& waiting) -> task<void> {
      while (!waiting) co_await uring::nop();
      q.reset();
    };
    auto [err, unused] = co_await uring::when_all(pusher(*q, payload, waiting), destroyer(q, waiting));
    waiter = err;
    for (int i = 0; i < 4; ++i) co_await uring::nop();  // the cancelled send's completion settles
  }(pair.ours, payload, waiter));
  EXPECT_EQ(waiter, ECANCELED);
  pair.ours = tcp_stream();  // closed: the peer reads to end of stream
  peer_reader reader(pair.peer.get());
  const std::string got = reader.join();
  ASSERT_GE(got.size(), filler.size());
  EXPECT_TRUE(got.compare(0, filler.size(), filler) == 0);
  const std::string tail = got.substr(filler.size());
  EXPECT_TRUE(tail == payload.substr(0, tail.size())) << "not a prefix of the bytes pushed";
}

// An executor shut down while a push waits for room, the queue in another coroutine's frame: the shutdown
// destroys both frames, the waiting push taking itself out of the queue if its frame goes first (ASan's
// runs check that nothing is touched after it is gone).
TEST_P(SendQueue, AnExecutorShutDownWithAPushWaitingIsClean) {
  stream_pair pair;
  const std::string block = pattern(4096, 6);
  while (::send(pair.ours.fd(), block.data(), block.size(), MSG_DONTWAIT) > 0) {
  }
  bool waiting = false;
  {
    uring::executor ex(options());
    ex.run([](tcp_stream& s, const std::string& block, bool& waiting) -> task<void> {
      auto owner = [](tcp_stream& s, const std::string& block, bool& waiting) -> task<void> {
        send_queue q(s, {.count = 2, .size = 4096});
        auto pusher = [](send_queue& q, const std::string& block, bool& waiting) -> task<void> {
          for (;;) {
            waiting = true;
            co_await q.push(block);  // the socket is full: the queue fills, then this waits for good
            waiting = false;
          }
        };
        uring::spawn(pusher(q, block, waiting));
        co_await uring::sleep_for(std::chrono::hours(1));  // until the shutdown
      };
      uring::spawn(owner(s, block, waiting));
      while (!waiting) co_await uring::nop();
    }(pair.ours, block, waiting));
  }
  EXPECT_TRUE(waiting);
}

// The fallback, whatever the kernel: without the ring a queue sends by sendmsg, and a native plan says
// why where the feature is off.
TEST_P(SendQueue, WithoutBundlesTheQueueSendsBySendmsg) {
  stream_pair pair;
  const std::string payload = pattern(64 * 100, 9);
  peer_reader reader(pair.peer.get());
  uring::executor ex(options());
  ex.run([](tcp_stream& s, const std::string& payload) -> task<void> {
    send_queue q(s, {.use_ring = false});
    EXPECT_FALSE(q.uses_bundles());
    for (std::size_t at = 0; at < payload.size(); at += 64)
      co_await q.push(const_buffer(payload.data() + at, 64));
    co_await q.flush();
    co_await s.shutdown(SHUT_WR);
  }(pair.ours, payload));
  EXPECT_EQ(reader.join(), payload);
  EXPECT_EQ(ex.stats().started(uring::op_kind::send_bundle), 0u);
  EXPECT_GT(ex.stats().started(uring::op_kind::sendmsg), 0u);
  EXPECT_LT(ex.stats().started(uring::op_kind::sendmsg), 100u);
  EXPECT_EQ(ex.plan().send_bundle, expect_bundles());
  if (!emulated() && !ex.plan().send_bundle) {  // the emulation has no ring features at all: no note
    const auto& notes = ex.plan().notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(),
                            [](const std::string& n) { return n.rfind("send_queue:", 0) == 0; }));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SendQueue, ::testing::ValuesIn(send_queue_backends()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
