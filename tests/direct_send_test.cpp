// send_direct between executors on every messaging configuration: the file moves into the target's table
// and its function runs there; a full table, none, a stopped or destroyed target, an empty slot.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <latch>
#include <string>
#include <system_error>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "direct_fixture.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::direct_fd;
using uring::task;
using uring::test::contains;
using uring::test::failure_of;
using uring::test::pipe_pair;

// send_direct between two executors, on every messaging configuration: MSG_SEND_FD between native rings,
// the mailbox road where a side is emulated or MSG_RING is off.
class DirectSend : public uring::test::backend_test {
 protected:
  [[nodiscard]] uring::executor_options with_table(unsigned slots) const {
    uring::executor_options o = options();
    o.direct_files = slots;
    return o;
  }
  // Runs `t` on `ex` (a group's executor, on its own thread) and waits until it has finished.
  static void run_on(uring::executor& ex, task<void> t) {
    std::latch done(1);
    uring::spawn(ex, [](task<void> body, std::latch& l) -> task<void> {
      co_await std::move(body);
      l.count_down();
    }(std::move(t), done));
    done.wait();
  }
};

// Reads `fd` to its end.
task<std::string> read_all(int fd) {
  std::string out;
  char buf[64];
  for (;;) {
    const std::size_t n = co_await uring::read(fd, uring::mutable_buffer(buf, sizeof buf));
    if (n == 0) co_return out;
    out.append(buf, n);
  }
}

// Named by reference or by handle. Through a handle the file takes the mailbox road on every backend (a
// handle never rides MSG_RING: a destroyed executor's ring fd may be reused), with the same contract.
TEST_P(DirectSend, TheFileMovesIntoTheTargetsTableAndItsFunctionRunsThere) {
  for (const bool by_handle : {false, true}) {
    SCOPED_TRACE(by_handle ? "by handle" : "by reference");
    uring::executor_group group(2, with_table(4));
    std::string got;
    std::atomic<bool> ran_on_target{false};
    run_on(group.at(0),
           [](uring::executor& target, bool handle, std::string& out,
              std::atomic<bool>& on_target) -> task<void> {
             pipe_pair p;
             const direct_fd w = co_await uring::install_direct(p.write_end.get());
             p.write_end.reset();  // the slot holds the only reference to the write end
             // A lambda coroutine with captures: its task must not outlive them.
             auto fn = [&target, &on_target](direct_fd slot) -> task<void> {
               on_target = uring::executor::current() == &target;
               EXPECT_EQ(co_await uring::write(slot, uring::const_buffer("moved", 5)), 5u);
               co_await uring::close_direct(slot);
             };
             if (handle) {  // not a ?: of two tasks in one co_await: g++ 12 miscompiles that (a crash)
               co_await uring::send_direct(target.handle(), w, fn);
             } else {
               co_await uring::send_direct(target, w, fn);
             }
             // Our slot is empty now: the end of file comes when the target empties its slot.
             const uring::io_result r = co_await uring::write(w, uring::const_buffer("x", 1)).nothrow();
             EXPECT_EQ(r.res, -EBADF);
             out = co_await read_all(p.read_end.get());
           }(group.at(1), by_handle, got, ran_on_target));
    EXPECT_EQ(got, "moved");
    EXPECT_TRUE(ran_on_target);
    group.stop();
    group.join();
    // The road taken: the kernel moves the file between two rings whose plans use MSG_RING (SQPOLL and
    // the emulation do not); elsewhere (and through a handle) a plain fd travels.
    const uring::executor_stats& sender = group.at(0).stats();
    const bool by_kernel = !by_handle && group.at(0).plan().msg_ring && group.at(1).plan().msg_ring;
    EXPECT_EQ(sender.started(uring::op_kind::send_direct), by_kernel ? 1u : 0u);
    EXPECT_EQ(sender.started(uring::op_kind::plain_fd), by_kernel ? 0u : 1u);
  }
}

