// Ring restrictions (executor_options::allowed_ops, uring/op_allowlist.hpp) on every backend: allowed
// operations work, the executor's own operations (wake-up, cancellation, linked timeouts, shutdown) keep
// working under any list, a refused operation fails with a clear EACCES once and leaves nothing behind,
// the kernel itself refuses what the list leaves out and cannot be talked into widening it, and messaging
// without MSG_RING in the list falls back to the mailbox, with the plan saying why.
#include <gtest/gtest.h>
#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <set>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backend/backend.hpp"  // src/: the backends alone, to see what the kernel (or the emulation) answers
#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor;
using uring::op_allowlist;
using uring::op_kind;
using uring::task;
using uring::test::pipe_pair;

class Restrictions : public uring::test::backend_test {
 protected:
  [[nodiscard]] uring::executor_options restricted(op_allowlist allowed) const {
    auto o = options();
    o.allowed_ops = allowed;
    return o;
  }
};

bool has_note(const uring::executor_plan& plan, const std::string& part) {
  for (const auto& n : plan.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// The io_uring fds this process has open (the executor's ring is the one that appears with it).
std::set<int> ring_fds() {
  std::set<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string() == "anon_inode:[io_uring]")
      out.insert(std::stoi(e.path().filename().string()));
  }
  return out;
}

int raw_register(int fd, unsigned opcode, void* arg, unsigned nr) {
  long r = ::syscall(__NR_io_uring_register, fd, opcode, arg, nr);
  return r < 0 ? -errno : static_cast<int>(r);
}

TEST(OpAllowlist, NamesAndMeaning) {
  op_allowlist none;
  EXPECT_FALSE(none.restricts());
  EXPECT_TRUE(none.allows(op_kind::write));
  EXPECT_TRUE(none.allows_msg_ring());
  EXPECT_TRUE(none.refused().empty());
  EXPECT_EQ(uring::to_string(none), "unrestricted");
  EXPECT_EQ(op_allowlist({}), none);  // an empty list restricts nothing

  op_allowlist rw{op_kind::write, op_kind::read};
  EXPECT_TRUE(rw.restricts());
  EXPECT_TRUE(rw.allows(op_kind::read));
  EXPECT_FALSE(rw.allows(op_kind::nop));
  EXPECT_FALSE(rw.allows_msg_ring());
  EXPECT_EQ(uring::to_string(rw), "read,write");
  EXPECT_EQ(uring::to_string(op_allowlist(rw).allow_msg_ring()), "read,write,msg_ring");
  EXPECT_EQ(uring::to_string(op_allowlist().allow_msg_ring()), "msg_ring");  // messaging only
}

TEST(OpAllowlist, PlanRecordsTheListAndWhyMessagesTakeTheMailbox) {
  uring::kernel_features kernel;
  kernel.io_uring_usable = true;
  kernel.msg_ring = true;
  kernel.kernel_release = "6.18-test";
  uring::executor_options opts;
  opts.backend = uring::backend_kind::native;
  opts.allowed_ops = {op_kind::nop};
  auto plan = uring::make_plan(kernel, opts, {});
  EXPECT_EQ(plan.allowed_ops, opts.allowed_ops);
  EXPECT_FALSE(plan.msg_ring);
  EXPECT_TRUE(has_note(plan,
                       "messaging: MSG_RING not in the allowlist: messages to and from this executor use the "
                       "mailbox"))
      << uring::to_string(plan);
  EXPECT_TRUE(has_note(plan, "restrictions: operations limited to nop")) << uring::to_string(plan);
  EXPECT_NE(uring::to_string(plan).find(", ops nop"), std::string::npos) << uring::to_string(plan);

  opts.allowed_ops.allow_msg_ring();
  plan = uring::make_plan(kernel, opts, {});
  EXPECT_TRUE(plan.msg_ring) << uring::to_string(plan);

  opts.backend = uring::backend_kind::emulated;
  plan = uring::make_plan(kernel, opts, {});
  EXPECT_TRUE(has_note(plan, "enforced by the emulation")) << uring::to_string(plan);
}

