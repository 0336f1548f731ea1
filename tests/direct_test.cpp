// Direct descriptors (uring/direct.hpp) on every backend: install, read and write through a slot, close,
// the table's errors, a slot emptied under an operation that waits on its file, no fd leaked.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "direct_fixture.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::direct_fd;
using uring::task;
using uring::test::contains;
using uring::test::Direct;
using uring::test::failure_of;
using uring::test::pipe_pair;

TEST_P(Direct, APipeThroughTwoSlotsCarriesDataAndTheSlotsKeepItsFilesOpen) {
  run_with_table(8, []() -> task<void> {
    pipe_pair p;
    const direct_fd rd = co_await uring::install_direct(p.read_end.get());
    const direct_fd wr = co_await uring::install_direct(p.write_end.get());
    EXPECT_NE(rd, wr);
    EXPECT_LT(rd.index, 8u);
    EXPECT_LT(wr.index, 8u);
    // The caller's fds are its own: closing them leaves the slots' references.
    p.read_end.reset();
    p.write_end.reset();
    EXPECT_EQ(co_await uring::write(wr, uring::const_buffer("hello", 5)), 5u);
    char buf[16] = {};
    EXPECT_EQ(co_await uring::read(rd, uring::mutable_buffer(buf, sizeof buf)), 5u);
    EXPECT_EQ(std::string(buf, 5), "hello");
    // Emptying the write end's slot drops the last reference to it: the read end sees end of file.
    co_await uring::close_direct(wr);
    EXPECT_EQ(co_await uring::read(rd, uring::mutable_buffer(buf, sizeof buf)), 0u);
    co_await uring::close_direct(rd);
  }());
}

// The same slot through each road into the SQ: inline, the turn's list (an operation with a stop token
// waits there), and the full preparation (one with a linked timeout).
TEST_P(Direct, ReadsAndWritesUseTheSlotOnEveryRoadIntoTheQueue) {
  run_with_table(4, []() -> task<void> {
    pipe_pair p;
    const direct_fd rd = co_await uring::install_direct(p.read_end.get());
    const direct_fd wr = co_await uring::install_direct(p.write_end.get());
    p.read_end.reset();
    p.write_end.reset();
    std::stop_source never;
    EXPECT_EQ(co_await uring::write(wr, uring::const_buffer("a", 1)), 1u);
    EXPECT_EQ(
        co_await uring::with_stop_token(uring::write(wr, uring::const_buffer("b", 1)), never.get_token()),
        1u);
    EXPECT_EQ(
        co_await uring::with_timeout(uring::write(wr, uring::const_buffer("c", 1)), std::chrono::seconds(5)),
        1u);
    char buf[3] = {};
    EXPECT_EQ(
        co_await uring::with_stop_token(uring::read(rd, uring::mutable_buffer(buf, 1)), never.get_token()),
        1u);
    EXPECT_EQ(co_await uring::with_timeout(uring::read(rd, uring::mutable_buffer(buf + 1, 1)),
                                           std::chrono::seconds(5)),
              1u);
    EXPECT_EQ(co_await uring::read(rd, uring::mutable_buffer(buf + 2, 1)), 1u);
    EXPECT_EQ(std::string(buf, 3), "abc");
    co_await uring::close_direct(rd);
    co_await uring::close_direct(wr);
  }());
}

