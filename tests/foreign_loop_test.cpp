// An executor driven by a foreign epoll loop through notify_fd() + poll(): the loop's only wake-up source
// is the notify fd, so any work the executor leaves stranded shows as a loop that never finishes.
// Every backend (DEFER_TASKRUN included: the kernel signals only on its deferred list's first entry).
#include <gtest/gtest.h>

#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::task;

class ForeignLoop : public uring::test::backend_test {};

// Polls `ex` whenever its notify fd is readable until `done`; false if the loop waited 5 s for nothing.
bool drive(executor& ex, const std::atomic<bool>& done, long* polls = nullptr) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = ex.notify_fd();
  ::epoll_ctl(ep, EPOLL_CTL_ADD, e.data.fd, &e);
  bool ok = true;
  while (!done.load()) {
    epoll_event got[1];
    int n = ::epoll_wait(ep, got, 1, 5000);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    ex.poll();
    if (polls != nullptr) ++*polls;
  }
  ::close(ep);
  return ok;
}

task<void> tick(int& n) {
  co_await uring::nop();
  ++n;
}

task<void> work(int rd, uring::event& ev, executor& other, std::latch& reading, std::atomic<bool>& posted,
                std::atomic<bool>& done) {
  co_await uring::sleep_for(2ms);  // a timer (the emulation's timerfd, natively the kernel)
  int ticks = 0;
  for (int i = 0; i < 50; ++i) uring::spawn(tick(ticks));  // ready-list work across several polls
  while (ticks < 50) co_await uring::sleep_for(100us);
  reading.count_down();
  char c = 0;
  co_await uring::read(rd, uring::mutable_buffer(&c, 1));  // readiness, fed by another thread
  EXPECT_EQ(c, 'x');
  co_await ev.wait();                                              // a notify from another thread
  int there = co_await uring::submit_to(other, [] { return 7; });  // hops through another executor
  EXPECT_EQ(there, 7);
  while (!posted.load()) co_await uring::sleep_for(100us);
  done = true;
}

TEST_P(ForeignLoop, EpollLoopDrivesAllKindsOfWork) {
  executor ex(options());
  const int fd = ex.notify_fd();
  EXPECT_EQ(ex.notify_fd(), fd) << "notify_fd must be stable";
  uring::test::pipe_pair pipe;
  uring::event ev;
  uring::executor_group other(1, options());
  std::latch reading(1);
  std::atomic<bool> posted{false}, done{false};
  uring::spawn(ex, work(pipe.read_end.get(), ev, other.at(0), reading, posted, done));
  std::thread helper([&] {
    reading.wait();
    (void)!::write(pipe.write_end.get(), "x", 1);
    ev.notify();
    ex.post([&] { posted = true; });  // a plain post from a thread with no executor
  });
  EXPECT_TRUE(drive(ex, done)) << "the notify fd stayed quiet while work was pending";
  helper.join();
  EXPECT_TRUE(done.load());
}

// Many completions in one burst: with DEFER_TASKRUN the kernel signals once for the whole burst, and
// each poll must leave the fd readable until nothing is left.
task<void> burst(std::atomic<bool>& done) {
  for (int round = 0; round < 20; ++round) {
    std::vector<task<void>> sleeps;
    for (int i = 0; i < 64; ++i) sleeps.push_back([]() -> task<void> { co_await uring::sleep_for(200us); }());
    co_await uring::when_all(std::move(sleeps));
  }
  done = true;
}

TEST_P(ForeignLoop, BurstsOfCompletionsAreNotStranded) {
  executor ex(options());
  std::atomic<bool> done{false};
  uring::spawn(ex, burst(done));
  long polls = 0;
  EXPECT_TRUE(drive(ex, done, &polls));
  EXPECT_GT(polls, 0);
}

// A completion whose signal poll() itself cleared resumes a coroutine that sends a message (resume_on):
// the message must leave in that same poll, as nothing else would make the fd readable again.
task<void> hop_after_wait(uring::event& ev, executor& other, executor& home, std::atomic<bool>& done) {
  co_await ev.wait();
  co_await uring::resume_on(other);
  co_await uring::resume_on(home);
  done = true;
}

TEST_P(ForeignLoop, MessagesFromResumedCoroutinesLeaveInTheSamePoll) {
  executor ex(options());
  (void)ex.notify_fd();
  uring::executor_group other(1, options());
  uring::event ev;
  std::atomic<bool> done{false};
  uring::spawn(ex, hop_after_wait(ev, other.at(0), ex, done));
  ex.poll();    // runs the coroutine up to its wait
  ev.notify();  // completes the wait (natively on this thread's way out of the write)
  ex.poll();    // reaps it: the coroutine sends itself to `other`
  EXPECT_TRUE(drive(ex, done)) << "the hop to another executor was left in the submission queue";
}

TEST_P(ForeignLoop, PollIsForTheOwnerAndNotInsideRun) {
  executor ex(options());
  (void)ex.notify_fd();
  std::thread other([&] {
    EXPECT_THROW(ex.poll(), std::logic_error);
    EXPECT_THROW((void)ex.notify_fd(), std::logic_error);
  });
  other.join();
  ex.run([](executor& ex) -> task<void> {
    EXPECT_THROW(ex.poll(), std::logic_error);
    co_return;
  }(ex));
}

INSTANTIATE_BACKENDS(ForeignLoop);

}  // namespace