TEST_P(DirectSend, APlainFunctionGetsTheSlotToo) {
  uring::executor_group group(2, with_table(4));
  std::string got;
  run_on(group.at(0), [](uring::executor& target, std::string& out) -> task<void> {
    pipe_pair p;
    const direct_fd w = co_await uring::install_direct(p.write_end.get());
    p.write_end.reset();
    auto fn = [](direct_fd slot) {
      // No coroutine here: hand the slot to one (the function's own executor runs it).
      uring::spawn([](direct_fd s) -> task<void> {
        co_await uring::write(s, uring::const_buffer("plain", 5));
        co_await uring::close_direct(s);
      }(slot));
    };
    co_await uring::send_direct(target, w, fn);
    out = co_await read_all(p.read_end.get());
  }(group.at(1), got));
  EXPECT_EQ(got, "plain");
  group.stop();
  group.join();
}

TEST_P(DirectSend, AFullTargetTableLeavesTheFileWithTheSender) {
  uring::executor_group group(2, with_table(1));
  std::string got;
  run_on(group.at(0), [](uring::executor& target, std::string& out) -> task<void> {
    pipe_pair p;
    pipe_pair filler;
    // The target's one slot is taken.
    const int fill_fd = filler.read_end.get();
    co_await uring::submit_to(target,
                              [fill_fd]() -> task<void> { (void)co_await uring::install_direct(fill_fd); });
    const direct_fd w = co_await uring::install_direct(p.write_end.get());
    p.write_end.reset();
    bool ran = false;
    auto fn = [&ran](direct_fd) {
      ran = true;
    };  // named: g++ 12 destroys a throwing co_await's temporary twice
    int err = 0;
    std::string what;
    try {
      co_await uring::send_direct(target, w, fn);
    } catch (const std::system_error& e) {
      err = e.code().value();
      what = e.what();
    }
    EXPECT_EQ(err, ENFILE);
    EXPECT_NE(what.find("send_direct"), std::string::npos) << what;
    EXPECT_NE(what.find("target executor's table"), std::string::npos) << what;
    EXPECT_FALSE(ran);
    // The file is still ours, in the same slot.
    EXPECT_EQ(co_await uring::write(w, uring::const_buffer("kept", 4)), 4u);
    co_await uring::close_direct(w);
    out = co_await read_all(p.read_end.get());
  }(group.at(1), got));
  EXPECT_EQ(got, "kept");
  group.stop();
  group.join();
}

// Named by reference or by handle, a target without a table: ENXIO naming its option; the file stays.
TEST_P(DirectSend, ATargetWithoutATableFailsWithEnxio) {
  uring::executor_group senders(1, with_table(2));
  uring::executor_group targets(1, options());
  run_on(senders.at(0), [](uring::executor& target) -> task<void> {
    pipe_pair p;
    const direct_fd w = co_await uring::install_direct(p.write_end.get());
    auto fn = [](direct_fd) {};
    for (const bool by_handle : {false, true}) {
      task<void> send =
          by_handle ? uring::send_direct(target.handle(), w, fn) : uring::send_direct(target, w, fn);
      auto [err, what] = co_await failure_of(std::move(send));
      EXPECT_EQ(err, ENXIO) << "by handle: " << by_handle;
      EXPECT_TRUE(contains(what, "target executor has no table")) << what;
    }
    EXPECT_EQ(co_await uring::write(w, uring::const_buffer("k", 1)), 1u);
    co_await uring::close_direct(w);
  }(targets.at(0)));
  senders.stop();
  targets.stop();
  senders.join();
  targets.join();
}

TEST_P(DirectSend, AStoppedTargetFailsWithEshutdownAndTheFileStays) {
  uring::executor_group senders(1, with_table(2));
  uring::executor_group targets(1, with_table(2));
  uring::executor& target = targets.at(0);
  targets.stop();
  targets.join();
  int err = 0;
  run_on(senders.at(0), [](uring::executor& to, int& out) -> task<void> {
    pipe_pair p;
    const direct_fd w = co_await uring::install_direct(p.write_end.get());
    auto fn = [](direct_fd) {};
    try {
      co_await uring::send_direct(to, w, fn);
    } catch (const std::system_error& e) {
      out = e.code().value();
    }
    EXPECT_EQ(co_await uring::write(w, uring::const_buffer("k", 1)), 1u);
    co_await uring::close_direct(w);
  }(target, err));
  EXPECT_EQ(err, ESHUTDOWN);
  senders.stop();
  senders.join();
}

