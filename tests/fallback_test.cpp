// Auto-detection of a kernel without usable io_uring: children whose io_uring_setup a seccomp filter makes
// fail (ENOSYS as an old kernel or Docker would say, EPERM as a refusing policy would) must get a probe that
// says so and why, and a plan that falls back to emulation — or refuses, when native is demanded.
// Also pins the seccomp_child.hpp helper itself, which other tests reuse.
#include <gtest/gtest.h>

#include <grp.h>
#include <linux/io_uring.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <uring/kernel_features.hpp>
#include <uring/plan.hpp>

#include "seccomp_child.hpp"

namespace {

using namespace std::chrono_literals;
using uring::test::child_result;

// The `key=value` lines a child printed (split at the first '='; a later key wins).
std::map<std::string, std::string> fields_of(const std::string& output) {
  std::map<std::string, std::string> fields;
  std::size_t pos = 0;
  while (pos < output.size()) {
    std::size_t end = output.find('\n', pos);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(pos, end - pos);
    pos = end + 1;
    if (auto eq = line.find('='); eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return fields;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string errno_name(int err) { return strerrorname_np(err); }

// io_uring_setup called directly, without liburing: -1 and the errno, or a ring fd (closed here).
int raw_io_uring_setup_errno() {
  io_uring_params params{};
  long fd = ::syscall(__NR_io_uring_setup, 4, &params);
  if (fd < 0) return errno;
  ::close(static_cast<int>(fd));
  return 0;
}

// ---- the helper itself ----

TEST(SeccompChild, ReportsExitStatusAndCapturesBothStreams) {
  child_result r = uring::test::run_in_child([] {
    std::printf("to stdout\n");
    std::fprintf(stderr, "to stderr\n");
    return 7;
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(contains(r.output, "to stdout\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "to stderr\n")) << r.output;
}

TEST(SeccompChild, ReportsAnExceptionThatLeavesTheBody) {
  child_result r =
      uring::test::run_in_child([]() -> int { throw std::runtime_error("boom from the child"); });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, uring::test::kChildThrew);
  EXPECT_TRUE(contains(r.output, "boom from the child")) << r.output;
}

TEST(SeccompChild, ReportsTheSignalThatEndedTheChild) {
  child_result r = uring::test::run_in_child([] {
    ::kill(::getpid(), SIGKILL);
    return 0;
  });
  EXPECT_FALSE(r.exited) << r.describe();
  EXPECT_EQ(r.signal, SIGKILL);
}

TEST(SeccompChild, KillsAChildThatOutlivesItsLimit) {
  auto start = std::chrono::steady_clock::now();
  child_result r = uring::test::run_in_child(
      [] {
        for (;;) ::pause();
        return 0;
      },
      200ms);
  EXPECT_TRUE(r.timed_out) << r.describe();
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

class SeccompFilter : public ::testing::TestWithParam<int> {};

// io_uring_setup fails with exactly the errno asked for; other system calls, io_uring's own register call
// among them, still work; and the parent is not affected.
TEST_P(SeccompFilter, BlocksIoUringSetupOnly) {
  const int err = GetParam();
  child_result r = uring::test::run_with_io_uring_blocked(err, [] {
    std::printf("setup_errno=%d\n", raw_io_uring_setup_errno());
    int efd = ::eventfd(0, EFD_CLOEXEC);
    std::printf("eventfd_ok=%d\n", efd >= 0 ? 1 : 0);
    if (efd >= 0) ::close(efd);
    // An fd that is not open: EBADF from the kernel itself, not the filter's errno.
    long reg = ::syscall(__NR_io_uring_register, 1u << 20, 0u, nullptr, 0u);
    std::printf("register_errno=%d\n", reg < 0 ? errno : 0);
    return 0;
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto fields = fields_of(r.output);
  EXPECT_EQ(fields["setup_errno"], std::to_string(err)) << r.output;
  EXPECT_EQ(fields["eventfd_ok"], "1") << r.output;
  EXPECT_EQ(fields["register_errno"], std::to_string(EBADF)) << r.output;
  EXPECT_EQ(raw_io_uring_setup_errno(), 0) << "the filter leaked into the parent";
}

INSTANTIATE_TEST_SUITE_P(Errnos, SeccompFilter, ::testing::Values(ENOSYS, EPERM),
                         [](const auto& p) { return errno_name(p.param); });

// ---- what the probe and the plan make of it ----

class Fallback : public ::testing::TestWithParam<int> {
 protected:
  // Whether explain_setup_error(err) blames a seccomp filter here: EPERM blames the sysctl instead where
  // kernel.io_uring_disabled is set.
  static bool reason_blames_seccomp(int err) {
    if (err == ENOSYS) return true;
    std::ifstream sysctl("/proc/sys/kernel/io_uring_disabled");
    int value = 0;
    return !(sysctl >> value) || value == 0;
  }
};

// In the child: the probe, the automatic plan, and the two ways of demanding native, as key=value lines.
int report_probe_and_plans() {
  uring::kernel_features k = uring::probe_kernel();
  std::printf("usable=%d\n", k.io_uring_usable ? 1 : 0);
  std::printf("setup_errno=%d\n", k.setup_errno);
  std::printf("reason=%s\n", k.reason.c_str());
  std::printf("opcodes=%zu\n", k.opcodes.count());
  std::printf("anything_else=%d\n",
              k.registered_ring_fd || k.msg_ring || k.send_msg_ring || k.eventfd_register || k.buf_ring ||
                  k.multishot_accept || k.multishot_recv || k.send_zc || k.multishot_timeout ||
                  k.read_multishot || k.registered_buffers || k.send_fixed_buf || uring::any(k.setup_flags));
  std::printf("report=%s\n",
              uring::to_string(k).find("unusable") != std::string::npos ? "unusable" : "usable");

  uring::executor_plan plan = uring::make_plan(k, uring::executor_options{}, uring::plan_overrides{});
  std::printf("plan_backend=%s\n", uring::to_string(plan.backend).c_str());
  std::printf("plan_notes=%zu\n", plan.notes.size());
  for (const auto& note : plan.notes) std::printf("plan_note=%s\n", note.c_str());

  auto demand = [&](const char* key, const uring::executor_options& request, const uring::plan_overrides& o) {
    try {
      uring::make_plan(k, request, o);
      std::printf("%s_errno=none\n", key);
    } catch (const std::system_error& e) {
      std::printf("%s_errno=%d\n%s_what=%s\n", key, e.code().value(), key, e.what());
    }
  };
  uring::executor_options native_request;
  native_request.backend = uring::backend_kind::native;
  demand("by_options", native_request, uring::plan_overrides{});
  uring::plan_overrides native_override;
  native_override.backend = uring::backend_kind::native;
  demand("by_override", uring::executor_options{}, native_override);
  return 0;
}

TEST_P(Fallback, ProbeSaysUnusableAndWhy) {
  const int err = GetParam();
  child_result r = uring::test::run_with_io_uring_blocked(err, report_probe_and_plans);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto f = fields_of(r.output);
  EXPECT_EQ(f["usable"], "0") << r.output;
  EXPECT_EQ(f["setup_errno"], std::to_string(err)) << r.output;
  EXPECT_TRUE(contains(f["reason"], errno_name(err))) << f["reason"];
  if (reason_blames_seccomp(err)) {
    EXPECT_TRUE(contains(f["reason"], "seccomp")) << f["reason"];
  }
  // Nothing past the failed setup can have been probed.
  EXPECT_EQ(f["opcodes"], "0");
  EXPECT_EQ(f["anything_else"], "0");
  EXPECT_EQ(f["report"], "unusable");
}

TEST_P(Fallback, AutomaticPlanIsEmulatedWithTheReason) {
  const int err = GetParam();
  child_result r = uring::test::run_with_io_uring_blocked(err, report_probe_and_plans);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto f = fields_of(r.output);
  EXPECT_EQ(f["plan_backend"], "emulated") << r.output;
  ASSERT_EQ(f["plan_notes"], "1") << r.output;
  EXPECT_TRUE(contains(f["plan_note"], "emulated")) << f["plan_note"];
  EXPECT_TRUE(contains(f["plan_note"], f["reason"])) << f["plan_note"];
  EXPECT_FALSE(f["reason"].empty());
}

TEST_P(Fallback, DemandingNativeThrowsTheErrno) {
  const int err = GetParam();
  child_result r = uring::test::run_with_io_uring_blocked(err, report_probe_and_plans);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto f = fields_of(r.output);
  for (std::string key : {"by_options", "by_override"}) {
    EXPECT_EQ(f[key + "_errno"], std::to_string(err)) << key << "\n" << r.output;
    EXPECT_TRUE(contains(f[key + "_what"], f["reason"])) << key << ": " << f[key + "_what"];
    EXPECT_TRUE(contains(f[key + "_what"], "native")) << key << ": " << f[key + "_what"];
  }
}

// End to end in a fresh process (no probe inherited from this one): uring-probe --json under the filter.
TEST_P(Fallback, ProbeProgramReportsTheFallback) {
#ifndef URING_PROBE_PROGRAM
  GTEST_SKIP() << "uring-probe is not built in this configuration (URING_BUILD_SAMPLES=OFF)";
#else
  const int err = GetParam();
  child_result automatic = uring::test::run_with_io_uring_blocked(err, [] {
    ::unsetenv("URING_BACKEND");
    ::unsetenv("URING_DISABLE");
    return uring::test::exec_program({URING_PROBE_PROGRAM, "--json"});
  });
  ASSERT_TRUE(automatic.exited && automatic.exit_code == 0) << automatic.describe();
  EXPECT_TRUE(contains(automatic.output, "\"io_uring_usable\":false")) << automatic.output;
  EXPECT_TRUE(contains(automatic.output, "\"setup_errno\":" + std::to_string(err) + ",")) << automatic.output;
  EXPECT_TRUE(contains(automatic.output, "\"plan\":{\"backend\":\"emulated\"")) << automatic.output;

  child_result demanded = uring::test::run_with_io_uring_blocked(err, [] {
    ::setenv("URING_BACKEND", "native", 1);
    return uring::test::exec_program({URING_PROBE_PROGRAM, "--json"});
  });
  ASSERT_TRUE(demanded.exited) << demanded.describe();
  EXPECT_EQ(demanded.exit_code, 1) << demanded.describe();
  EXPECT_TRUE(contains(demanded.output, "\"plan\":null")) << demanded.output;
  EXPECT_TRUE(contains(demanded.output, "native backend was demanded")) << demanded.output;
#endif
}

// The point of the fallback: with io_uring blocked, a default executor runs on the emulation, says why,
// and real work (pipes, timers, linked timeouts, cancellation, files) still completes.
TEST_P(Fallback, ExecutorFallsBackToEmulationAndTheWorkCompletes) {
  const int err = GetParam();
  child_result r = uring::test::run_with_io_uring_blocked(err, [] {
    ::unsetenv("URING_BACKEND");
    ::unsetenv("URING_DISABLE");
    return uring::test::exec_program({URING_FALLBACK_WORK_HELPER});
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(contains(r.output, "backend emulated")) << r.output;
  EXPECT_TRUE(contains(r.output, errno_name(err))) << r.output;
  EXPECT_TRUE(contains(r.output, "work ok")) << r.output;

  // Demanding the native backend there fails loudly, with the kernel's reason.
  child_result demanded = uring::test::run_with_io_uring_blocked(err, [] {
    ::setenv("URING_BACKEND", "native", 1);
    return uring::test::exec_program({URING_FALLBACK_WORK_HELPER});
  });
  ASSERT_TRUE(demanded.exited) << demanded.describe();
  EXPECT_EQ(demanded.exit_code, 1) << demanded.describe();
  EXPECT_TRUE(contains(demanded.output, "native backend was demanded")) << demanded.output;
}

// And without the filter the same program runs natively: the test above is not passing by accident.
TEST(FallbackControl, WithoutTheFilterTheExecutorIsNative) {
  child_result r = uring::test::run_in_child([] {
    ::unsetenv("URING_BACKEND");
    ::unsetenv("URING_DISABLE");
    return uring::test::exec_program({URING_FALLBACK_WORK_HELPER});
  });
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(contains(r.output, "backend native")) << r.output;
  EXPECT_TRUE(contains(r.output, "work ok")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Errnos, Fallback, ::testing::Values(ENOSYS, EPERM),
                         [](const auto& p) { return errno_name(p.param); });

// ---- io_uring_register denied: rings work, registrations do not ----

// Each feature of the probe by its name in to_json.
std::vector<std::pair<std::string, bool>> feature_flags(const uring::kernel_features& k) {
  return {{"registered_ring_fd", k.registered_ring_fd},
          {"msg_ring", k.msg_ring},
          {"send_msg_ring", k.send_msg_ring},
          {"msg_ring_flags_pass", k.msg_ring_flags_pass},
          {"eventfd_register", k.eventfd_register},
          {"buf_ring", k.buf_ring},
          {"multishot_accept", k.multishot_accept},
          {"multishot_recv", k.multishot_recv},
          {"send_zc", k.send_zc},
          {"multishot_timeout", k.multishot_timeout},
          {"read_multishot", k.read_multishot},
          {"registered_buffers", k.registered_buffers},
          {"send_fixed_buf", k.send_fixed_buf}};
}

// In the child: a fresh probe (probe_kernel, not the parent's cached probed_kernel) and the automatic
// plan, as key=value lines: feature.<name>=0|1, why.<name>=<reason>, plan_*.
int report_features() {
  uring::kernel_features k = uring::probe_kernel();
  std::printf("usable=%d\nsetup_errno=%d\nreason=%s\n", k.io_uring_usable ? 1 : 0, k.setup_errno,
              k.reason.c_str());
  std::printf("opcodes=%zu\n", k.opcodes.count());
  for (const auto& [name, on] : feature_flags(k)) std::printf("feature.%s=%d\n", name.c_str(), on ? 1 : 0);
  for (const auto& [name, why] : k.reasons) std::printf("why.%s=%s\n", name.c_str(), why.c_str());
  uring::executor_plan plan = uring::make_plan(k, uring::executor_options{}, uring::plan_overrides{});
  std::printf("plan_backend=%s\nplan_register_ring_fd=%d\nplan_msg_ring=%d\n",
              uring::to_string(plan.backend).c_str(), plan.register_ring_fd ? 1 : 0, plan.msg_ring ? 1 : 0);
  std::string notes;
  for (const auto& note : plan.notes) notes += note + " | ";
  std::printf("plan_notes=%s\n", notes.c_str());
  return 0;
}

// fallback_work_helper in a fresh process (its own probe), with the environment's overrides cleared.
int exec_work_helper() {
  ::unsetenv("URING_BACKEND");
  ::unsetenv("URING_DISABLE");
  return uring::test::exec_program({URING_FALLBACK_WORK_HELPER});
}

// The probe still finds io_uring usable, and says of each feature that needs a registration that
// io_uring_register was refused, and why; what needs none (MSG_RING, multishot accept) is tried for real
// even though the opcode list (itself a registration) is unavailable.
TEST(RegisterDenied, ProbeSaysUsableAndWhyEachRegistrationFailed) {
  child_result r = uring::test::run_with_syscall_blocked(__NR_io_uring_register, EPERM, report_features);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto f = fields_of(r.output);
  EXPECT_EQ(f["usable"], "1") << r.output;
  EXPECT_EQ(f["opcodes"], "0") << r.output;
  for (std::string refused : {"registered_ring_fd", "send_msg_ring", "eventfd_register", "buf_ring",
                              "multishot_recv", "registered_buffers", "send_fixed_buf"}) {
    EXPECT_EQ(f["feature." + refused], "0") << refused << "\n" << r.output;
    EXPECT_TRUE(contains(f["why." + refused], "EPERM")) << refused << ": " << f["why." + refused];
  }
  for (std::string registration : {"opcodes", "registered_ring_fd", "eventfd_register", "buf_ring"}) {
    EXPECT_TRUE(contains(f["why." + registration], "io_uring_register(")) << f["why." + registration];
    EXPECT_TRUE(contains(f["why." + registration], "seccomp")) << f["why." + registration];
  }
  for (std::string works : {"msg_ring", "msg_ring_flags_pass", "multishot_accept"}) {
    EXPECT_EQ(f["feature." + works], "1") << works << "\n" << r.output;
  }
  EXPECT_TRUE(contains(f["why.send_zc"], "opcode list")) << r.output;
  EXPECT_EQ(f["plan_backend"], "native");
  EXPECT_EQ(f["plan_register_ring_fd"], "0");
  EXPECT_EQ(f["plan_msg_ring"], "1");
  EXPECT_TRUE(contains(f["plan_notes"], "registered ring fd: refused")) << f["plan_notes"];
  EXPECT_TRUE(contains(f["plan_notes"], "EPERM")) << f["plan_notes"];
}

// An executor keeps its native ring (with the plain ring fd) and MSG_RING, and the work completes.
TEST(RegisterDenied, ExecutorStaysNativeAndTheWorkCompletes) {
  child_result r = uring::test::run_with_syscall_blocked(__NR_io_uring_register, EPERM, exec_work_helper);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(contains(r.output, "backend native\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "messaging MSG_RING\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "note registered ring fd: refused")) << r.output;
  EXPECT_TRUE(contains(r.output, "hops by MSG_RING 10\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "work ok")) << r.output;
}

// ---- a small RLIMIT_MEMLOCK, as an unprivileged user ----

// Kernels 6.13+ charge ring memory (and provided-buffer rings) to RLIMIT_MEMLOCK for a process without
// CAP_IPC_LOCK, and free a closed ring's memory asynchronously, so a small limit makes io_uring_setup
// fail with ENOMEM: never for the first ring (0 bytes), sometimes for later ones (64 KiB), not at all
// (8 MiB, today's default). Root ignores the limit, so the child becomes nobody.
class Memlock : public ::testing::TestWithParam<rlim_t> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to become the unprivileged user nobody";
    passwd* nobody = ::getpwnam("nobody");
    if (nobody == nullptr) GTEST_SKIP() << "no user nobody";
    uid_ = nobody->pw_uid;
    gid_ = nobody->pw_gid;
  }

  // In the child: the limit, then nobody (groups first, while we may still change them).
  int become_limited_nobody() const {
    rlimit limit{GetParam(), GetParam()};
    if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0 || ::setgroups(0, nullptr) != 0 ||
        ::setresgid(gid_, gid_, gid_) != 0 || ::setresuid(uid_, uid_, uid_) != 0) {
      std::printf("becoming nobody with a small RLIMIT_MEMLOCK failed: %s\n", std::strerror(errno));
      return 120;
    }
    return 0;
  }

  child_result run_limited(int (*body)()) const {
    return uring::test::run_in_child([&] {
      if (int failed = become_limited_nobody()) return failed;
      return body();
    });
  }

  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

// Whatever the limit takes away, the probe says why (ENOMEM, RLIMIT_MEMLOCK).
TEST_P(Memlock, ProbeSaysWhatTheLimitTookAway) {
  const uring::kernel_features unlimited = uring::probe_kernel();
  child_result r = run_limited(report_features);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  auto f = fields_of(r.output);
  if (GetParam() == 0) {
    EXPECT_EQ(f["usable"], "0") << r.output;
  }
  if (GetParam() >= (8u << 20)) {
    EXPECT_EQ(f["usable"], "1") << r.output;
  }
  if (f["usable"] == "0") {
    EXPECT_EQ(f["setup_errno"], std::to_string(ENOMEM));
    EXPECT_TRUE(contains(f["reason"], "RLIMIT_MEMLOCK")) << f["reason"];
    EXPECT_EQ(f["plan_backend"], "emulated");
    return;
  }
  for (const auto& [name, on] : feature_flags(unlimited)) {
    if (!on || f["feature." + name] == "1") continue;
    EXPECT_TRUE(contains(f["why." + name], "ENOMEM") && contains(f["why." + name], "RLIMIT_MEMLOCK"))
        << name << " is off under the limit, and the probe should say why: " << f["why." + name];
    EXPECT_LT(GetParam(), 8u << 20) << name << " is off even under a generous limit";
  }
}

// And an executor keeps working: natively where its ring fits, else on the emulation, saying why.
TEST_P(Memlock, ExecutorKeepsWorkingAndSaysWhy) {
  child_result r = run_limited(exec_work_helper);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(contains(r.output, "work ok")) << r.output;
  const bool native = contains(r.output, "backend native\n");
  if (GetParam() == 0) {
    EXPECT_FALSE(native) << r.output;
  }
  if (GetParam() >= (8u << 20)) {
    EXPECT_TRUE(native) << r.output;
  }
  if (!native) {
    EXPECT_TRUE(contains(r.output, "note backend: emulated, because")) << r.output;
    EXPECT_TRUE(contains(r.output, "RLIMIT_MEMLOCK")) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Limits, Memlock, ::testing::Values(rlim_t{0}, rlim_t{64} << 10, rlim_t{8} << 20),
                         [](const auto& p) { return "bytes_" + std::to_string(p.param); });

}  // namespace
