// An executor's shutdown ends in bounded time with zero-copy sends in flight whose peer never reads: their
// notifications would only come once the peer read the data, so the shutdown resets those connections
// (and would close its ring without them as a last resort). Natively this exercises both the plain
// send_zc awaitable (write_all_zc) and write_all's zero-copy step; elsewhere they are copies and the
// shutdown is immediate. Nothing may leak (LeakSanitizer, the fd check) or be touched after it is freed.
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include <uring/executor_handle.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "tcp_pair.hpp"
#include "test_util.hpp"

namespace {

using uring::task;
using uring::net::tcp_stream;
using uring::test::unique_fd;

using uring::test::tcp_pair;

int queued_at(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

// Runs `body` (which makes, runs and destroys an executor) on a thread of its own, so that the test can
// wait for its end with a deadline. Joined on destruction.
class owner_thread {
 public:
  template <class F>
  explicit owner_thread(F body)
      : thread_([this, body = std::move(body)]() mutable {
          body();
          std::lock_guard lock(m_);
          finished_ = true;
          cv_.notify_all();
        }) {}
  owner_thread(const owner_thread&) = delete;
  owner_thread& operator=(const owner_thread&) = delete;
  ~owner_thread() { thread_.join(); }
  bool ends_within(std::chrono::seconds limit) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, limit, [&] { return finished_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread thread_;  // last: it starts once the members it uses are made
};

class ZeroCopyShutdown : public uring::test::backend_test {};

TEST_P(ZeroCopyShutdown, AnExecutorWithSendsToAPeerThatNeverReadsShutsDownInBoundedTime) {
  tcp_pair plain, stepped;  // write_all_zc (the send_zc awaitable), and write_all (its zero-copy step)
  const std::string big(64 << 20, 'z');  // far more than both socket buffers hold
  std::atomic<int> sending{0};
  uring::executor_handle handle;  // set before the owner thread starts running
  std::atomic<bool> has_handle{false};
  owner_thread owner([&] {
    uring::executor ex(options());
    auto send = [](unique_fd fd, const std::string* data, bool zc, std::atomic<int>* sending) -> task<void> {
      tcp_stream s(fd.release());
      ++*sending;
      if (zc) {
        co_await s.write_all_zc(*data);
      } else {
        co_await s.write_all(*data);
      }
      ADD_FAILURE() << "a send to a peer that never reads completed";
    };
    uring::spawn(ex, send(std::move(plain.sender), &big, true, &sending));
    uring::spawn(ex, send(std::move(stepped.sender), &big, false, &sending));
    handle = ex.handle();
    has_handle = true;
    ex.run();  // until stop(); then the destructor shuts the sends down
  });
  // Wait (bounded) until both sends have started and data sits at both peers: the kernel holds pages.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!has_handle || sending < 2 || queued_at(plain.peer.get()) == 0 ||
          queued_at(stepped.peer.get()) == 0) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(sending.load(), 2);
  EXPECT_GT(queued_at(plain.peer.get()), 0);
  EXPECT_GT(queued_at(stepped.peer.get()), 0);
  if (!has_handle) {
    ADD_FAILURE() << "the executor did not start within 30 s";
    std::abort();  // its thread cannot be stopped without the handle: crash rather than hang
  }
  const auto stop_at = std::chrono::steady_clock::now();
  handle.post([] { uring::executor::current()->stop(); });
  const bool done = owner.ends_within(std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - stop_at;
  EXPECT_TRUE(done) << "the executor's shutdown still waits for zero-copy notifications after 60 s";
  // Had it not ended, the peers closing lets it (the kernel then frees the pages); the owner is joined.
  plain.peer.reset();
  stepped.peer.reset();
  EXPECT_LT(took, std::chrono::seconds(30))
      << "the shutdown took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// The last resort: the stream is closed (by another coroutine) while its zero-copy send waits for the
// notification, so its connection can no longer be reset by fd, and the orphaned socket keeps the pages
// while the peer does not read. The shutdown closes its ring without that notification; the frame then
// goes, nothing leaks, and no completion can reach it.
TEST_P(ZeroCopyShutdown, ASendWhoseStreamWasClosedDoesNotHoldTheShutdownEither) {
  tcp_pair pair;
  const std::string big(64 << 20, 'z');
  const auto started = std::chrono::steady_clock::now();
  owner_thread owner([&] {
    tcp_stream stream(pair.sender.release());  // outlives the executor, as the sender's frame uses it
    uring::executor ex(options());
    ex.run([](tcp_stream* s, int peer, const std::string* data) -> task<void> {
      auto sender = [](const tcp_stream* s, const std::string* d) -> task<void> {
        try {
          co_await s->write_all_zc(*d);
        } catch (const std::system_error&) {
          // Elsewhere a copy: the close fails the send (EBADF or ECANCELED), which is fine.
        }
      };
      uring::spawn(sender(s, data));
      // Bounded: data reaches the peer at once on every backend.
      for (int i = 0; i < 10000 && queued_at(peer) == 0; ++i) {
        co_await uring::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_GT(queued_at(peer), 0);
      co_await s->close();
    }(&stream, pair.peer.get(), &big));
  });  // the sender's frame is still suspended natively: the destructor shuts it down
  const bool done = owner.ends_within(std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(done) << "the executor's shutdown still waits for a zero-copy notification after 60 s";
  pair.peer.reset();  // the kernel frees the orphaned socket's pages now (and ends a shutdown still waiting)
  EXPECT_LT(took, std::chrono::seconds(30));
}

INSTANTIATE_BACKENDS(ZeroCopyShutdown);

}  // namespace