TEST_P(DirectSend, AnEmptySlotFailsWithEbadfAndFnDoesNotRun) {
  uring::executor_group group(2, with_table(2));
  int err = 0;
  std::string what;
  bool ran = false;
  run_on(group.at(0), [](uring::executor& target, int& e, std::string& w, bool& r) -> task<void> {
    pipe_pair p;
    const direct_fd slot = co_await uring::install_direct(p.read_end.get());
    co_await uring::close_direct(slot);
    auto fn = [&r](direct_fd) { r = true; };
    try {
      co_await uring::send_direct(target, slot, fn);
    } catch (const std::system_error& ex) {
      e = ex.code().value();
      w = ex.what();
    }
  }(group.at(1), err, what, ran));
  group.stop();
  group.join();
  EXPECT_EQ(err, EBADF);
  EXPECT_TRUE(contains(what, "slot is empty")) << what;
  EXPECT_FALSE(ran);
}

// A handle whose executor was destroyed: ESHUTDOWN, fn never runs, the file stays in our slot and the
// plain fd made for the journey is closed (the test's fd-leak check, and the count here, see to it).
TEST_P(DirectSend, AHandleToADestroyedExecutorFailsWithEshutdownAndTheFileStays) {
  uring::executor_group senders(1, with_table(2));
  uring::executor_handle gone;
  {
    uring::executor_group targets(1, with_table(2));
    gone = targets.at(0).handle();
  }
  int err = 0;
  bool ran = false;
  long fds_before = 0;
  long fds_after = 0;
  std::string got;
  run_on(senders.at(0),
         [](const uring::executor_handle& to, int& e, bool& r, long& before, long& after,
            std::string& out) -> task<void> {
           pipe_pair p;
           const direct_fd w = co_await uring::install_direct(p.write_end.get());
           p.write_end.reset();
           before = uring::test::open_fd_count();
           auto fn = [&r](direct_fd) { r = true; };
           try {
             co_await uring::send_direct(to, w, fn);
           } catch (const std::system_error& ex) {
             e = ex.code().value();
           }
           after = uring::test::open_fd_count();
           EXPECT_EQ(co_await uring::write(w, uring::const_buffer("kept", 4)), 4u);
           co_await uring::close_direct(w);
           out = co_await read_all(p.read_end.get());
         }(gone, err, ran, fds_before, fds_after, got));
  EXPECT_EQ(err, ESHUTDOWN);
  EXPECT_FALSE(ran);
  EXPECT_EQ(fds_after, fds_before) << "the plain fd made for the journey was not closed";
  EXPECT_EQ(got, "kept");
  senders.stop();
  senders.join();
}

// To its own executor: the file changes slots (by the mailbox road: a ring cannot MSG_SEND_FD to itself).
TEST_P(DirectSend, ToItsOwnExecutorTheFileMovesToAnotherSlot) {
  uring::executor_group group(1, with_table(4));
  std::string got;
  run_on(group.at(0), [](uring::executor& self, std::string& out) -> task<void> {
    pipe_pair p;
    const direct_fd w = co_await uring::install_direct(p.write_end.get());
    p.write_end.reset();
    direct_fd moved{};
    bool ran = false;
    auto fn = [&moved, &ran](direct_fd s) {
      moved = s;
      ran = true;
    };
    co_await uring::send_direct(self, w, fn);
    EXPECT_TRUE(ran);
    EXPECT_EQ(co_await uring::write(moved, uring::const_buffer("self", 4)), 4u);
    co_await uring::close_direct(moved);
    out = co_await read_all(p.read_end.get());
  }(group.at(0), got));
  group.stop();
  group.join();
  EXPECT_EQ(got, "self");
}

INSTANTIATE_MESSAGING_BACKENDS(DirectSend);

}  // namespace
