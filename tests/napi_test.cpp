// NAPI busy polling (executor_options::napi_busy_poll) on every backend: the plan turns it on where the
// kernel has it and says why not elsewhere; natively the ring holds the registration (read back by
// taking it), emulated the epoll fd holds the settings; a restricted ring may still register it; and a
// connection through an executor that polls works as any other.
#include <sys/ioctl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <uring/uring.hpp>

#include "backend/backend.hpp"
#include "backend/napi.hpp"
#include "backends.hpp"
#include "net_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::executor_options;
using uring::kernel_features;
using uring::task;

executor_options polling(executor_options o) {
  o.napi_busy_poll = 50us;
  o.napi_prefer_busy_poll = true;
  return o;
}

bool has_note(const uring::executor_plan& plan, const std::string& text) {
  for (const auto& n : plan.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(NapiPlan, OnWhereTheKernelHasItElseANoteSaysWhy) {
  kernel_features k = uring::probed_kernel();
  if (!k.io_uring_usable) GTEST_SKIP() << k.reason;
  executor_options o = polling({});
  o.backend = uring::backend_kind::native;
  k.napi = true;
  EXPECT_TRUE(uring::make_plan(k, o, {}).napi);
  k.napi = false;
  k.reasons["napi"] = "io_uring_register(IORING_REGISTER_NAPI): Invalid argument";
  auto off = uring::make_plan(k, o, {});
  EXPECT_FALSE(off.napi);
  EXPECT_TRUE(has_note(off, "napi: IORING_REGISTER_NAPI unavailable on kernel " + k.kernel_release +
                                " (6.9+): io_uring_register(IORING_REGISTER_NAPI): Invalid argument"))
      << uring::to_string(off);
  // The emulation asks about epoll's own.
  o.backend = uring::backend_kind::emulated;
  k.epoll_busy_poll = false;
  EXPECT_TRUE(has_note(uring::make_plan(k, o, {}), "napi: epoll's EPIOCSPARAMS unavailable"));
  k.epoll_busy_poll = true;
  EXPECT_TRUE(uring::make_plan(k, o, {}).napi);
  // Disabled, and not asked for.
  o.disable = uring::feature::napi;
  auto disabled = uring::make_plan(k, o, {});
  EXPECT_FALSE(disabled.napi);
  EXPECT_TRUE(has_note(disabled, "napi: disabled by request"));
  EXPECT_FALSE(uring::make_plan(k, executor_options{}, {}).napi);
  EXPECT_FALSE(has_note(uring::make_plan(k, executor_options{}, {}), "napi"));
}

// The rings of this process whose fdinfo says NAPI busy polling is on for `ns` nanoseconds.
int rings_polling_for(unsigned ns) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fdinfo")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string info = text.str();
    if (info.find("NAPI:\tenabled") != std::string::npos &&
        info.find("napi_busy_poll_dt:\t" + std::to_string(ns) + "\n") != std::string::npos) {
      ++n;
    }
  }
  return n;
}

class Napi : public uring::test::backend_test {};

// Natively the registration is the ring's, read back by taking it (IORING_UNREGISTER_NAPI); emulated, the
// epoll fd's settings (EPIOCGPARAMS).
TEST_P(Napi, TheBackendHoldsTheSettings) {
  const executor_options o = polling(options());
  const auto& k = uring::probed_kernel();
  if (!(emulated() ? k.epoll_busy_poll : k.napi)) GTEST_SKIP() << "the kernel lacks it (6.9+)";
  uring::executor_stats stats;
  auto plan = uring::make_plan(k, o, {});
  ASSERT_TRUE(plan.napi) << uring::to_string(plan);
  if (emulated()) {
    uring::executor ex(o);
    uring::detail::napi_settings now;
    ASSERT_EQ(uring::detail::get_epoll_busy_poll(ex.notify_fd(), now), 0);
    EXPECT_EQ(now.busy_poll_us, 50u);
    EXPECT_TRUE(now.prefer_busy_poll);
    return;
  }
  auto backend = uring::detail::make_native_backend(o, plan, stats);
  ASSERT_EQ(backend->enable_napi({50, true}), 0);
  const int ring = backend->native()->ring_fd();
  uring::detail::napi_settings was;
  ASSERT_EQ(uring::detail::unregister_napi(ring, was), 0);
  EXPECT_EQ(was.busy_poll_us, 50u);
  EXPECT_TRUE(was.prefer_busy_poll);
  ASSERT_EQ(uring::detail::unregister_napi(ring, was), 0);
  EXPECT_EQ(was.busy_poll_us, 0u);  // taken: none left
}

TEST_P(Napi, AnExecutorThatPollsServesAConnection) {
  executor_options o = polling(options());
  uring::executor ex(o);
  const auto& k = uring::probed_kernel();
  EXPECT_EQ(ex.plan().napi, emulated() ? k.epoll_busy_poll : k.napi) << uring::to_string(ex.plan());
  int major = 0, minor = 0;
  const bool shows = std::sscanf(k.kernel_release.c_str(), "%d.%d", &major, &minor) == 2 &&
                     (major > 6 || (major == 6 && minor >= 12));  // fdinfo shows NAPI from 6.12
  if (!emulated() && k.napi && shows) {
    EXPECT_EQ(rings_polling_for(50'000), 1);  // the executor's ring
  }
  auto listener = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  const std::string payload = uring::test::pattern(200'000, 7);
  std::string back = ex.run([](const uring::net::tcp_listener& l, const std::string& p) -> task<std::string> {
    uring::net::tcp_stream client = co_await uring::net::tcp_stream::connect_to(l.local_address());
    uring::net::tcp_stream server = co_await l.accept();
    auto [sent, got] =
        co_await uring::when_all(uring::test::send_and_end(&client, &p), uring::test::read_to_end(&server));
    (void)sent;
    co_return got;
  }(listener, payload));
  EXPECT_EQ(back, payload);
}

// A restricted ring is enabled before the executor registers NAPI: the register opcode is on its list.
TEST_P(Napi, ARestrictedExecutorStillPolls) {
  executor_options o = polling(options());
  o.allowed_ops = {uring::op_kind::nop};
  uring::executor ex(o);
  EXPECT_EQ(ex.run([]() -> task<int> { co_return (co_await uring::nop().nothrow()).res; }()), 0);
}

INSTANTIATE_BACKENDS(Napi);

}  // namespace
