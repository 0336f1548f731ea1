// fork() with live rings: native rings are excluded from fork (io_uring_ring_dontfork), so a child gets no
// mapping of its parent's SQ and CQ; it builds executors of its own, which do real work (pipes, timers,
// MSG_RING between two of them), and the parent's executors keep working afterwards, a hundred forks on.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <uring/uring.hpp>

#include "seccomp_child.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

// A fork while this process has threads (the executor_group's) is what the test is about; TSan lets the
// child run on only when asked to. TSAN_OPTIONS from the environment still takes precedence over this.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }

namespace {

using uring::executor;
using uring::executor_group;
using uring::task;
using uring::test::child_result;
using uring::test::pipe_pair;

executor::options native() {
  executor::options o;
  o.backend = uring::backend_kind::native;
  return o;
}

// Mappings of io_uring rings in this process (their SQ, CQ and SQE arrays), from /proc/self/maps.
int io_uring_mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("io_uring") != std::string::npos) ++n;
  }
  return n;
}

task<std::string> read_text(int fd) {
  char buf[64];
  std::size_t n = co_await uring::read(fd, buf);
  co_return std::string(buf, n);
}

task<std::string> pipe_round_trip(std::string_view text) {
  pipe_pair p;
  co_await uring::write(p.write_end.get(), text);
  co_return co_await read_text(p.read_end.get());
}

task<void> read_into(int fd, std::string& out) { out = co_await read_text(fd); }

// A read of a pipe handed to `ex`'s ring (poll() submits it) and left in flight: what the parent has
// going on across a fork. finish() feeds the pipe and turns the loop until the read has completed. Forks
// happen outside run(): a child forked from inside a coroutine would find that coroutine's executor
// running on its thread, and could not run one of its own.
class read_in_flight {
 public:
  explicit read_in_flight(executor& ex) : ex_(ex) {
    uring::spawn(ex_, read_into(pipe_.read_end.get(), got_));
    ex_.poll();
  }
  std::string finish() {
    if (::write(pipe_.write_end.get(), "after", 5) != 5)
      throw std::system_error(errno, std::system_category(), "write");
    while (got_.empty()) ex_.poll();  // the kernel completes the read at once: no sleep, no timer
    return got_;
  }

 private:
  executor& ex_;
  pipe_pair pipe_;
  std::string got_;
};

// Hops to `other` and back (MSG_RING both ways between native executors), doing a pipe round trip there.
task<std::string> hop_and_back(executor& home, executor& other) {
  co_await uring::resume_on(other);
  std::string there = co_await pipe_round_trip("there");
  co_await uring::resume_on(home);
  co_return there;
}

// In a forked child: an executor of its own, real work on it, and a second executor on a thread of its own
// to message. Reports through the exit status: 0, or a line saying what went wrong and a code.
int child_work() {
  if (int n = io_uring_mappings(); n != 0) {
    std::printf("the child inherited %d io_uring mappings\n", n);
    return 2;
  }
  executor ex(native());
  if (ex.plan().backend != uring::backend_kind::native || !ex.plan().msg_ring) {
    std::printf("child plan: %s\n", uring::to_string(ex.plan()).c_str());
    return 3;
  }
  if (ex.run(pipe_round_trip("child")) != "child") return 4;
  auto start = std::chrono::steady_clock::now();
  ex.run([]() -> task<void> { co_await uring::sleep_for(1ms); }());
  if (std::chrono::steady_clock::now() - start < 1ms) return 5;
  executor_group group(1, native());
  if (ex.run(hop_and_back(ex, group.at(0))) != "there") return 6;
  group.stop();
  group.join();
  if (ex.stats().messages_sent_by_ring == 0 || group.at(0).stats().messages_sent_by_ring == 0) {
    std::printf("the hops did not go by MSG_RING\n");
    return 7;
  }
  return 0;
}

TEST(Fork, RingsAreNotMappedIntoAChild) {
  executor ex(native());
  ASSERT_GT(io_uring_mappings(), 0) << "the parent's ring should be visible in /proc/self/maps";
  child_result r = uring::test::run_in_child([] {
    std::printf("mappings=%d\n", io_uring_mappings());
    return 0;
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_NE(r.output.find("mappings=0\n"), std::string::npos) << r.output;
}

// A child forked while the parent has an executor with a read in flight, and a group of executors on
// threads of their own, runs executors of its own (child_work); the parent's then complete the read they
// had started and take new work.
TEST(Fork, AChildRunsItsOwnExecutorsAndTheParentsKeepWorking) {
  executor ex(native());
  executor_group group(2, native());
  read_in_flight pending(ex);
  child_result r = uring::test::run_in_child(child_work);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_EQ(pending.finish(), "after");
  EXPECT_EQ(ex.run(pipe_round_trip("parent")), "parent");
  EXPECT_EQ(ex.run(hop_and_back(ex, group.at(1))), "there");
  group.stop();
  group.join();
}

// A hundred forks, each child building and running an executor of its own while the parent's rings are
// live (one with a read in flight, two on threads of their own, messaging each other); the parent's keep
// working and no fd is left behind.
TEST(Fork, AHundredForksWithLiveRings) {
  const long before = uring::test::open_fd_count();
  {
    executor ex(native());
    executor_group group(2, native());
    for (int i = 0; i < 100; ++i) {
      read_in_flight pending(ex);
      child_result r = uring::test::run_in_child([] {
        executor child(native());
        return child.run(pipe_round_trip("child")) == "child" ? 0 : 1;
      });
      ASSERT_TRUE(r.exited && r.exit_code == 0) << "fork " << i << ": " << r.describe();
      ASSERT_EQ(pending.finish(), "after") << "fork " << i;
      ASSERT_EQ(ex.run(hop_and_back(ex, group.at(i % 2))), "there") << "after fork " << i;
    }
    group.stop();
    group.join();
  }
  EXPECT_EQ(uring::test::open_fd_count(), before) << "an fd was left open";
}

}  // namespace
