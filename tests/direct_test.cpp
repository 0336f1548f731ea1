// Direct descriptors (uring/direct.hpp) on every backend: install, read and write through a slot, close,
// the table's errors, a slot emptied under an operation that waits on its file, no fd leaked.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <latch>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::direct_fd;
using uring::task;
using uring::test::pipe_pair;

// The errno and what() of the std::system_error that `t` throws, or {0, ""}.
template <class T>
task<std::pair<int, std::string>> failure_of(task<T> t) {
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    co_return std::pair<int, std::string>{e.code().value(), e.what()};
  }
  co_return std::pair<int, std::string>{0, ""};
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

class Direct : public uring::test::backend_test {
 protected:
  template <class T>
  T run_with_table(unsigned slots, task<T> t) {
    uring::executor_options o = options();
    o.direct_files = slots;
    uring::executor ex(o);
    return ex.run(std::move(t));
  }
};

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

// A connection accepted straight into the table: the server side reads and writes through the slot.
TEST_P(Direct, AcceptDirectPutsTheConnectionInASlot) {
  run_with_table(4, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    const long fds_before = uring::test::open_fd_count();
    auto [slot, client] = co_await uring::when_all(
        listener.accept_direct(), uring::net::tcp_stream::connect_to(listener.local_address()));
    EXPECT_LT(slot.index, 4u);
    // Natively the connection is in no fd table but the ring's; emulated, the slot's dup is the one fd.
    EXPECT_EQ(uring::test::open_fd_count(),
              fds_before + 1 + (GetParam().options.backend == uring::backend_kind::emulated));
    co_await client.write_all(std::string_view("ping"));
    char buf[8] = {};
    EXPECT_EQ(co_await uring::read(slot, uring::mutable_buffer(buf, 4)), 4u);
    EXPECT_EQ(std::string(buf, 4), "ping");
    EXPECT_EQ(co_await uring::write(slot, uring::const_buffer("pong", 4)), 4u);
    co_await uring::close_direct(slot);  // the server's side closes: the client reads the reply, then EOF
    std::string back;
    for (;;) {
      const std::size_t n = co_await client.read_some(std::span<char>(buf, sizeof buf));
      if (n == 0) break;
      back.append(buf, n);
    }
    EXPECT_EQ(back, "pong");
  }());
}

TEST_P(Direct, AcceptDirectWithoutATableFailsWithEnxioAndAFullTableWithEnfile) {
  run([]() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto [err, what] = co_await failure_of(listener.accept_direct());
    EXPECT_EQ(err, ENXIO);
    EXPECT_TRUE(contains(what, "direct_files")) << what;
  }());
  run_with_table(1, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    pipe_pair filler;
    const direct_fd taken = co_await uring::install_direct(filler.read_end.get());
    auto client = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto [err, what] = co_await failure_of(listener.accept_direct());
    EXPECT_EQ(err, ENFILE);
    EXPECT_TRUE(contains(what, "full")) << what;
    // The connection was closed, not leaked: the client sees its end.
    char c;
    const uring::io_result r = co_await uring::read(client.fd(), uring::mutable_buffer(&c, 1)).nothrow();
    EXPECT_TRUE(r.res == 0 || r.res == -ECONNRESET) << r.res;
    co_await uring::close_direct(taken);
  }());
}

// Every connection of one multishot accept straight into a slot: no plain fd is made (natively).
TEST_P(Direct, AcceptAllDirectPutsEachConnectionInASlot) {
  run_with_table(8, [](bool emulated) -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto connections = listener.accept_all_direct();
    const long fds_before = uring::test::open_fd_count();
    std::vector<uring::net::tcp_stream> clients;
    std::vector<direct_fd> slots;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(co_await uring::net::tcp_stream::connect_to(listener.local_address()));
      slots.push_back(co_await connections.next());
    }
    // Natively only the clients' fds are new; emulated, each slot's dup too.
    EXPECT_EQ(uring::test::open_fd_count(), fds_before + 3 * (emulated ? 2 : 1));
    std::set<std::uint32_t> distinct;
    for (int i = 0; i < 3; ++i) {
      EXPECT_LT(slots[i].index, 8u);
      distinct.insert(slots[i].index);
      const char c = static_cast<char>('a' + i);
      co_await clients[i].write_all(std::string_view(&c, 1));
      char got = 0;
      EXPECT_EQ(co_await uring::recv(slots[i], uring::mutable_buffer(&got, 1)), 1u);
      EXPECT_EQ(got, c) << "connection " << i << " is not in the slot it was yielded with";
      co_await uring::close_direct(slots[i]);
    }
    EXPECT_EQ(distinct.size(), 3u);
  }(emulated()));
}