TEST_P(Restrictions, AllowedOperationsWork) {
  pipe_pair p;
  executor ex(restricted({op_kind::nop, op_kind::read, op_kind::write, op_kind::poll, op_kind::timeout}));
  std::string got = ex.run([](int r, int w) -> task<std::string> {
    co_await uring::nop();
    co_await uring::write(w, std::string_view("allowed"));
    co_await uring::poll(r, POLLIN);
    co_await uring::sleep_for(1ms);
    char buf[16];
    std::size_t n =
        co_await uring::with_timeout(uring::read(r, buf), 10s);  // LINK_TIMEOUT: the library's own
    co_return std::string(buf, n);
  }(p.read_end.get(), p.write_end.get()));
  EXPECT_EQ(got, "allowed");
  EXPECT_EQ(ex.stats().started(op_kind::write), 1u);
}

TEST_P(Restrictions, RefusedOperationFailsWithEaccesNamingIt) {
  pipe_pair p;
  executor ex(restricted({op_kind::nop}));
  ex.run([](int w) -> task<void> {
    try {
      co_await uring::write(w, std::string_view("x"));
      ADD_FAILURE() << "write was not refused";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::error_code(EACCES, std::system_category()));
      EXPECT_EQ(
          std::string(e.what()),
          "write: not in this executor's op allowlist (executor_options::allowed_ops): Permission denied");
    }
    // An awaitable whose name is not its kind's says both.
    try {
      co_await uring::sleep_for(1h);
      ADD_FAILURE() << "sleep_for was not refused";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EACCES);
      EXPECT_NE(
          std::string(e.what()).find("sleep_for: op_kind::timeout is not in this executor's op allowlist"),
          std::string::npos)
          << e.what();
    }
    // The nothrow form yields the error; a stop token or a linked timeout changes nothing.
    auto r = co_await uring::write(w, std::string_view("x")).nothrow();
    EXPECT_EQ(r.res, -EACCES);
    std::stop_source stop;
    r = co_await uring::with_stop_token(uring::write(w, std::string_view("x")).nothrow(), stop.get_token());
    EXPECT_EQ(r.res, -EACCES);
    r = co_await uring::with_timeout(uring::write(w, std::string_view("x")).nothrow(), 10s);
    EXPECT_EQ(r.res, -EACCES);
    co_await uring::nop();  // the allowed one still works after refusals
  }(p.write_end.get()));
  EXPECT_EQ(ex.stats().started(op_kind::write), 0u);  // none reached the backend
  EXPECT_EQ(ex.stats().started(op_kind::timeout), 0u);
  // Nothing was written to the pipe.
  p.write_end.reset();
  char c;
  EXPECT_EQ(::read(p.read_end.get(), &c, 1), 0);
}

task<uring::net::tcp_stream> accept_one(const uring::net::tcp_listener& l) { co_return co_await l.accept(); }

// A multishot accept that the list leaves out ends next() with the same error, naming its kind; a plain
// accept that the list names still works on the same listener.
TEST_P(Restrictions, RefusedMultishotAcceptEndsNextClearly) {
  auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  executor ex(restricted({op_kind::accept, op_kind::connect}));
  ex.run([](const uring::net::tcp_listener& l) -> task<void> {
    auto connections = l.accept_all();
    try {
      (void)co_await connections.next();
      ADD_FAILURE() << "the multishot accept was not refused";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EACCES);
      EXPECT_NE(std::string(e.what()).find(
                    "accept: op_kind::accept_multishot is not in this executor's op allowlist"),
                std::string::npos)
          << e.what();
    }
    auto [client, accepted] =
        co_await uring::when_all(uring::net::tcp_stream::connect_to(l.local_address()), accept_one(l));
    EXPECT_GE(client.fd(), 0);
    EXPECT_GE(accepted.fd(), 0);
  }(listener));
}

