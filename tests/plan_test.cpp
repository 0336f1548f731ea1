// make_plan on fake kernels, table-driven: the plan is a pure function of (kernel, options, overrides), so
// every fallback can be pinned without the kernel that would cause it. Also the URING_* environment
// overrides and the feature-name parser.
#include <gtest/gtest.h>

#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <uring/executor_options.hpp>
#include <uring/kernel_features.hpp>
#include <uring/plan.hpp>

namespace {

using uring::backend_kind;
using uring::executor_options;
using uring::executor_plan;
using uring::feature;
using uring::feature_set;
using uring::kernel_features;
using uring::plan_overrides;
using uring::ring_flags;

constexpr ring_flags kAllFlags =
    ring_flags::submit_all | ring_flags::coop_taskrun | ring_flags::single_issuer | ring_flags::defer_taskrun;
constexpr ring_flags kDefaultFlags = ring_flags::submit_all | ring_flags::coop_taskrun;

// A kernel that has everything (as 6.18 does).
kernel_features full_kernel() {
  kernel_features k;
  k.kernel_release = "6.18-fake";
  k.io_uring_usable = true;
  k.registered_ring_fd = true;
  k.setup_flags = kAllFlags;
  k.msg_ring = k.send_msg_ring = k.eventfd_register = k.buf_ring = true;
  k.multishot_accept = k.multishot_recv = k.send_zc = k.multishot_timeout = k.read_multishot = k.recv_bundle =
      k.recv_incremental = k.send_bundle = true;
  return k;
}

// `k` without bundled sends, for a reason the probe recorded.
kernel_features without_send_bundles(kernel_features k) {
  k.send_bundle = false;
  k.reasons["send_bundle"] = "IORING_OP_SEND (bundle): EINVAL";
  return k;
}

// `k` without bundled receives, for a reason the probe recorded.
kernel_features without_bundles(kernel_features k) {
  k.recv_bundle = false;
  k.reasons["recv_bundle"] = "kept no length";
  return k;
}

// A kernel with io_uring but none of the newer features (5.15: no setup flags, registered rings, MSG_RING).
kernel_features old_kernel() {
  kernel_features k;
  k.kernel_release = "5.15-fake";
  k.io_uring_usable = true;
  return k;
}

// A kernel whose io_uring_setup fails with `err`.
kernel_features unusable_kernel(int err) {
  kernel_features k;
  k.kernel_release = "4.19-fake";
  k.setup_errno = err;
  k.reason = "io_uring_setup: fake refusal for the test";
  return k;
}

kernel_features with(kernel_features k, const std::function<void(kernel_features&)>& change) {
  change(k);
  return k;
}

executor_options with(executor_options o, const std::function<void(executor_options&)>& change) {
  change(o);
  return o;
}

executor_options requesting(backend_kind b) {
  executor_options o;
  o.backend = b;
  return o;
}
executor_options disabling(feature_set disable) {
  executor_options o;
  o.disable = disable;
  return o;
}
executor_options with_flags(ring_flags flags, feature_set disable = {}) {
  executor_options o;
  o.flags = flags;
  o.disable = disable;
  return o;
}
plan_overrides overriding(backend_kind b, feature_set disable = {}) {
  plan_overrides o;
  o.backend = b;
  o.disable = disable;
  return o;
}

// One row: the inputs, and the plan they must give. `expected.notes` holds, in order, a fragment of each
// note the plan must have; the plan must have no other notes.
struct plan_case {
  const char* name;
  kernel_features kernel;
  executor_options request = {};
  plan_overrides overrides = {};
  executor_plan expected;
};

void PrintTo(const plan_case& c, std::ostream* os) { *os << c.name; }

constexpr backend_kind kNative = backend_kind::native;
constexpr backend_kind kEmulated = backend_kind::emulated;

const plan_case kCases[] = {
    {.name = "FullKernelDefaults",
     .kernel = full_kernel(),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {}}},