// No table: ENXIO. A full table ends the request with ENFILE and closes that connection; the next
// next() arms it again.
TEST_P(Direct, AcceptAllDirectWithoutATableFailsWithEnxioAndAFullTableWithEnfile) {
  run([]() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto connections = listener.accept_all_direct();
    int err = 0;
    try {
      (void)co_await connections.next();
    } catch (const std::system_error& e) {
      err = e.code().value();
      EXPECT_TRUE(contains(e.what(), "direct_files")) << e.what();
    }
    EXPECT_EQ(err, ENXIO);
  }());
  run_with_table(2, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    pipe_pair filler;
    const direct_fd taken = co_await uring::install_direct(filler.read_end.get());
    // Both wait in the backlog; the first next() arms the accept, which takes both in turn.
    auto first = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto second = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto connections = listener.accept_all_direct();
    const direct_fd got = co_await connections.next();
    int err = 0;
    try {
      (void)co_await connections.next();
    } catch (const std::system_error& e) {
      err = e.code().value();
    }
    EXPECT_EQ(err, ENFILE);
    // That connection was closed, not leaked: its client sees its end.
    char c;
    const uring::io_result r = co_await uring::read(second.fd(), uring::mutable_buffer(&c, 1)).nothrow();
    EXPECT_TRUE(r.res == 0 || r.res == -ECONNRESET) << r.res;
    // Room again, and the next next() re-arms.
    co_await uring::close_direct(got);
    auto third = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    const direct_fd again = co_await connections.next();
    co_await third.write_all(std::string_view("3"));
    EXPECT_EQ(co_await uring::recv(again, uring::mutable_buffer(&c, 1)), 1u);
    EXPECT_EQ(c, '3');
    co_await uring::close_direct(again);
    co_await uring::close_direct(taken);
  }());
}

// A stream dropped with connections accepted but not taken empties their slots: the table has room for
// as many files as before. (A connection still in the listener's backlog never took a slot.)
TEST_P(Direct, DroppingAnAcceptAllDirectStreamEmptiesTheSlotsNotTaken) {
  run_with_table(2, []() -> task<void> {
    auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
    auto a = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    auto b = co_await uring::net::tcp_stream::connect_to(listener.local_address());
    direct_fd first{};
    {
      auto connections = listener.accept_all_direct();
      first = co_await connections.next();  // b was accepted with it, into the other slot
      co_await uring::nop();
    }
    co_await uring::nop();  // the cancel's completion
    pipe_pair p;
    const direct_fd other = co_await uring::install_direct(p.read_end.get());  // ENFILE if b's slot leaked
    co_await uring::close_direct(other);
    co_await uring::close_direct(first);
  }());
}

// A stream may outlive its executor: the shutdown ends its request, and the slots it held close with the
// table. Dropping the stream afterwards must not touch the executor (the ASan preset catches it).
TEST_P(Direct, AnAcceptAllDirectStreamMayOutliveItsExecutor) {
  std::optional<uring::net::accept_direct_stream> kept;
  uring::net::tcp_listener listener =
      uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  std::vector<uring::net::tcp_stream> clients;
  {
    uring::executor_options o = options();
    o.direct_files = 4;
    uring::executor ex(o);
    ex.run([](uring::net::tcp_listener& l, std::optional<uring::net::accept_direct_stream>& keep,
              std::vector<uring::net::tcp_stream>& cs) -> task<void> {
      cs.push_back(co_await uring::net::tcp_stream::connect_to(l.local_address()));
      cs.push_back(co_await uring::net::tcp_stream::connect_to(l.local_address()));
      keep.emplace(l.accept_all_direct());
      (void)co_await keep->next();  // the other waits in the stream, or in the backlog
    }(listener, kept, clients));
  }
  kept.reset();  // must not touch the executor: ASan fails the test if it does
}

INSTANTIATE_BACKENDS(Direct);

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
    // The road taken: the kernel moves the file between two native rings that use MSG_RING; elsewhere
    // (and through a handle) a plain fd travels.
    const uring::executor_stats& sender = group.at(0).stats();
    const bool by_kernel = !by_handle && !emulated() && !options().disable.contains(uring::feature::msg_ring);
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
