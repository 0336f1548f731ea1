// Every io_uring_enter an executor makes carries IORING_ENTER_REGISTERED_RING (0x10): checked by running
// a helper under strace and reading the raw flags argument of each call.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include <uring/uring.hpp>

namespace {

struct enter_call {
  unsigned long flags;
  std::string line;
};

// Runs the helper under strace and returns every io_uring_enter call it made.
std::vector<enter_call> traced_enters(const std::string& helper_args) {
  // LeakSanitizer cannot run under ptrace; the leak checks run on the helper's own tests elsewhere.
  std::string cmd = "ASAN_OPTIONS=detect_leaks=0 " + std::string(URING_STRACE) +
                    " -f -X raw -e trace=io_uring_enter,prctl -o /dev/stdout " + URING_ENTER_FLAGS_HELPER +
                    " " + helper_args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::vector<enter_call> calls;
  // io_uring_enter(fd, to_submit, min_complete, flags, sig, sigsz) = ret
  static const std::regex kCall(R"(io_uring_enter\(\s*(-?\w+),\s*(\w+),\s*(\w+),\s*(0x[0-9a-fA-F]+|\d+),)");
  char line[1024];
  bool started = false;  // enters before the helper's marker are the kernel probe's, not an executor's
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    if (std::strstr(line, "enters-start") != nullptr) started = true;
    std::cmatch m;
    if (started && std::regex_search(line, m, kCall))
      calls.push_back({std::stoul(m[4].str(), nullptr, 0), line});
  }
  EXPECT_TRUE(started) << "the helper's enters-start marker is missing from the trace";
  EXPECT_EQ(::pclose(pipe), 0) << "helper or strace failed: " << cmd;
  return calls;
}

bool have_strace() { return std::string(URING_STRACE).find("NOTFOUND") == std::string::npos; }

TEST(RegisteredRing, EveryEnterCarriesTheRegisteredRingFlag) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed (apt-get install strace)";
  auto calls = traced_enters("");
  ASSERT_GT(calls.size(), 20u) << "the helper should have entered the kernel many times";
  bool saw_wait = false;
  for (const auto& c : calls) {
    EXPECT_TRUE(c.flags & 0x10) << "enter without IORING_ENTER_REGISTERED_RING: " << c.line;
    if (c.flags & 0x1) saw_wait = true;  // IORING_ENTER_GETEVENTS
  }
  EXPECT_TRUE(saw_wait);
}

// The check above can fail: with registration off, no enter has the flag.
TEST(RegisteredRing, PlainRingsDoNotCarryTheFlag) {
  if (!have_strace()) GTEST_SKIP() << "strace is not installed (apt-get install strace)";
  auto calls = traced_enters("--plain");
  ASSERT_GT(calls.size(), 20u);
  for (const auto& c : calls) EXPECT_FALSE(c.flags & 0x10) << c.line;
}

TEST(RegisteredRing, SlotsExhaustedFallsBackToThePlainFdAndCounts) {
  // A thread has 16 registered-ring slots; the 17th executor keeps working on its plain fd.
  std::vector<std::unique_ptr<uring::executor>> executors;
  int registered = 0, fallbacks = 0;
  uring::executor::options native;
  native.backend = uring::backend_kind::native;
  for (int i = 0; i < 17; ++i) {
    executors.push_back(std::make_unique<uring::executor>(native));
    registered += executors.back()->registered_ring() ? 1 : 0;
    fallbacks += static_cast<int>(executors.back()->stats().registered_ring_fallbacks);
  }
  EXPECT_EQ(registered, 16);
  EXPECT_EQ(fallbacks, 1);
  // The 17th says why in its plan, as uring-probe and executor::plan() show it.
  const uring::executor_plan& plan = executors.back()->plan();
  EXPECT_FALSE(plan.register_ring_fd);
  bool said_why = false;
  for (const auto& note : plan.notes) {
    said_why =
        said_why ||
        (note.find("registered ring fd: ") == 0 && note.find("EBUSY") != std::string::npos &&
         note.find("16 slots") != std::string::npos && note.find("plain ring fd") != std::string::npos);
  }
  EXPECT_TRUE(said_why) << uring::to_string(plan);
  EXPECT_TRUE(executors.front()->plan().register_ring_fd);
  auto t = []() -> uring::task<int> {
    co_await uring::nop();
    co_return 1;
  };
  EXPECT_EQ(executors.back()->run(t()), 1);
  executors.clear();
  uring::executor again(native);  // slots are returned when executors go away
  EXPECT_TRUE(again.registered_ring());
}

}  // namespace
