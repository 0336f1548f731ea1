// The kernel probe: what it reports on this machine, its names, and the sentences it gives for failures.
#include <gtest/gtest.h>

#include <liburing.h>

#include <cerrno>

#include <uring/kernel_features.hpp>

#include "setup_error.hpp"

namespace {

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

}  // namespace
