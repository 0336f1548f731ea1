// The fd leak check itself (fd_leak.hpp): a test that leaves an fd open fails and names it; one that closes
// what it opened passes; keep_fd_open exempts an fd on purpose. The leaking tests are disabled and run in
// a child process of this same executable, whose verdict and output are checked here.
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

// Runs this executable on one (disabled) test; its exit status and output.
std::pair<int, std::string> run_child(const std::string& test) {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  EXPECT_GT(n, 0);
  self[n > 0 ? n : 0] = '\0';
  std::string cmd =
      std::string(self) + " --gtest_also_run_disabled_tests --gtest_filter=FdLeakChild." + test + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  int status = p != nullptr ? ::pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(FdLeakChild, DISABLED_LeaksAnEventfd) {
  int fd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::printf("leaked fd %d\n", fd);
}

TEST(FdLeakChild, DISABLED_ClosesWhatItOpens) {
  uring::test::unique_fd fd(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(fd);
}

TEST(FdLeakChild, DISABLED_KeepsOneOnPurpose) {
  int fd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  uring::test::keep_fd_open(fd, "this test's point");
}

TEST(FdLeak, ATestThatLeavesAnFdOpenFailsNamingIt) {
  auto [status, out] = run_child("DISABLED_LeaksAnEventfd");
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("still open at its end"), std::string::npos) << out;
  EXPECT_NE(out.find("anon_inode:[eventfd]"), std::string::npos) << out;
  EXPECT_NE(out.find("[  FAILED  ] FdLeakChild.DISABLED_LeaksAnEventfd"), std::string::npos) << out;
}

TEST(FdLeak, ATestThatClosesItsFdsPasses) {
  auto [status, out] = run_child("DISABLED_ClosesWhatItOpens");
  EXPECT_EQ(status, 0) << out;
}

TEST(FdLeak, AnFdKeptOnPurposeIsNoFailure) {
  auto [status, out] = run_child("DISABLED_KeepsOneOnPurpose");
  EXPECT_EQ(status, 0) << out;
}

}  // namespace
