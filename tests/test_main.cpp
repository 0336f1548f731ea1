// test_main.cpp — the main() of every gtest executable (uring_test() links it instead of gtest_main):
// gtest plus the fd leak check described in fd_leak.hpp.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "fd_leak.hpp"

namespace uring::test {

namespace {

std::mutex g_kept_mutex;
std::set<int>& kept() {
  static std::set<int> fds;  // the set itself holds no fd
  return fds;
}

}  // namespace

std::set<int> open_fds() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd != own) fds.insert(fd);
  }
  ::closedir(dir);
  return fds;
}

namespace {

std::string target_of(int fd) {
  char buf[512];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) return "(closed while listing)";
  return std::string(buf, static_cast<std::size_t>(n));
}

class fd_leak_listener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& /*info*/) override { baseline_ = open_fds(); }

  // Runs after the fixture's destructor and, being appended after gtest's printer, before the printer's
  // OnTestEnd (gtest calls OnTestEnd listeners in reverse order): the failure is reported with the test.
  void OnTestEnd(const ::testing::TestInfo& /*info*/) override {
    std::string leaked;
    std::lock_guard lock(g_kept_mutex);
    for (int fd : open_fds()) {
      if (baseline_.contains(fd) || kept().contains(fd)) continue;
      leaked += "\n  fd " + std::to_string(fd) + " -> " + target_of(fd);
    }
    if (!leaked.empty()) {
      ADD_FAILURE() << "file descriptors opened during the test are still open at its end (fd_leak.hpp):"
                    << leaked;
    }
  }

  std::set<int> baseline_;
};

}  // namespace

void keep_fd_open(int fd, const char* /*why*/) {
  std::lock_guard lock(g_kept_mutex);
  kept().insert(fd);
}

}  // namespace uring::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new uring::test::fd_leak_listener);
  return RUN_ALL_TESTS();
}