// recv and send on a socket in a slot, with MSG_* flags, alike on every backend (the emulation does
// MSG_WAITALL's collecting itself).
TEST_P(Direct, RecvAndSendOnASlotTakeTheirFlags) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  run_with_table(2, [](int mine, int theirs) -> task<void> {
    uring::test::unique_fd peer(theirs);
    const direct_fd s = co_await uring::install_direct(mine);
    ::close(mine);
    char buf[8] = {};
    EXPECT_EQ(co_await uring::send(s, uring::const_buffer("hello", 5), MSG_MORE), 5u);
    EXPECT_EQ(::read(peer.get(), buf, sizeof buf), 5);
    EXPECT_EQ(std::string(buf, 5), "hello");
    // MSG_PEEK leaves the bytes for the next recv.
    EXPECT_EQ(::write(peer.get(), "abc", 3), 3);
    EXPECT_EQ(co_await uring::recv(s, uring::mutable_buffer(buf, sizeof buf), MSG_PEEK), 3u);
    EXPECT_EQ(co_await uring::recv(s, uring::mutable_buffer(buf, sizeof buf)), 3u);
    EXPECT_EQ(std::string(buf, 3), "abc");
    // MSG_DONTWAIT on nothing: EAGAIN, not a wait.
    EXPECT_EQ((co_await uring::recv(s, uring::mutable_buffer(buf, sizeof buf), MSG_DONTWAIT).nothrow()).res,
              -EAGAIN);
    // The second part comes after the recv has taken the first (the nop completes after the recv was
    // issued, in the same submit): without MSG_WAITALL it would yield 3.
    auto six = [](direct_fd from, char* into, int flags) -> task<std::size_t> {
      co_return co_await uring::recv(from, uring::mutable_buffer(into, 6), flags);
    };
    auto late_part = [](int fd) -> task<std::size_t> {
      co_await uring::nop();
      co_return static_cast<std::size_t>(::write(fd, "def", 3));
    };
    for (const int flags : {0, int{MSG_WAITALL}}) {
      EXPECT_EQ(::write(peer.get(), "abc", 3), 3);
      auto [got, wrote] = co_await uring::when_all(six(s, buf, flags), late_part(peer.get()));
      EXPECT_EQ(wrote, 3u);
      if (flags == 0) {
        EXPECT_EQ(got, 3u);
        EXPECT_EQ(co_await uring::recv(s, uring::mutable_buffer(buf + 3, 3)), 3u);
      } else {
        EXPECT_EQ(got, 6u) << "MSG_WAITALL completed before the buffer was full";
      }
      EXPECT_EQ(std::string(buf, 6), "abcdef");
    }
    // MSG_WAITALL and the end of the stream: the bytes that came.
    EXPECT_EQ(::write(peer.get(), "xy", 2), 2);
    ::shutdown(peer.get(), SHUT_WR);
    EXPECT_EQ(co_await uring::recv(s, uring::mutable_buffer(buf, sizeof buf), MSG_WAITALL), 2u);
    EXPECT_EQ(co_await uring::recv(s, uring::mutable_buffer(buf, sizeof buf)), 0u);
    // A peer that is gone: EPIPE, no SIGPIPE.
    peer.reset();
    EXPECT_EQ((co_await uring::send(s, uring::const_buffer("z", 1)).nothrow()).res, -EPIPE);
    co_await uring::close_direct(s);
  }(sv[0], sv[1]));
}

TEST_P(Direct, AnEmptiedSlotFailsWithEbadf) {
  run_with_table(4, []() -> task<void> {
    pipe_pair p;
    const direct_fd rd = co_await uring::install_direct(p.read_end.get());
    co_await uring::close_direct(rd);
    char c;
    const uring::io_result r = co_await uring::read(rd, uring::mutable_buffer(&c, 1)).nothrow();
    EXPECT_EQ(r.res, -EBADF);
    auto [err, what] = co_await failure_of(uring::close_direct(rd));
    EXPECT_EQ(err, EBADF);
    EXPECT_TRUE(contains(what, "close_direct")) << what;
    EXPECT_TRUE(contains(what, "empty")) << what;
  }());
}

TEST_P(Direct, WithoutATableInstallFailsWithEnxioNamingTheOption) {
  run([]() -> task<void> {
    pipe_pair p;
    auto [err, what] = co_await failure_of(uring::install_direct(p.read_end.get()));
    EXPECT_EQ(err, ENXIO);
    EXPECT_TRUE(contains(what, "direct_files")) << what;
  }());
}

