// SQPOLL (executor_options::sqpoll): the plan turns it on where the kernel has it and says why not
// elsewhere, dropping the task-run flags the kernel refuses with it; natively the ring has a poller thread
// (pinned where asked), a busy executor hands it operations without io_uring_enter, and a bad CPU is a
// clear error. Behaviour on an SQPOLL ring is covered by every backend-parameterised suite, which runs on
// "native_sqpoll" too (tests/backends.hpp).
#include <sched.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

namespace {

using namespace std::chrono_literals;
using uring::executor_options;
using uring::kernel_features;
using uring::task;

bool has_note(const uring::executor_plan& plan, const std::string& text) {
  for (const auto& n : plan.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

executor_options polled(int cpu = -1) {
  executor_options o;
  o.backend = uring::backend_kind::native;
  o.sqpoll.enabled = true;
  o.sqpoll.idle = 1000ms;  // the poller stays awake through a test's burst
  o.sqpoll.cpu = cpu;
  return o;
}

TEST(SqpollPlan, OnWhereTheKernelHasItElseANoteSaysWhy) {
  kernel_features k = uring::probed_kernel();
  if (!k.io_uring_usable) GTEST_SKIP() << k.reason;
  executor_options o = polled();
  o.flags = o.flags | uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
  k.sqpoll = true;
  k.setup_flags = k.setup_flags | o.flags;
  auto on = uring::make_plan(k, o, {});
  EXPECT_TRUE(on.sqpoll);
  // The kernel refuses both with SQPOLL (EINVAL): the plan drops them and says why.
  EXPECT_FALSE(any(on.flags & uring::ring_flags::coop_taskrun));
  EXPECT_FALSE(any(on.flags & uring::ring_flags::defer_taskrun));
  EXPECT_TRUE(any(on.flags & uring::ring_flags::single_issuer));
  EXPECT_TRUE(has_note(on, "setup: COOP_TASKRUN dropped, because SQPOLL's thread runs the ring's task work"))
      << uring::to_string(on);
  EXPECT_TRUE(has_note(on, "setup: DEFER_TASKRUN dropped"));
  EXPECT_NE(uring::to_string(on).find(", SQPOLL"), std::string::npos);
  EXPECT_NE(uring::to_json(on).find("\"sqpoll\":true"), std::string::npos) << uring::to_json(on);

  k.sqpoll = false;
  k.reasons["sqpoll"] = "io_uring_setup(IORING_SETUP_SQPOLL): Operation not permitted";
  auto off = uring::make_plan(k, o, {});
  EXPECT_FALSE(off.sqpoll);
  EXPECT_TRUE(any(off.flags & uring::ring_flags::defer_taskrun));  // kept: no SQPOLL to conflict with
  EXPECT_TRUE(has_note(off, "sqpoll: IORING_SETUP_SQPOLL unavailable on kernel " + k.kernel_release +
                                ": io_uring_setup(IORING_SETUP_SQPOLL): Operation not permitted"))
      << uring::to_string(off);

  k.sqpoll = true;
  o.disable = uring::feature::sqpoll;
  auto disabled = uring::make_plan(k, o, {});
  EXPECT_FALSE(disabled.sqpoll);
  EXPECT_TRUE(has_note(disabled, "sqpoll: disabled by request"));
  EXPECT_FALSE(uring::make_plan(k, o, {.disable = {}}).sqpoll);  // the option's own set counts too

  o.disable = {};
  o.backend = uring::backend_kind::emulated;
  auto emulated = uring::make_plan(k, o, {});
  EXPECT_FALSE(emulated.sqpoll);
  EXPECT_TRUE(has_note(emulated, "sqpoll: native only"));

  auto plain = uring::make_plan(k, executor_options{}, {});
  EXPECT_FALSE(plain.sqpoll);
  EXPECT_FALSE(has_note(plain, "sqpoll"));
  EXPECT_EQ(uring::parse_feature_set("sqpoll"), uring::feature_set(uring::feature::sqpoll));
}

// The rings of this process with a poller thread, and the CPUs they are pinned to, from their fdinfo
// ("SqThread: -1" for a ring without one).
struct pollers {
  int count = 0;
  std::string cpus;  // "N," per ring pinned by SQ_AFF
};
pollers rings_with_a_poller() {
  pollers p;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fdinfo")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string info = text.str();
    const auto at = info.find("SqThread:\t");
    if (at == std::string::npos || info.compare(at + 10, 2, "-1") == 0) continue;
    ++p.count;
    if (auto cpu = info.find("SqThreadCpu:\t"); cpu != std::string::npos) {
      p.cpus += info.substr(cpu + 13, info.find('\n', cpu) - cpu - 13) + ",";
    }
  }
  return p;
}

// The last CPU this thread may run on.
int last_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int last = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) last = c;
  }
  return last;
}

class Sqpoll : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& k = uring::probed_kernel();
    if (!k.io_uring_usable || !k.sqpoll) GTEST_SKIP() << "no SQPOLL: " << k.reason_for("sqpoll") << k.reason;
  }
};

