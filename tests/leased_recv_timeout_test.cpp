// Timeouts, stop tokens and .nothrow() on the leased receive, on every backend and on native with the buffer
// ring turned off: an interrupted receive takes no bytes, and a stream read by receives that keep being
// interrupted loses, repeats and reorders none.
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
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "leased_recv.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;

// A receive awaited as a task, for when_all.
task<recv_result> as_task(uring::net::basic_recv_awaitable<false> r) { co_return co_await std::move(r); }

// An idle stream: the timed receive fails with ETIMEDOUT naming recv, holds no buffer, and the bytes sent
// afterwards reach the next receive.
TEST_P(LeasedRecv, TimeoutFailsWithEtimedoutAndTakesNoBytes) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::string what;
    std::error_code code;
    try {
      (void)co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(20));
    } catch (const std::system_error& e) {
      code = e.code();
      what = e.what();
    }
    EXPECT_EQ(code, std::error_code(ETIMEDOUT, std::system_category())) << what;
    EXPECT_EQ(what.rfind("recv: ", 0), 0u) << what;
    EXPECT_EQ(pool.available(), 4u);
    EXPECT_EQ(::write(peer, "after", 5), 5);
    std::string got;
    while (got.size() < 5)
      got.append((co_await uring::with_timeout(s.recv(pool), std::chrono::seconds(10))).view());
    EXPECT_EQ(got, "after");
  }(pair.ours, pair.peer.get()));
}

// .nothrow(): the chunk with its size, the error as -errno (no exception), 0 at end of stream.
TEST_P(LeasedRecv, NothrowYieldsTheChunkTheErrorOrEndOfStream) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    recv_result timed_out =
        co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(5));
    EXPECT_EQ(timed_out.res, -ETIMEDOUT);
    EXPECT_FALSE(timed_out);
    EXPECT_EQ(timed_out.error(), std::error_code(ETIMEDOUT, std::system_category()));
    EXPECT_TRUE(timed_out.buffer.empty());
    // The same forms compose either way round.
    recv_result again = co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(5)).nothrow();
    EXPECT_EQ(again.res, -ETIMEDOUT);
    std::stop_source stop;
    stop.request_stop();
    recv_result stopped = co_await uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token());
    EXPECT_EQ(stopped.res, -ECANCELED);
    EXPECT_EQ(::write(peer, "abc", 3), 3);
    ::shutdown(peer, SHUT_WR);
    std::string got;
    for (;;) {
      recv_result r = co_await s.recv(pool).nothrow();
      EXPECT_TRUE(r) << r.error().message();
      if (!r) break;
      EXPECT_EQ(static_cast<std::size_t>(r.res), r.buffer.size());
      if (r.res == 0) break;
      got.append(r.buffer.view());
    }
    EXPECT_EQ(got, "abc");
    EXPECT_EQ((co_await s.recv(pool).nothrow()).res, 0);
  }(pair.ours, pair.peer.get()));
}

// with_stop_token, stopped from another thread while the receive waits.
TEST_P(LeasedRecv, WithStopTokenFromAnotherThreadCancels) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::stop_source stop;
    auto stopper = [](std::stop_source* src) -> task<void> {
      co_await uring::nop();  // the receive waits first
      std::jthread([src] { src->request_stop(); }).join();
    };
    auto [r, unused] = co_await uring::when_all(
        as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())), stopper(&stop));
    EXPECT_EQ(r.res, -ECANCELED);
    EXPECT_EQ(pool.available(), 4u);
    EXPECT_EQ(::write(peer, "x", 1), 1);
    EXPECT_EQ((co_await s.recv(pool)).view(), "x");
  }(pair.ours, pair.peer.get()));
}