    // ---- which backend ----
    {.name = "UnusableAutoIsEmulatedWithTheReason",
     .kernel = unusable_kernel(ENOSYS),
     .expected = {.backend = kEmulated,
                  .notes = {"backend: emulated, because io_uring_setup: fake refusal for the test"}}},
    {.name = "EmulatedRequested",
     .kernel = full_kernel(),
     .request = requesting(kEmulated),
     .expected = {.backend = kEmulated, .notes = {"emulated as requested"}}},
    {.name = "OverrideEmulatedBeatsNativeRequest",
     .kernel = full_kernel(),
     .request = requesting(kNative),
     .overrides = overriding(kEmulated),
     .expected = {.backend = kEmulated, .notes = {"URING_BACKEND=emulated"}}},
    {.name = "OverrideNativeBeatsEmulatedRequest",
     .kernel = full_kernel(),
     .request = requesting(kEmulated),
     .overrides = overriding(kNative),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"URING_BACKEND=native"}}},
    {.name = "OverrideEmulatedOnUnusableKernelDoesNotThrow",
     .kernel = unusable_kernel(EPERM),
     .request = requesting(kNative),
     .overrides = overriding(kEmulated),
     .expected = {.backend = kEmulated, .notes = {"URING_BACKEND=emulated"}}},
    {.name = "OverrideAutoLeavesTheRequestAlone",
     .kernel = full_kernel(),
     .request = requesting(kEmulated),
     .overrides = overriding(backend_kind::automatic),
     .expected = {.backend = kEmulated, .notes = {"emulated as requested"}}},

    // ---- messaging and the registered ring ----
    {.name = "MsgRingDisabled",
     .kernel = full_kernel(),
     .request = disabling(feature::msg_ring),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .notes = {"MSG_RING disabled by request; mailbox"}}},
    {.name = "MsgRingDisabledByEnvironment",
     .kernel = full_kernel(),
     .overrides = overriding(backend_kind::automatic, feature::msg_ring),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .notes = {"MSG_RING disabled by request"}}},
    {.name = "SendMsgRingDisabled",
     .kernel = full_kernel(),
     .request = disabling(feature::send_msg_ring),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .notes = {}}},
    {.name = "SendMsgRingOnlyWithMsgRing",
     .kernel = with(full_kernel(), [](auto& k) { k.msg_ring = false; }),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .notes = {"MSG_RING unavailable on kernel 6.18-fake"}}},
    {.name = "KernelWithoutSendMsgRing",
     .kernel = with(full_kernel(), [](auto& k) { k.send_msg_ring = false; }),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .notes = {}}},
    {.name = "RegisteredRingDisabled",
     .kernel = full_kernel(),
     .request = disabling(feature::registered_ring),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"registered ring fd: disabled by request"}}},
    {.name = "RegisteredRingUnsupported",
     .kernel = with(full_kernel(), [](auto& k) { k.registered_ring_fd = false; }),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"registered ring fd: not supported by kernel 6.18-fake"}}},
    {.name = "RegisteredRingNotRequested",
     .kernel = full_kernel(),
     .request = with(executor_options{}, [](auto& o) { o.register_ring_fd = false; }),
     .expected =
         {.backend = kNative, .flags = kDefaultFlags, .msg_ring = true, .send_msg_ring = true, .notes = {}}},

    // ---- setup flags ----
    {.name = "DeferTaskrunAddsSingleIssuer",
     .kernel = full_kernel(),
     .request = with_flags(ring_flags::defer_taskrun),
     .expected = {.backend = kNative,
                  .flags = ring_flags::single_issuer | ring_flags::defer_taskrun,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"SINGLE_ISSUER added, because DEFER_TASKRUN requires it"}}},
    {.name = "DeferTaskrunDisabled",
     .kernel = full_kernel(),
     .request = with_flags(ring_flags::single_issuer | ring_flags::defer_taskrun, feature::defer_taskrun),
     .expected = {.backend = kNative,
                  .flags = ring_flags::single_issuer,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"DEFER_TASKRUN disabled by request"}}},
    {.name = "SingleIssuerDisabledWithDeferRequested",
     .kernel = full_kernel(),
     .request = with_flags(ring_flags::single_issuer | ring_flags::defer_taskrun, feature::single_issuer),
     .expected = {.backend = kNative,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"SINGLE_ISSUER disabled by request",
                            "DEFER_TASKRUN dropped, because it requires the disabled SINGLE_ISSUER"}}},
    {.name = "SetupFlagsDisabledByEnvironment",
     .kernel = full_kernel(),
     .overrides = overriding(backend_kind::automatic, feature::submit_all | feature::coop_taskrun),
     .expected = {.backend = kNative,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"SUBMIT_ALL disabled by request", "COOP_TASKRUN disabled by request"}}},
    {.name = "RefusedFlagsAreDroppedAndNoted",
     .kernel = with(full_kernel(), [](auto& k) { k.setup_flags = ring_flags::submit_all; }),
     .request = with_flags(kAllFlags),
     .expected = {.backend = kNative,
                  .flags = ring_flags::submit_all,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"COOP_TASKRUN|SINGLE_ISSUER|DEFER_TASKRUN refused by kernel 6.18-fake"}}},
    {.name = "OldKernelGetsAPlainRingAndTheMailbox",
     .kernel = old_kernel(),
     .expected = {.backend = kNative,
                  .notes = {"SUBMIT_ALL|COOP_TASKRUN refused by kernel 5.15-fake",
                            "registered ring fd: not supported by kernel 5.15-fake",
                            "MSG_RING unavailable on kernel 5.15-fake",
                            "leased recv: buffer rings or multishot recv unavailable on kernel 5.15-fake"}}},
    {.name = "BufferRingsDisabledByRequest",
     .kernel = full_kernel(),
     .request = disabling(feature::buf_ring),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"leased recv: provided buffer rings or multishot disabled by request"}}},
    {.name = "MultishotReadDisabledByRequest",
     .kernel = full_kernel(),
     .request = disabling(feature::read_multishot),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"read_stream: multishot read disabled by request; one read per chunk"}}},
    {.name = "MultishotReadUnavailable",
     .kernel =
         [] {
           kernel_features k = full_kernel();
           k.read_multishot = false;
           k.reasons["read_multishot"] = "IORING_OP_READ_MULTISHOT: EINVAL";
           return k;
         }(),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"read_stream: IORING_OP_READ_MULTISHOT unavailable on kernel 6.18-fake (6.7+): "
                            "IORING_OP_READ_MULTISHOT: EINVAL; one read per chunk"}}},
    {.name = "SendBundlesDisabledByRequest",
     .kernel = full_kernel(),
     .request = disabling(feature::send_bundle),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"send_queue: bundled send disabled by request"}}},
    {.name = "KernelWithoutSendBundles",
     .kernel = without_send_bundles(full_kernel()),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes =
                      {"send_queue: bundled send unavailable on kernel 6.18-fake (6.10+): IORING_OP_SEND "
                       "(bundle): EINVAL"}}},
    {.name = "BundlesDisabledByRequest",
     .kernel = full_kernel(),
     .request = disabling(feature::recv_bundle),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"leased recv: bundles disabled by request"}}},
    {.name = "KernelWithoutBundles",
     .kernel = without_bundles(full_kernel()),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes =
                      {"leased recv: bundled recv unavailable on kernel 6.18-fake (6.10+): kept no length"}}},
    {.name = "IncrementalRingsDisabledByRequest",
     .kernel = full_kernel(),
     .request = disabling(feature::recv_incremental),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes =
                      {"leased recv: incremental buffer rings disabled by request; incremental pools carve "
                       "their buffers in-process"}}},
    {.name = "KernelWithoutIncrementalRings",
     .kernel =
         [] {
           kernel_features k = full_kernel();
           k.recv_incremental = false;
           k.reasons["recv_incremental"] = "IOU_PBUF_RING_INC: EINVAL";
           return k;
         }(),
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"leased recv: incremental buffer rings unavailable on kernel 6.18-fake (6.12+): "
                            "IOU_PBUF_RING_INC: EINVAL; incremental pools carve their buffers in-process"}}},
    {.name = "IncrementalRingsDisabledByEnvironment",
     .kernel = full_kernel(),
     .overrides = {.disable = feature::recv_incremental},
     .expected = {.backend = kNative,
                  .flags = kDefaultFlags,
                  .register_ring_fd = true,
                  .msg_ring = true,
                  .send_msg_ring = true,
                  .notes = {"leased recv: incremental buffer rings disabled by request"}}},
};