// A dropped accept_all_direct stream empties the slots it accepted but did not hand out: natively an
// IORING_REGISTER_FILES_UPDATE, a register operation the kernel's list must name, or the slot would stay
// filled (and the install below fail with ENFILE) until the executor goes.
TEST_P(Restrictions, ADroppedAcceptAllDirectStreamEmptiesItsSlotsUnderAList) {
  auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  const uring::net::address to = listener.local_address();
  std::vector<uring::owned_fd> clients;
  for (int i = 0; i < 2; ++i) {  // blocking connects: the backlog completes them before any accept
    clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(clients.back().get(), to.data(), to.size()), 0) << std::strerror(errno);
  }
  auto o =
      restricted({op_kind::accept_multishot_direct, op_kind::install_direct, op_kind::close, op_kind::nop});
  o.direct_files = 2;
  executor ex(o);
  ex.run([](const uring::net::tcp_listener& l) -> task<void> {
    uring::direct_fd first{};
    {
      auto connections = l.accept_all_direct();
      first = co_await connections.next();  // the other connection came with it, into the other slot
      co_await uring::nop();
    }
    co_await uring::nop();  // the cancel's completion
    pipe_pair p;
    const uring::direct_fd other = co_await uring::install_direct(p.read_end.get());
    co_await uring::close_direct(other);
    co_await uring::close_direct(first);
  }(listener));
}

// Each refused operation resumes its coroutine exactly once, leaves nothing in flight (a debug build
// aborts when a frame holding one is freed) and no fd behind.
task<void> refused_once(int fd, int& resumed) {
  char buf[8];
  auto r = co_await uring::read(fd, buf).nothrow();
  EXPECT_EQ(r.res, -EACCES);
  ++resumed;
}

TEST_P(Restrictions, RefusalResumesOnceAndLeaksNothing) {
  pipe_pair p;
  const std::size_t fds_before = open_fds();
  {
    executor ex(restricted({op_kind::nop}));
    int resumed = 0;
    ex.run([](int fd, int& count) -> task<void> {
      for (int i = 0; i < 100; ++i) uring::spawn(refused_once(fd, count));
      for (int i = 0; i < 10; ++i) co_await uring::nop();  // more turns: a second resumption would show
    }(p.read_end.get(), resumed));
    EXPECT_EQ(resumed, 100);
    ex.run([]() -> task<void> { co_await uring::nop(); }());
    EXPECT_EQ(resumed, 100);
  }
  EXPECT_EQ(open_fds(), fds_before);
}

// The executor's own operations are in the kernel's list whatever the user's says: with only nop allowed
// the loop still sleeps and is woken from another thread (its eventfd read); with only the timer allowed
// a sleep is still cancelled (ASYNC_CANCEL) and shutdown still drains one in flight. So no list can stop
// an executor from starting or from shutting down safely.
TEST_P(Restrictions, ExecutorsOwnOperationsWorkUnderTheNarrowestList) {
  {
    executor ex(restricted({op_kind::nop}));
    std::thread::id ran_on;
    std::jthread poster([&ex, &ran_on] {
      ex.post([&ex, &ran_on] {
        ran_on = uring::test::this_id();
        ex.stop();
      });
    });
    ex.run();  // nothing to do but sleep until the post arrives
    EXPECT_EQ(ran_on, std::this_thread::get_id());
  }
  executor timers(restricted({op_kind::timeout}));
  std::stop_source stop;
  std::jthread stopper;
  auto r = timers.run([](std::stop_source& source, std::jthread& thread) -> task<uring::io_result> {
    thread = std::jthread([&source] { source.request_stop(); });
    co_return co_await uring::with_stop_token(uring::sleep_for(1h), source.get_token()).nothrow();
  }(stop, stopper));
  EXPECT_EQ(r.res, -ECANCELED);
  timers.run([]() -> task<void> {
    uring::spawn([]() -> task<void> { co_await uring::sleep_for(1h); }());
    co_await uring::sleep_for(1ms);  // the hour-long sleep reaches the kernel
  }());
  // ~executor cancels and drains it here; without ASYNC_CANCEL in the kernel's list it would wait an hour.
}