// A stream's waits under different tokens: each is ended by its own token only. The state keeps watching
// a token between waits, so a token used by an earlier wait must not reach a later one under another
// token (or none), and a token stopped between waits ends the next wait under it at once.
TEST_P(LeasedRecv, EachWaitIsStoppedByItsOwnTokenOnly) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::stop_source a, b;
    auto stop_then_send = [](std::stop_source* src, int to) -> task<void> {
      co_await uring::nop();  // the receive waits first
      std::jthread([src] { src->request_stop(); }).join();
      co_await uring::nop();  // a stop that reached the wait would have ended it by now
      EXPECT_EQ(::write(to, "x", 1), 1);
    };
    // Under `a`, timed out: `a` is still watched for this stream.
    recv_result r = co_await uring::with_timeout(
        uring::with_stop_token(s.recv(pool).nothrow(), a.get_token()), std::chrono::milliseconds(10));
    EXPECT_EQ(r.res, -ETIMEDOUT);
    // Under `b`: stopping `a` meanwhile leaves it waiting, and the byte sent after ends it. (Each chunk's
    // lease goes back with the statement: a stream holds a share of the pool at most.)
    EXPECT_EQ(std::get<0>(co_await uring::when_all(
                              as_task(uring::with_stop_token(s.recv(pool).nothrow(), b.get_token())),
                              stop_then_send(&a, peer)))
                  .res,
              1);
    // Under no token of its own, in a task whose token is not `b`: stopping `b` meanwhile leaves it waiting.
    EXPECT_EQ(
        std::get<0>(co_await uring::when_all(as_task(s.recv(pool).nothrow()), stop_then_send(&b, peer))).res,
        1);
    // Under `b` again, stopped before this wait: it ends at once, and takes no byte.
    EXPECT_EQ(::write(peer, "y", 1), 1);
    r = co_await uring::with_stop_token(s.recv(pool).nothrow(), b.get_token());
    EXPECT_EQ(r.res, -ECANCELED);
    EXPECT_EQ((co_await s.recv(pool)).view(), "y");
    EXPECT_EQ(pool.available(), 4u);
  }(pair.ours, pair.peer.get()));
}

// The awaiting task's token (none given to the receive), stopped from another thread: it ends the task's
// receive waiting then, and every later one.
TEST_P(LeasedRecv, TheAwaitingTasksTokenEndsItsReceives) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    std::stop_source stop;
    std::vector<int> results;
    auto receive_thrice = [](tcp_stream& in, buffer_pool& p, int to, std::vector<int>* out) -> task<void> {
      EXPECT_EQ(::write(to, "x", 1), 1);
      out->push_back((co_await in.recv(p).nothrow()).res);  // the task's token, not yet stopped
      out->push_back((co_await in.recv(p).nothrow()).res);  // waits until the stop
      out->push_back((co_await in.recv(p).nothrow()).res);  // stopped before it waits
    };
    auto stopper = [](std::stop_source* src, const std::vector<int>* seen) -> task<void> {
      while (seen->empty()) co_await uring::nop();  // the first has its byte, and the second waits
      std::jthread([src] { src->request_stop(); }).join();
    };
    co_await uring::when_all(
        uring::with_stop_token(receive_thrice(s, pool, peer, &results), stop.get_token()),
        stopper(&stop, &results));
    EXPECT_EQ(results, (std::vector<int>{1, -ECANCELED, -ECANCELED}));
    EXPECT_EQ(pool.available(), 4u);
  }(pair.ours, pair.peer.get()));
}

// Waiting for a buffer to come back (pool exhausted) also times out.
TEST_P(LeasedRecv, TimeoutWhileWaitingForABuffer) {
  stream_pair pair;
  const std::string sent = noise(1000, 4);
  write_fully(pair.peer.get(), sent);
  run([](tcp_stream& s, const std::string& sent) -> task<void> {
    buffer_pool pool({.count = 1, .size = 16});
    leased_buffer only = co_await s.recv(pool);
    recv_result r = co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(20));
    EXPECT_EQ(r.res, -ETIMEDOUT);
    std::string got(only.view());
    only.reset();
    while (got.size() < sent.size()) got.append((co_await s.recv(pool)).view());
    EXPECT_TRUE(got == sent) << "bytes differ";
  }(pair.ours, sent));
}

// A timed receive that got its chunk leaves the timer armed for its (later) deadline: a following receive
// with an earlier deadline still times out on time, and one without a deadline is not interrupted when
// the old timer fires.
TEST_P(LeasedRecv, DeadlinesOfEarlierReceivesDoNotLeak) {
  stream_pair pair;
  run([](tcp_stream& s, int peer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64});
    EXPECT_EQ(::write(peer, "1", 1), 1);
    EXPECT_EQ((co_await uring::with_timeout(s.recv(pool), std::chrono::seconds(30))).view(), "1");
    const auto start = std::chrono::steady_clock::now();
    recv_result r = co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::milliseconds(20));
    EXPECT_EQ(r.res, -ETIMEDOUT);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
        << "waited for the old timer";
    // A 30 ms deadline that the receive meets, then a receive without one across that deadline.
    EXPECT_EQ(::write(peer, "2", 1), 1);
    EXPECT_EQ((co_await uring::with_timeout(s.recv(pool), std::chrono::milliseconds(30))).view(), "2");
    auto late_writer = [](int fd) -> task<void> {
      co_await uring::sleep_for(std::chrono::milliseconds(80));  // past the deadline above
      EXPECT_EQ(::write(fd, "3", 1), 1);
    };
    auto [l, unused] = co_await uring::when_all(as_task(s.recv(pool).nothrow()), late_writer(peer));
    EXPECT_EQ(l.res, 1) << l.error().message();
    EXPECT_EQ(l.buffer.view(), "3");
  }(pair.ours, pair.peer.get()));
}