class MakePlan : public ::testing::TestWithParam<plan_case> {};

TEST_P(MakePlan, DecidesAndExplains) {
  const plan_case& c = GetParam();
  executor_plan plan = uring::make_plan(c.kernel, c.request, c.overrides);
  std::string shown = uring::to_string(plan);
  const executor_plan& want = c.expected;
  EXPECT_EQ(plan.backend, want.backend) << shown;
  EXPECT_EQ(uring::to_string(plan.flags), uring::to_string(want.flags)) << shown;
  EXPECT_EQ(plan.register_ring_fd, want.register_ring_fd) << shown;
  EXPECT_EQ(plan.msg_ring, want.msg_ring) << shown;
  EXPECT_EQ(plan.send_msg_ring, want.send_msg_ring) << shown;
  EXPECT_EQ(plan.linked_chains, plan.backend == kNative) << shown;
  EXPECT_EQ(plan.multishot_timeout, plan.backend == kNative && c.kernel.multishot_timeout &&
                                        !c.request.disable.contains(feature::multishot) &&
                                        !c.overrides.disable.contains(feature::multishot))
      << shown;
  // Buffer rings follow the kernel unless a note says why not.
  if (plan.backend == kNative && std::none_of(plan.notes.begin(), plan.notes.end(), [](const std::string& n) {
        return n.find("leased recv") != std::string::npos;
      })) {
    EXPECT_TRUE(plan.buf_ring) << shown;
  }
  // The multishot read follows the kernel unless a note says why not.
  EXPECT_EQ(plan.read_multishot,
            plan.buf_ring &&
                std::none_of(plan.notes.begin(), plan.notes.end(),
                             [](const std::string& n) { return n.find("read_stream") != std::string::npos; }))
      << shown;
  // Bundles: emulated always (a recvmsg into several buffers), natively with the ring and the kernel's
  // bundles, unless disabled (which a note says).
  const bool bundles_disabled =
      c.request.disable.contains(feature::recv_bundle) || c.overrides.disable.contains(feature::recv_bundle);
  EXPECT_EQ(plan.recv_bundle,
            !bundles_disabled && (plan.backend == kEmulated || (plan.buf_ring && c.kernel.recv_bundle)))
      << shown;
  // Incremental rings: natively with the ring and the kernel's, unless disabled (which a note says); the
  // emulation carves in-process and plans none.
  const bool incremental_disabled = c.request.disable.contains(feature::recv_incremental) ||
                                    c.overrides.disable.contains(feature::recv_incremental);
  EXPECT_EQ(plan.recv_incremental,
            !incremental_disabled && plan.backend == kNative && plan.buf_ring && c.kernel.recv_incremental)
      << shown;
  // Send bundles: natively with the ring and the kernel's bundles, unless disabled; never emulated.
  const bool send_bundles_disabled =
      c.request.disable.contains(feature::send_bundle) || c.overrides.disable.contains(feature::send_bundle);
  EXPECT_EQ(plan.send_bundle,
            !send_bundles_disabled && plan.backend == kNative && plan.buf_ring && c.kernel.send_bundle)
      << shown;
  ASSERT_EQ(plan.notes.size(), want.notes.size()) << shown;
  for (std::size_t i = 0; i < want.notes.size(); ++i) {
    EXPECT_NE(plan.notes[i].find(want.notes[i]), std::string::npos) << "note " << i << ": " << plan.notes[i];
    EXPECT_NE(shown.find(plan.notes[i]), std::string::npos) << "to_string leaves out a note: " << shown;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, MakePlan, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

// Native demanded, by the options or by URING_BACKEND, on a kernel without io_uring: no plan, and an error
// that carries the kernel's errno and its reason.
TEST(MakePlanErrors, DemandingNativeOnAnUnusableKernelThrowsTheErrnoAndReason) {
  const kernel_features kernel = unusable_kernel(EPERM);
  const std::pair<executor_options, plan_overrides> demands[] = {
      {requesting(kNative), {}},
      {executor_options{}, overriding(kNative)},
      {requesting(kEmulated), overriding(kNative)},
  };
  for (const auto& [request, overrides] : demands) {
    try {
      (void)uring::make_plan(kernel, request, overrides);
      ADD_FAILURE() << "make_plan did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::error_code(EPERM, std::system_category()));
      EXPECT_NE(std::string(e.what()).find(kernel.reason), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("native backend was demanded"), std::string::npos) << e.what();
    }
  }
}

// ---- URING_BACKEND / URING_DISABLE ----

// Sets (or, given nullopt, unsets) an environment variable for one scope, and puts back what was there.
class scoped_env {
 public:
  scoped_env(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  ~scoped_env() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PlanOverrides, UnsetVariablesOverrideNothing) {
  scoped_env backend("URING_BACKEND", std::nullopt), disable("URING_DISABLE", std::nullopt);
  plan_overrides o = plan_overrides::from_environment();
  EXPECT_EQ(o.backend, backend_kind::automatic);
  EXPECT_TRUE(o.disable.empty());
}

TEST(PlanOverrides, ReadsBothVariables) {
  scoped_env backend("URING_BACKEND", "emulated"), disable("URING_DISABLE", "msg_ring, defer_taskrun");
  plan_overrides o = plan_overrides::from_environment();
  EXPECT_EQ(o.backend, backend_kind::emulated);
  EXPECT_EQ(o.disable, feature::msg_ring | feature::defer_taskrun) << uring::to_string(o.disable);
}

TEST(PlanOverrides, AcceptsEveryBackendSpelling) {
  const std::pair<const char*, backend_kind> spellings[] = {
      {"auto", backend_kind::automatic},  {"automatic", backend_kind::automatic},
      {"", backend_kind::automatic},      {"native", backend_kind::native},
      {" native ", backend_kind::native}, {"emulated", backend_kind::emulated},
  };
  for (auto [text, kind] : spellings) {
    scoped_env backend("URING_BACKEND", text), disable("URING_DISABLE", std::nullopt);
    EXPECT_EQ(plan_overrides::from_environment().backend, kind) << "'" << text << "'";
  }
}

// The error names the variable and the value, so an operator can find the typo.
void expect_invalid_argument_naming(const std::vector<std::string>& parts) {
  try {
    (void)plan_overrides::from_environment();
    ADD_FAILURE() << "from_environment accepted a bad value";
  } catch (const std::invalid_argument& e) {
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(PlanOverrides, RejectsAnUnknownBackend) {
  scoped_env backend("URING_BACKEND", "turbo"), disable("URING_DISABLE", std::nullopt);
  expect_invalid_argument_naming({"URING_BACKEND", "'turbo'"});
}

TEST(PlanOverrides, RejectsAnUnknownFeature) {
  scoped_env backend("URING_BACKEND", std::nullopt), disable("URING_DISABLE", "msg_ring,warp_drive");
  expect_invalid_argument_naming({"URING_DISABLE", "'warp_drive'"});
}

TEST(PlanOverrides, RestoresTheEnvironment) {
  ::setenv("URING_BACKEND", "native", 1);
  { scoped_env backend("URING_BACKEND", "emulated"); }
  EXPECT_STREQ(std::getenv("URING_BACKEND"), "native");
  ::unsetenv("URING_BACKEND");
}

// ---- feature names ----

TEST(FeatureSet, EveryNonEmptySetSurvivesARoundTrip) {
  constexpr unsigned kFeatures = 11;  // registered_ring .. send_zc
  for (std::uint32_t bits = 1; bits < (1u << kFeatures); ++bits) {
    feature_set s = feature_set::from_bits(bits);
    std::string text = uring::to_string(s);
    EXPECT_EQ(uring::parse_feature_set(text), s) << text;
  }
}

TEST(FeatureSet, ParsesNamesWithBlanksAndEmptyEntries) {
  EXPECT_EQ(uring::parse_feature_set(" msg_ring ,, buf_ring,"), feature::msg_ring | feature::buf_ring);
  EXPECT_EQ(uring::parse_feature_set("send_zc"), feature_set(feature::send_zc));
  EXPECT_TRUE(uring::parse_feature_set("").empty());
  EXPECT_EQ(uring::to_string(feature_set{}), "none");
  EXPECT_EQ(uring::parse_feature_set("none"), feature_set{});  // the empty set round-trips too
  EXPECT_EQ(uring::to_string(feature::registered_ring | feature::multishot), "registered_ring,multishot");
}

TEST(FeatureSet, RejectsAnUnknownNameByName) {
  try {
    (void)uring::parse_feature_set("msg_ring,msgring");
    ADD_FAILURE() << "parse_feature_set accepted 'msgring'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'msgring'"), std::string::npos) << e.what();
  }
}

}  // namespace