TEST_P(Restrictions, LinkedTimeoutFiresUnderRestrictions) {
  pipe_pair p;
  executor ex(restricted({op_kind::poll}));
  auto r = ex.run([](int fd) -> task<uring::io_result> {
    co_return co_await uring::with_timeout(uring::poll(fd, POLLIN).nothrow(), 5ms);
  }(p.read_end.get()));
  EXPECT_EQ(r.res, -ETIMEDOUT);
}

// The list is fixed when the executor is built; natively the kernel refuses every attempt, by anything
// holding the ring fd, to register new restrictions, re-enable the ring or register anything else.
TEST_P(Restrictions, CannotBeWidenedLater) {
  (void)uring::probed_kernel();  // the probe's own rings come and go before the baseline
  const auto rings_before = ring_fds();
  auto opts = restricted({op_kind::nop});
  executor ex(opts);
  opts.allowed_ops.allow(op_kind::write);  // the executor kept its own copy
  if (!emulated()) {
    std::set<int> mine;
    for (int fd : ring_fds()) {
      if (rings_before.count(fd) == 0) mine.insert(fd);
    }
    ASSERT_EQ(mine.size(), 1u);
    const int fd = *mine.begin();
    io_uring_restriction widen{};
    widen.opcode = IORING_RESTRICTION_SQE_OP;
    widen.sqe_op = IORING_OP_WRITE;
    EXPECT_EQ(raw_register(fd, IORING_REGISTER_RESTRICTIONS, &widen, 1), -EACCES);
    EXPECT_EQ(raw_register(fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0), -EACCES);
    int some_fd = 0;
    EXPECT_EQ(raw_register(fd, IORING_REGISTER_FILES, &some_fd, 1), -EACCES);
  }
  pipe_pair p;
  auto r = ex.run([](int w) -> task<uring::io_result> {
    co_await uring::nop();
    co_return co_await uring::write(w, std::string_view("x")).nothrow();
  }(p.write_end.get()));
  EXPECT_EQ(r.res, -EACCES);
}

// Below the executor's own check: the kernel (natively) and the emulation refuse an operation outside the
// list themselves, with -EACCES in its completion, and run the ones inside it, and also a read: the
// executor's own wake-up is a read, so a restricted ring always lets reads through (the executor refuses
// the user's own unless listed, as the tests above show).
TEST_P(Restrictions, BackendRefusesWhatTheListLeavesOut) {
  auto opts = restricted({op_kind::nop});
  uring::executor_stats stats;
  auto plan = uring::make_plan(uring::probed_kernel(), opts, {});
  auto backend = emulated() ? uring::detail::make_emulated_backend(opts, stats)
                            : uring::detail::make_native_backend(opts, plan, stats);
  pipe_pair p;
  ASSERT_EQ(::write(p.write_end.get(), "r", 1), 1);
  char byte = 'x';
  char in = 0;
  uring::detail::operation write_op, nop_op, read_op;
  write_op.request = {.code = op_kind::write, .fd = p.write_end.get(), .len = 1, .addr = &byte};
  nop_op.request = {.code = op_kind::nop};
  read_op.request = {.code = op_kind::read, .fd = p.read_end.get(), .len = 1, .addr = &in};
  write_op.next = &nop_op;
  nop_op.next = &read_op;
  backend->submit(&write_op, true);
  uring::detail::completion got[4];
  std::size_t n = 0;
  while (n < 3) {
    n += backend->reap(got + n, 4 - n);
    if (n < 3) backend->submit(nullptr, true);
  }
  ASSERT_EQ(n, 3u);
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i].user_data == reinterpret_cast<std::uint64_t>(&write_op)) {
      EXPECT_EQ(got[i].res, -EACCES);
    } else if (got[i].user_data == reinterpret_cast<std::uint64_t>(&read_op)) {
      EXPECT_EQ(got[i].res, 1);
      EXPECT_EQ(in, 'r');
    } else {
      EXPECT_EQ(got[i].user_data, reinterpret_cast<std::uint64_t>(&nop_op));
      EXPECT_EQ(got[i].res, 0);
    }
  }
  // Nothing was written: the write never ran.
  p.write_end.reset();
  EXPECT_EQ(::read(p.read_end.get(), &in, 1), 0);
}