TEST_P(Direct, AFullTableFailsWithEnfileAndAFreedSlotIsTakenAgain) {
  run_with_table(2, []() -> task<void> {
    pipe_pair p;
    const direct_fd a = co_await uring::install_direct(p.read_end.get());
    const direct_fd b = co_await uring::install_direct(p.write_end.get());
    auto [err, what] = co_await failure_of(uring::install_direct(p.read_end.get()));
    EXPECT_EQ(err, ENFILE);
    EXPECT_TRUE(contains(what, "full")) << what;
    co_await uring::close_direct(a);
    const direct_fd c = co_await uring::install_direct(p.read_end.get());
    EXPECT_EQ(c, a);  // the only free slot
    co_await uring::close_direct(b);
    co_await uring::close_direct(c);
  }());
}

TEST_P(Direct, InstallingSomethingThatIsNotAnOpenFdFailsWithEbadf) {
  run_with_table(2, []() -> task<void> {
    int closed;
    {
      pipe_pair p;
      closed = p.read_end.get();
    }
    auto [err, what] = co_await failure_of(uring::install_direct(closed));
    EXPECT_EQ(err, EBADF);
    EXPECT_TRUE(contains(what, "install_direct")) << what;
  }());
}

// The kernel holds the file for a request that has it: emptying the slot does not end the read.
TEST_P(Direct, AReadWaitingOnASlotThatIsEmptiedStillGetsItsData) {
  run_with_table(2, []() -> task<void> {
    pipe_pair p;
    const direct_fd rd = co_await uring::install_direct(p.read_end.get());
    p.read_end.reset();
    char buf[8] = {};
    bool read_done = false;
    std::size_t got = 0;
    uring::spawn([](direct_fd slot, char* b, std::size_t& n, bool& done) -> task<void> {
      n = co_await uring::read(slot, uring::mutable_buffer(b, 8));
      done = true;
    }(rd, buf, got, read_done));
    co_await uring::nop();  // the read is in flight, waiting for data
    co_await uring::close_direct(rd);
    EXPECT_FALSE(read_done);
    EXPECT_EQ(co_await uring::write(p.write_end.get(), uring::const_buffer("xyz", 3)), 3u);
    while (!read_done) co_await uring::nop();
    EXPECT_EQ(got, 3u);
    EXPECT_EQ(std::string(buf, 3), "xyz");
  }());
}

TEST_P(Direct, EveryInstalledFileIsClosedWithTheExecutor) {
  const long before = uring::test::open_fd_count();
  {
    pipe_pair p;
    run_with_table(4, [](int r, int w) -> task<void> {
      co_await uring::install_direct(r);
      co_await uring::install_direct(w);
    }(p.read_end.get(), p.write_end.get()));
  }
  EXPECT_EQ(uring::test::open_fd_count(), before);
}

TEST_P(Direct, ManyFilesFillDistinctSlots) {
  run_with_table(64, []() -> task<void> {
    std::vector<pipe_pair> pipes(32);
    std::set<std::uint32_t> slots;
    std::vector<direct_fd> installed;
    for (auto& p : pipes) {
      installed.push_back(co_await uring::install_direct(p.read_end.get()));
      installed.push_back(co_await uring::install_direct(p.write_end.get()));
    }
    for (direct_fd f : installed) {
      EXPECT_LT(f.index, 64u);
      slots.insert(f.index);
    }
    EXPECT_EQ(slots.size(), 64u);
    // Each pair still talks through its own two slots.
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      const char c = static_cast<char>('a' + i % 26);
      EXPECT_EQ(co_await uring::write(installed[2 * i + 1], uring::const_buffer(&c, 1)), 1u);
      char got = 0;
      EXPECT_EQ(co_await uring::read(installed[2 * i], uring::mutable_buffer(&got, 1)), 1u);
      EXPECT_EQ(got, c);
    }
    for (direct_fd f : installed) co_await uring::close_direct(f);
  }());
}

INSTANTIATE_BACKENDS(Direct);

}  // namespace