TEST_F(Sqpoll, TheRingHasAPollerThreadPinnedWhereAsked) {
  const int before = rings_with_a_poller().count;
  {
    uring::executor ex(polled());
    EXPECT_TRUE(ex.plan().sqpoll) << uring::to_string(ex.plan());
    EXPECT_EQ(rings_with_a_poller().count, before + 1);
    EXPECT_EQ(ex.run([]() -> task<int> {
      co_await uring::nop();
      co_return 7;
    }()),
              7);
  }
  EXPECT_EQ(rings_with_a_poller().count, before);
  const int cpu = last_allowed_cpu();
  uring::executor pinned(polled(cpu));
  EXPECT_NE(rings_with_a_poller().cpus.find(std::to_string(cpu) + ","), std::string::npos)
      << rings_with_a_poller().cpus;
  // Asked for, but disabled: a plain ring.
  executor_options off = polled();
  off.disable = uring::feature::sqpoll;
  uring::executor plain(off);
  EXPECT_FALSE(plain.plan().sqpoll);
  EXPECT_EQ(rings_with_a_poller().count, before + 1);
}

TEST_F(Sqpoll, ACpuThatDoesNotExistIsAClearError) {
  try {
    uring::executor ex(polled(CPU_SETSIZE - 1));
    ADD_FAILURE() << "an SQPOLL ring pinned to CPU " << CPU_SETSIZE - 1 << " was made";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EINVAL);
    EXPECT_NE(std::string(e.what()).find("IORING_SETUP_SQPOLL on CPU " + std::to_string(CPU_SETSIZE - 1)),
              std::string::npos)
        << e.what();
  }
}

// Operations started one after another, each driven to completion by poll() turns (which never wait):
// a plain ring enters once per operation to submit it, while the poller of an awake SQPOLL ring takes
// each from the SQ without a syscall. The plain ring is the control that shows the count can fail.
std::uint64_t enters_for_sequential_nops(uring::executor& ex, int n) {
  bool done = false;
  auto body = [](int count, bool& flag) -> task<void> {
    for (int i = 0; i < count; ++i) co_await uring::nop();
    flag = true;
  };
  const std::uint64_t before = ex.stats().enters;
  auto handle = uring::spawn(ex, body(n, done));
  const auto limit = std::chrono::steady_clock::now() + 10s;
  while (!done && std::chrono::steady_clock::now() < limit) ex.poll();
  handle.get();
  return ex.stats().enters - before;
}

TEST_F(Sqpoll, ABusyExecutorSubmitsWithoutEntering) {
  constexpr int kNops = 500;
  uring::executor ex(polled());
  const std::uint64_t polled_enters = enters_for_sequential_nops(ex, kNops);
  // Only wake-ups of a poller that went to sleep enter: none are due within its second of idle time,
  // but a VM that stalls this thread that long may cause one or two.
  EXPECT_LE(polled_enters, 10u);
  EXPECT_GE(ex.stats().sqes, static_cast<std::uint64_t>(kNops));

  executor_options plain_options;
  plain_options.backend = uring::backend_kind::native;
  uring::executor plain(plain_options);
  EXPECT_GE(enters_for_sequential_nops(plain, kNops), static_cast<std::uint64_t>(kNops));
}

// A poller that has gone to sleep (idle 1 ms) is woken by the next submission: the executor sees the
// kernel's IORING_SQ_NEED_WAKEUP and enters with IORING_ENTER_SQ_WAKEUP, so nothing waits for ever.
TEST_F(Sqpoll, ASleepingPollerIsWokenBySubmissions) {
  executor_options o = polled();
  o.sqpoll.idle = 1ms;
  uring::executor ex(o);
  int done = ex.run([]() -> task<int> {
    int n = 0;
    for (int round = 0; round < 20; ++round) {
      co_await uring::sleep_for(3ms);  // longer than the idle time: the poller sleeps in between
      for (int i = 0; i < 5; ++i) {
        co_await uring::nop();
        ++n;
      }
    }
    co_return n;
  }());
  EXPECT_EQ(done, 100);
}

// More operations at once than the SQ has entries: the executor waits for the poller to make room
// (IORING_ENTER_SQ_WAIT) rather than losing or spinning on any.
TEST_F(Sqpoll, MoreOperationsThanTheQueueHoldsAllComplete) {
  executor_options o = polled();
  o.sq_entries = 8;
  uring::executor ex(o);
  int done = ex.run([]() -> task<int> {
    auto one = []() -> task<int> {
      co_await uring::nop();
      co_return 1;
    };
    std::vector<task<int>> many;
    for (int i = 0; i < 300; ++i) many.push_back(one());
    int ok = 0;
    for (int r : co_await uring::when_all(std::move(many))) ok += r;
    co_return ok;
  }());
  EXPECT_EQ(done, 300);
  EXPECT_GT(ex.stats().sq_full_flushes, 0u);
}

}  // namespace
