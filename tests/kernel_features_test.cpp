// The kernel probe: what it reports on this machine, its names, and the sentences it gives for failures.
#include <gtest/gtest.h>

#include <liburing.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <uring/kernel_features.hpp>
#include <uring/plan.hpp>

#include "fd_leak.hpp"
#include "setup/setup_error.hpp"
#include "test_util.hpp"

namespace {

// Whether `release` ("6.18.44-fc") is at least major.minor.
bool release_at_least(const std::string& release, int major, int minor) {
  int have_major = 0, have_minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

using uring::test::open_fd_count;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool is_hex4(const std::string& s) {
  return s.size() == 4 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

// A structural check of JSON without a parser: strings end, escapes are JSON's, no raw control characters
// inside strings, and braces and brackets nest and balance outside strings. Empty when fine, else what broke.
std::string json_structure_error(const std::string& json) {
  std::vector<char> open;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (static_cast<unsigned char>(c) < 0x20) return "raw control character at " + std::to_string(i);
      if (c == '"') in_string = false;
      if (c == '\\') {
        if (++i == json.size()) return "escape at the end";
        if (std::string("\"\\/bfnrtu").find(json[i]) == std::string::npos)
          return "bad escape at " + std::to_string(i);
        if (json[i] == 'u' && (i + 4 >= json.size() || !is_hex4(json.substr(i + 1, 4)))) {
          return "bad \\u escape at " + std::to_string(i);
        }
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') open.push_back(c == '{' ? '}' : ']');
    if (c == '}' || c == ']') {
      if (open.empty() || open.back() != c)
        return std::string("unbalanced ") + c + " at " + std::to_string(i);
      open.pop_back();
    }
  }
  if (in_string) return "unterminated string";
  if (!open.empty()) return "unclosed " + std::string(1, open.back() == '}' ? '{' : '[');
  return {};
}

TEST(KernelFeatures, ThisKernelHasUsableIoUring) {
  auto f = uring::probe_kernel();
  ASSERT_TRUE(f.io_uring_usable) << f.reason;
  EXPECT_FALSE(f.kernel_release.empty());
  EXPECT_TRUE(f.supports(IORING_OP_NOP));
  EXPECT_TRUE(f.supports(IORING_OP_READ));
  EXPECT_TRUE(f.supports(IORING_OP_WRITE));
  EXPECT_TRUE(f.has_feature(IORING_FEAT_NODROP));
  EXPECT_TRUE(f.registered_ring_fd);
  EXPECT_FALSE(f.supports(255));
}

TEST(KernelFeatures, AgreesWithLiburingsOwnProbe) {
  auto f = uring::probe_kernel();
  io_uring_probe* probe = io_uring_get_probe();
  ASSERT_NE(probe, nullptr);
  for (unsigned op = 0; op < 256; ++op) {
    EXPECT_EQ(f.supports(op), io_uring_opcode_supported(probe, static_cast<int>(op)) != 0) << op;
  }
  io_uring_free_probe(probe);
}

TEST(KernelFeatures, NamesOpcodesAndFeatures) {
  EXPECT_EQ(uring::opcode_name(IORING_OP_READ), "READ");
  EXPECT_EQ(uring::opcode_name(IORING_OP_MSG_RING), "MSG_RING");
  EXPECT_EQ(uring::opcode_name(200), "op200");
  EXPECT_EQ(uring::feature_name(1), "NODROP");
  EXPECT_EQ(uring::feature_name(31), "bit31");
}

TEST(KernelFeatures, ReportIsReadable) {
  auto text = uring::to_string(uring::probe_kernel());
  EXPECT_NE(text.find("io_uring          usable"), std::string::npos) << text;
  EXPECT_NE(text.find("NODROP"), std::string::npos);
  EXPECT_NE(text.find("MSG_RING"), std::string::npos);
  EXPECT_NE(text.find("registered ring   yes"), std::string::npos);
  for (const char* line : {"msg_ring          yes", "send_msg_ring     yes", "msg_ring flags    yes",
                           "eventfd register  yes", "buffer ring       yes", "multishot accept  yes",
                           "multishot recv    yes", "send_zc           yes", "multishot timeout yes"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " missing from\n" << text;
  }

  uring::kernel_features blocked;
  blocked.kernel_release = "4.19";
  blocked.setup_errno = ENOSYS;
  blocked.reason = uring::detail::explain_setup_error(ENOSYS);
  auto blocked_text = uring::to_string(blocked);
  EXPECT_NE(blocked_text.find("unusable"), std::string::npos);
  EXPECT_NE(blocked_text.find("seccomp"), std::string::npos);
}

TEST(KernelFeatures, SetupErrorsSayWhyAndWhatToDo) {
  EXPECT_NE(uring::detail::explain_setup_error(ENOSYS).find("ENOSYS"), std::string::npos);
  EXPECT_NE(uring::detail::explain_setup_error(ENOSYS).find("Docker"), std::string::npos);
  EXPECT_NE(uring::detail::explain_setup_error(EPERM).find("EPERM"), std::string::npos);
  EXPECT_NE(uring::detail::explain_setup_error(ENOMEM).find("RLIMIT_MEMLOCK"), std::string::npos);
  EXPECT_NE(uring::detail::explain_setup_error(EINVAL).find("flag"), std::string::npos);
}

// Each feature the probe tries for real must be found on a kernel new enough to have it. On this machine's
// 6.18 that is every one of them.
TEST(KernelFeatures, FindsEveryFeatureThisKernelIsNewEnoughFor) {
  auto f = uring::probe_kernel();
  ASSERT_TRUE(f.io_uring_usable) << f.reason;
  struct expectation {
    const char* name;
    bool found;
    int major, minor;
  };
  const expectation expected[] = {
      {"registered_ring_fd", f.registered_ring_fd, 5, 18},
      {"msg_ring", f.msg_ring, 5, 18},
      {"send_msg_ring", f.send_msg_ring, 6, 13},
      {"msg_ring_flags_pass", f.msg_ring_flags_pass, 6, 3},
      {"eventfd_register", f.eventfd_register, 5, 1},
      {"buf_ring", f.buf_ring, 5, 19},
      {"multishot_accept", f.multishot_accept, 5, 19},
      {"multishot_recv", f.multishot_recv, 6, 0},
      {"send_zc", f.send_zc, 6, 0},
      {"multishot_timeout", f.multishot_timeout, 6, 4},
      {"read_multishot", f.read_multishot, 6, 7},
      {"registered_buffers", f.registered_buffers, 5, 13},
      {"sqpoll", f.sqpoll, 5, 11},
      {"recv_bundle", f.recv_bundle, 6, 10},
      {"recv_incremental", f.recv_incremental, 6, 12},
      {"send_bundle", f.send_bundle, 6, 10},
      {"SUBMIT_ALL", uring::any(f.setup_flags & uring::ring_flags::submit_all), 5, 18},
      {"COOP_TASKRUN", uring::any(f.setup_flags & uring::ring_flags::coop_taskrun), 5, 19},
      {"SINGLE_ISSUER", uring::any(f.setup_flags & uring::ring_flags::single_issuer), 6, 0},
      {"DEFER_TASKRUN", uring::any(f.setup_flags & uring::ring_flags::defer_taskrun), 6, 1},
  };
  int checked = 0;
  for (const auto& e : expected) {
    if (!release_at_least(f.kernel_release, e.major, e.minor)) continue;
    EXPECT_TRUE(e.found) << e.name << " on kernel " << f.kernel_release;
    ++checked;
  }
  if (release_at_least(f.kernel_release, 6, 13)) {
    EXPECT_EQ(checked, 20);
  }
}

TEST(KernelFeatures, ProbeClosesEverythingItOpens) {
  (void)uring::probe_kernel();  // anything opened once per process (by libc, the sanitizers) is open now
  long before = open_fd_count();
  for (int i = 0; i < 3; ++i) (void)uring::probe_kernel();
  EXPECT_EQ(open_fd_count(), before);
}

// Every CQE the probe waits for is due at once; a wait that runs into the probe's 200 ms limit means a probe
// is broken. Normally the whole probe takes well under a millisecond.
TEST(KernelFeatures, ProbeIsFast) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    (void)uring::probe_kernel();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("probe_kernel: median %.3f ms, fastest %.3f ms\n", ms[2], ms[0]);
  EXPECT_LT(ms[2], 50.0);
}

TEST(KernelFeatures, ProbedKernelIsProbedOnce) {
  const uring::kernel_features& first = uring::probed_kernel();
  EXPECT_EQ(&first, &uring::probed_kernel());
  auto fresh = uring::probe_kernel();
  EXPECT_EQ(first.io_uring_usable, fresh.io_uring_usable);
  EXPECT_EQ(first.opcodes, fresh.opcodes);
  EXPECT_EQ(first.msg_ring, fresh.msg_ring);
  EXPECT_EQ(first.multishot_recv, fresh.multishot_recv);
}

TEST(KernelFeaturesJson, ThisKernelAsJson) {
  auto f = uring::probe_kernel();
  std::string json = uring::to_json(f);
  EXPECT_EQ(json_structure_error(json), "") << json;
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_TRUE(contains(json, "{\"kernel_release\":\"" + f.kernel_release + "\",")) << json;
  for (const char* key : {"io_uring_usable", "registered_ring_fd", "msg_ring", "send_msg_ring",
                          "eventfd_register", "buf_ring", "multishot_accept", "multishot_recv", "send_zc",
                          "multishot_timeout", "read_multishot", "registered_buffers"}) {
    EXPECT_TRUE(contains(json, "\"" + std::string(key) + "\":true")) << key << " in " << json;
  }
  EXPECT_TRUE(contains(json, "\"setup_errno\":0,\"reason\":\"\",")) << json;
  EXPECT_TRUE(contains(json, "\"feature_bits\":" + std::to_string(f.feature_bits) + ",")) << json;
  EXPECT_TRUE(contains(json, "\"features\":[\"SINGLE_MMAP\",\"NODROP\",")) << json;
  EXPECT_TRUE(contains(json, "\"opcodes\":[\"NOP\",\"READV\",")) << json;
  EXPECT_TRUE(contains(json, "\"MSG_RING\"")) << json;
  EXPECT_TRUE(
      contains(json, "\"setup_flags\":[\"SUBMIT_ALL\",\"COOP_TASKRUN\",\"SINGLE_ISSUER\",\"DEFER_TASKRUN\"]"))
      << json;
}

TEST(KernelFeaturesJson, FakeKernelExactly) {
  uring::kernel_features f;
  f.kernel_release = "4.19 \"old\"";
  f.setup_errno = ENOSYS;
  f.reason = "blocked by C:\\policy\n\t\x01 \xe2\x80\x94 done";
  f.feature_bits = 0b11;
  f.opcodes.set(0);
  f.opcodes.set(200);
  f.setup_flags = uring::ring_flags::coop_taskrun;
  f.buf_ring = true;
  f.reasons["msg_ring"] = "said \"no\"";
  f.reasons["eventfd_register"] = "EPERM";
  EXPECT_EQ(uring::to_json(f),
            "{\"kernel_release\":\"4.19 \\\"old\\\"\",\"io_uring_usable\":false,\"setup_errno\":38,"
            "\"reason\":\"blocked by C:\\\\policy\\n\\t\\u0001 \xe2\x80\x94 done\",\"feature_bits\":3,"
            "\"features\":[\"SINGLE_MMAP\",\"NODROP\"],\"opcodes\":[\"NOP\",\"op200\"],"
            "\"registered_ring_fd\":false,\"setup_flags\":[\"COOP_TASKRUN\"],\"msg_ring\":false,"
            "\"send_msg_ring\":false,\"msg_ring_flags_pass\":false,\"eventfd_register\":false,"
            "\"buf_ring\":true,\"multishot_accept\":false,\"multishot_recv\":false,\"send_zc\":false,"
            "\"multishot_timeout\":false,\"read_multishot\":false,\"registered_buffers\":false,"
            "\"send_fixed_buf\":false,\"napi\":false,\"epoll_busy_poll\":false,\"sqpoll\":false,"
            "\"recv_bundle\":false,\"recv_incremental\":false,\"send_bundle\":false,\"reasons\":{\"eventfd_"
            "register\":\"EPERM\",\"msg_"
            "ring\":\"said \\\"no\\\"\"}}");
  EXPECT_EQ(json_structure_error(uring::to_json(f)), "");
}

TEST(KernelFeaturesJson, PlanExactly) {
  uring::executor_plan plan;
  plan.backend = uring::backend_kind::native;
  plan.flags = uring::ring_flags::submit_all | uring::ring_flags::defer_taskrun;
  plan.register_ring_fd = true;
  plan.msg_ring = true;
  plan.buf_ring = true;
  plan.linked_chains = true;
  plan.notes = {"say \"no\" to C:\\temp", "second"};
  EXPECT_EQ(uring::to_json(plan),
            "{\"backend\":\"native\",\"flags\":[\"SUBMIT_ALL\",\"DEFER_TASKRUN\"],\"register_ring_fd\":true,"
            "\"msg_ring\":true,\"send_msg_ring\":false,\"buf_ring\":true,\"linked_chains\":true,"
            "\"multishot_timeout\":false,\"read_multishot\":false,\"sqpoll\":false,\"recv_bundle\":false,"
            "\"recv_incremental\":false,"
            "\"send_bundle\":false,"
            "\"allowed_ops\":[],"
            "\"notes\":[\"say \\\"no\\\" to C:\\\\temp\",\"second\"]}");

  uring::executor_plan emulated;
  emulated.backend = uring::backend_kind::emulated;
  EXPECT_EQ(uring::to_json(emulated),
            "{\"backend\":\"emulated\",\"flags\":[],\"register_ring_fd\":false,\"msg_ring\":false,"
            "\"send_msg_ring\":false,\"buf_ring\":false,\"linked_chains\":false,\"multishot_timeout\":false,"
            "\"read_multishot\":false,\"sqpoll\":false,\"recv_bundle\":false,\"recv_incremental\":false,"
            "\"send_bundle\":false,"
            "\"allowed_ops\":[],\"notes\":[]}");

  // A restricted plan lists the allowed operations by our names, msg_ring last.
  uring::executor_plan restricted;
  restricted.backend = uring::backend_kind::native;
  restricted.allowed_ops = uring::op_allowlist{uring::op_kind::read, uring::op_kind::nop}.allow_msg_ring();
  EXPECT_EQ(uring::to_json(restricted),
            "{\"backend\":\"native\",\"flags\":[],\"register_ring_fd\":false,\"msg_ring\":false,"
            "\"send_msg_ring\":false,\"buf_ring\":false,\"linked_chains\":false,\"multishot_timeout\":false,"
            "\"read_multishot\":false,\"sqpoll\":false,\"recv_bundle\":false,\"recv_incremental\":false,"
            "\"send_bundle\":false,"
            "\"allowed_ops\":[\"nop\","
            "\"read\",\"msg_ring\"],"
            "\"notes\":[]}");
}

TEST(KernelFeaturesJson, StructureCheckCatchesBrokenJson) {
  // The checker used above must itself be able to fail.
  EXPECT_NE(json_structure_error("{\"a\":[1}"), "");
  EXPECT_NE(json_structure_error("{\"a\":\"x}"), "");
  EXPECT_NE(json_structure_error("{\"a\":\"\\q\"}"), "");
  EXPECT_NE(json_structure_error("{\"a\":\"\n\"}"), "");
  EXPECT_EQ(json_structure_error("{\"a\":[\"\\u00ff\",{}]}"), "");
}

}  // namespace