// The guarantee under fire: a stream of varied writes read by receives that keep being timed out (at once,
// or after a moment) and stopped (before they wait, while they wait, from another thread), with the pool
// small enough to run dry. Every byte arrives once, in order.
TEST_P(LeasedRecv, InterruptedReceivesLoseAndRepeatNoByteMidStream) {
  stream_pair pair;
  const std::string sent = noise(1 << 20, 99);
  struct counts {
    int timeouts = 0, stops = 0, chunks = 0;
  };
  counts n;
  std::string got = run([](tcp_stream& s, int peer, const std::string& sent, counts& n) -> task<std::string> {
    buffer_pool pool({.count = 8, .size = 512, .max_per_stream = 8});
    std::string got;
    std::size_t written = 0;
    std::vector<leased_buffer> held;  // some leases kept a while, so the pool runs dry now and then
    auto take = [&](recv_result r) {
      if (r.res > 0) {
        ++n.chunks;
        held.push_back(std::move(r.buffer));
        if (held.size() >= 6) {
          for (auto& l : held) got.append(l.view());
          held.clear();
        }
      } else if (r.res == -ETIMEDOUT) {
        ++n.timeouts;
      } else if (r.res == -ECANCELED) {
        ++n.stops;
      } else {
        ADD_FAILURE() << "recv: " << r.error().message() << " (" << r.res << ")";
      }
    };
    auto stop_later = [](std::stop_source* src, bool other_thread) -> task<void> {
      co_await uring::nop();
      if (other_thread) {
        std::jthread([src] { src->request_stop(); }).join();
      } else {
        src->request_stop();
      }
    };
    for (unsigned round = 0; written < sent.size(); ++round) {
      if (round % 3 != 2) {  // every third round nothing new is sent: interrupts then meet an empty socket
        const std::size_t piece = std::min<std::size_t>(sent.size() - written, 1 + (round * 7919u) % 3000);
        ssize_t w = ::send(peer, sent.data() + written, piece, MSG_DONTWAIT);
        if (w > 0) written += static_cast<std::size_t>(w);
      }
      // Nothing in flight (all read, all returned): a plain receive would wait forever; interrupts only.
      switch (round % 5) {
        case 0:
          take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::nanoseconds(0)));
          break;
        case 1:
          take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::microseconds(200)));
          break;
        case 2: {
          std::stop_source stop;
          stop.request_stop();
          take(co_await uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token()));
          break;
        }
        default: {
          std::stop_source stop;
          auto [r, unused] = co_await uring::when_all(
              as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())),
              stop_later(&stop, round % 5 == 4));
          take(std::move(r));
          break;
        }
      }
      if (round % 7 == 0) {
        for (auto& l : held) got.append(l.view());
        held.clear();
      }
      if (round % 10 == 9) {
        // Catch up with the writes, then interrupt receives that meet an empty stream (on every backend).
        for (auto& l : held) got.append(l.view());
        held.clear();
        while (got.size() < written) got.append((co_await s.recv(pool)).view());
        std::stop_source stop;
        auto [r, unused] = co_await uring::when_all(
            as_task(uring::with_stop_token(s.recv(pool).nothrow(), stop.get_token())),
            stop_later(&stop, false));
        take(std::move(r));
        take(co_await uring::with_timeout(s.recv(pool).nothrow(), std::chrono::nanoseconds(0)));
      }
    }
    for (auto& l : held) got.append(l.view());
    held.clear();
    ::shutdown(peer, SHUT_WR);
    for (;;) {
      leased_buffer l = co_await s.recv(pool);
      if (l.empty()) break;
      got.append(l.view());
    }
    EXPECT_EQ(pool.available(), 8u);
    co_return got;
  }(pair.ours, pair.peer.get(), sent, n));
  EXPECT_EQ(got.size(), sent.size());
  EXPECT_TRUE(got == sent) << "bytes lost, repeated or reordered";
  EXPECT_GT(n.timeouts, 0);
  EXPECT_GT(n.stops, 0);
  EXPECT_GT(n.chunks, 0);
}

INSTANTIATE_LEASED_RECV();

}  // namespace