TEST_P(Restrictions, KeepsTheRingsSetupAndRegisteredFd) {
  executor plain(options());
  // One after another on one thread: each restricted ring must give its registered-fd slot back at exit
  // (IORING_UNREGISTER_RING_FDS is in its list), or the 16 slots would run out.
  for (int i = 0; i < 20; ++i) {
    executor ex(restricted({op_kind::nop}));
    EXPECT_EQ(ex.active_flags(), plain.active_flags());
    EXPECT_EQ(ex.registered_ring(), plain.registered_ring()) << "executor " << i;
    ex.run([]() -> task<void> { co_await uring::nop(); }());
  }
}

// Messaging with one side restricted: what that side's kernel ring must not send goes by the mailbox.

task<int> restricted_peer_side(executor& a, std::promise<std::thread::id>& ran_on_a) {
  uring::inbox in(*executor::current());
  int ok = 0;
  for (int i = 0; i < 3; ++i) {
    uring::message m = co_await in.receive();
    ok += m.value == i && m.data == 100u + static_cast<unsigned>(i);
  }
  ran_on_a.set_value(co_await uring::submit_to(a, [] { return uring::test::this_id(); }));
  for (int i = 0; i < 3; ++i) co_await uring::send(a, i, 200 + i);
  co_return ok;
}

task<void> spawn_peer(executor& a, std::promise<std::thread::id>& ran_on_a, std::promise<int>& peer_ok) {
  peer_ok.set_value(co_await restricted_peer_side(a, ran_on_a));
}

TEST_P(Restrictions, MessagingWithoutMsgRingUsesTheMailboxBothWays) {
  uring::executor_group others(1, options());  // unrestricted, same backend
  executor& b = others.at(0);
  executor a(restricted({op_kind::nop}));
  if (!emulated()) {
    EXPECT_FALSE(a.plan().msg_ring);
    EXPECT_TRUE(has_note(a.plan(), "MSG_RING not in the allowlist")) << uring::to_string(a.plan());
  }
  std::promise<std::thread::id> ran_on_a;
  std::promise<int> peer_ok;
  uring::spawn(b, spawn_peer(a, ran_on_a, peer_ok));
  int back = a.run([](executor& peer) -> task<int> {
    std::thread::id there = co_await uring::submit_to(peer, [] { return uring::test::this_id(); });
    EXPECT_NE(there, uring::test::this_id());
    for (int i = 0; i < 3; ++i) co_await uring::send(peer, i, 100 + i);
    uring::inbox in(*executor::current());
    int ok = 0;
    for (int i = 0; i < 3; ++i) {
      uring::message m = co_await in.receive();
      ok += m.value == i && m.data == 200u + static_cast<unsigned>(i);
    }
    co_return ok;
  }(b));
  EXPECT_EQ(back, 3);
  EXPECT_EQ(peer_ok.get_future().get(), 3);
  EXPECT_EQ(ran_on_a.get_future().get(), std::this_thread::get_id());
  EXPECT_EQ(a.stats().messages_sent_by_ring, 0u);
  EXPECT_EQ(a.stats().messages_received, 0u);  // nothing came by MSG_RING either
  EXPECT_EQ(a.stats().raw_messages_received, 3u);
}

TEST_P(Restrictions, MsgRingInTheListKeepsTheRingRoad) {
  uring::executor_group others(1, options());
  executor& b = others.at(0);
  executor a(restricted(op_allowlist{op_kind::nop}.allow_msg_ring()));
  std::thread::id there = a.run([](executor& peer) -> task<std::thread::id> {
    co_return co_await uring::submit_to(peer, [] { return uring::test::this_id(); });
  }(b));
  EXPECT_NE(there, std::this_thread::get_id());
  if (!emulated() && !options().sqpoll.enabled) {  // SQPOLL executors take the mailbox (docs/sqpoll.md)
    EXPECT_TRUE(a.plan().msg_ring) << uring::to_string(a.plan());
    EXPECT_GT(a.stats().messages_sent_by_ring, 0u);  // the kernel let the MSG_RING through
  }
}

INSTANTIATE_BACKENDS(Restrictions);

}  // namespace
