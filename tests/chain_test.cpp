// Chains (uring/chain.hpp): steps in order, each after the one before it; a failed or short step ends a
// chain and not a hard chain; the whole chain under one time-out or stop; an allowlist refusal runs no
// step; a chain is never split across two submits. Every backend.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::chain;
using uring::hard_chain;
using uring::io_result;
using uring::task;
using uring::test::pipe_pair;
using uring::test::unique_fd;

// The file's whole contents, read with pread(2).
std::string contents(int fd) {
  std::array<char, 256> buf{};
  const ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
  return n < 0 ? "<pread failed>" : std::string(buf.data(), static_cast<std::size_t>(n));
}

template <std::size_t N>
std::array<std::int32_t, N> codes(const std::array<io_result, N>& r) {
  std::array<std::int32_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = r[i].res;
  return out;
}

// What awaiting `c` throws: the system_error's code and what(), or {0, ""} when it succeeds.
template <class Awaitable>
task<std::pair<int, std::string>> failure_of(Awaitable c) {
  try {
    co_await std::move(c);
  } catch (const std::system_error& e) {
    co_return std::pair<int, std::string>{e.code().value(), e.what()};
  }
  co_return std::pair<int, std::string>{0, ""};
}

class Chain : public uring::test::backend_test {
 protected:
  unique_fd file_ = uring::test::temp_file();
};

TEST_P(Chain, RunsEveryStepInOrderAndGivesEachResult) {
  run([](int fd) -> task<void> {
    // Both writes are at offset 0: the second lands over the first only if it runs after it.
    auto r = co_await chain(uring::write_at(fd, "aaaa", 0), uring::write_at(fd, "bb", 0), uring::fsync(fd));
    EXPECT_EQ(r, (std::array<std::int32_t, 3>{4, 2, 0}));
    EXPECT_EQ(contents(fd), "bbaa");
  }(file_.get()));
}

// Steps that own data (paths) keep it for as long as the chain runs, after the strings they came from
// are gone; the second step's path exists only once the first has run.
TEST_P(Chain, StepsThatOwnTheirPathsRunInOrder) {
  uring::test::temp_dir dir("uring_chain_test");
  run([](std::string base) -> task<void> {
    auto r = co_await chain(uring::mkdir(base + "/d"), uring::symlink("target", base + "/d/link"),
                            uring::rename(base + "/d/link", base + "/d/moved"));
    EXPECT_EQ(r, (std::array<std::int32_t, 3>{0, 0, 0}));
    std::array<char, 16> buf{};
    const ssize_t n = ::readlink((base + "/d/moved").c_str(), buf.data(), buf.size());
    EXPECT_EQ(std::string(buf.data(), n < 0 ? 0 : static_cast<std::size_t>(n)), "target");

    // mkdir fails (it exists): nothing after it runs.
    auto again = co_await chain(uring::mkdir(base + "/d"), uring::unlink(base + "/d/moved")).nothrow();
    EXPECT_EQ(codes(again), (std::array<std::int32_t, 2>{-EEXIST, -ECANCELED}));
    EXPECT_EQ(::readlink((base + "/d/moved").c_str(), buf.data(), buf.size()), 6);
  }(dir.path));
}

TEST_P(Chain, AStepStartsOnlyOnceTheOneBeforeItHasCompleted) {
  pipe_pair p;
  run([](int rd, int wr, int fd) -> task<void> {
    std::array<char, 4> got{};
    auto reader = [](int rd, int fd, std::array<char, 4>& got) -> task<std::array<std::int32_t, 2>> {
      co_return co_await chain(uring::read(rd, uring::mutable_buffer(got.data(), got.size())),
                               uring::write_at(fd, "done", 0));
    };
    auto writer = [](int wr, int fd) -> task<void> {
      for (int i = 0; i < 5; ++i) co_await uring::nop();  // the chain is in flight meanwhile
      EXPECT_EQ(contents(fd), "") << "the write ran before the read it follows";
      co_await uring::write(wr, "ping");
    };
    auto [r, ignored] = co_await uring::when_all(reader(rd, fd, got), writer(wr, fd));
    EXPECT_EQ(r, (std::array<std::int32_t, 2>{4, 4}));
    EXPECT_EQ(std::string(got.data(), got.size()), "ping");
    EXPECT_EQ(contents(fd), "done");
  }(p.read_end.get(), p.write_end.get(), file_.get()));
}

TEST_P(Chain, AFailedStepCancelsTheStepsAfterIt) {
  run([](int fd) -> task<void> {
    auto r = co_await chain(uring::write_at(-1, "x", 0), uring::fsync(fd), uring::write_at(fd, "never", 0))
                 .nothrow();
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 3>{-EBADF, -ECANCELED, -ECANCELED}));
    EXPECT_EQ(contents(fd), "");

    auto [code, what] =
        co_await failure_of(chain(uring::fsync(fd), uring::write_at(-1, "x", 0), uring::nop()));
    EXPECT_EQ(code, EBADF);
    EXPECT_EQ(what, "chain step 2 of 3 (write): Bad file descriptor");
  }(file_.get()));
}

// The kernel runs the step after a failed fsync (or mkdirat, statx, ...) even when they are linked: the
// chain judges those steps itself, so the documented rule holds for every step.
TEST_P(Chain, AFailedStepTheKernelWouldNotJudgeStillEndsTheChain) {
  pipe_pair p;
  run([](int rd, int fd) -> task<void> {
    auto r = co_await chain(uring::fsync(rd), uring::write_at(fd, "never", 0)).nothrow();
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{-EINVAL, -ECANCELED}));
    EXPECT_EQ(contents(fd), "");
    // Such a step in the middle of a chain that succeeds changes nothing.
    auto ok = co_await chain(uring::write_at(fd, "ab", 0), uring::fsync(fd), uring::write_at(fd, "c", 2));
    EXPECT_EQ(ok, (std::array<std::int32_t, 3>{2, 0, 1}));
    EXPECT_EQ(contents(fd), "abc");
  }(p.read_end.get(), file_.get()));
}

TEST_P(Chain, AShortReadCancelsTheStepAfterIt) {
  ASSERT_EQ(::pwrite(file_.get(), "abc", 3, 0), 3);
  unique_fd other = uring::test::temp_file();
  run([](int fd, int out) -> task<void> {
    std::array<char, 10> buf{};
    auto r = co_await chain(uring::read_at(fd, uring::mutable_buffer(buf.data(), buf.size()), 0),
                            uring::write_at(out, "copied", 0))
                 .nothrow();
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{3, -ECANCELED}));
    EXPECT_EQ(contents(out), "");

    auto [code, what] = co_await failure_of(chain(
        uring::read_at(fd, uring::mutable_buffer(buf.data(), buf.size()), 0), uring::write_at(out, "x", 0)));
    EXPECT_EQ(code, ECANCELED);
    EXPECT_EQ(what,
              "chain step 2 of 2 (write) not run: step 1 (read) moved 3 of 10 bytes: Operation canceled");
  }(file_.get(), other.get()));
}

TEST_P(Chain, AHardChainRunsEveryStepWhateverTheOnesBeforeItDid) {
  run([](int fd) -> task<void> {
    auto r = co_await hard_chain(uring::write_at(-1, "x", 0), uring::write_at(fd, "ran", 0)).nothrow();
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{-EBADF, 3}));
    EXPECT_EQ(contents(fd), "ran");
  }(file_.get()));
}

TEST_P(Chain, ATimeOutCancelsTheStepsStillToRun) {
  pipe_pair p;  // nothing is ever written: the read waits until it is cancelled
  run([](int rd, int fd) -> task<void> {
    char c = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = co_await uring::with_timeout(
                 chain(uring::read(rd, uring::mutable_buffer(&c, 1)), uring::write_at(fd, "never", 0)), 50ms)
                 .nothrow();
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{-ETIMEDOUT, -ETIMEDOUT}));
    EXPECT_EQ(contents(fd), "");

    auto [code, what] = co_await failure_of(
        uring::with_timeout(chain(uring::read(rd, uring::mutable_buffer(&c, 1)), uring::nop()), 10ms));
    EXPECT_EQ(code, ETIMEDOUT);
    EXPECT_EQ(what, "chain step 1 of 2 (read): Connection timed out");
  }(p.read_end.get(), file_.get()));
}

TEST_P(Chain, ATimeOutNotReachedChangesNothing) {
  run([](int fd) -> task<void> {
    for (int i = 0; i < 20; ++i) {
      auto r = co_await uring::with_timeout(chain(uring::write_at(fd, "ok", 0), uring::fsync(fd)), 10s);
      EXPECT_EQ(r, (std::array<std::int32_t, 2>{2, 0}));
    }
    // The timers were cancelled, not left to run out: a sleep after them is not disturbed either.
    co_await uring::sleep_for(1ms);
  }(file_.get()));
}

TEST_P(Chain, AStopCancelsTheStepsStillToRunFromThisThreadOrAnother) {
  pipe_pair p;
  run([](int rd, int fd) -> task<void> {
    for (bool other_thread : {false, true}) {
      std::stop_source src;
      std::thread stopper;
      char c = 0;
      auto waiter = [](int rd, int fd, char& c, std::stop_token t) -> task<std::array<io_result, 2>> {
        co_return co_await uring::with_stop_token(
            chain(uring::read(rd, uring::mutable_buffer(&c, 1)), uring::write_at(fd, "never", 0)).nothrow(),
            std::move(t));
      };
      auto stop = [](std::stop_source& src, std::thread& stopper, bool other_thread) -> task<void> {
        co_await uring::nop();  // the chain is in flight
        if (other_thread) {
          stopper = std::thread([&src] { src.request_stop(); });
        } else {
          src.request_stop();
        }
      };
      auto [r, ignored] =
          co_await uring::when_all(waiter(rd, fd, c, src.get_token()), stop(src, stopper, other_thread));
      if (stopper.joinable()) stopper.join();
      EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{-ECANCELED, -ECANCELED})) << other_thread;
    }
    EXPECT_EQ(contents(fd), "");

    std::stop_source already;
    already.request_stop();
    auto r = co_await uring::with_stop_token(chain(uring::write_at(fd, "x", 0), uring::nop()).nothrow(),
                                             already.get_token());
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 2>{-ECANCELED, -ECANCELED}));
    EXPECT_EQ(contents(fd), "");
  }(p.read_end.get(), file_.get()));
}

TEST_P(Chain, AStepTheAllowlistRefusesRunsNoStepAtAll) {
  uring::executor_options o = options();
  o.allowed_ops = {uring::op_kind::write, uring::op_kind::nop};
  uring::executor ex(o);
  const int fd = file_.get();
  ex.run([](int fd) -> task<void> {
    auto r = co_await chain(uring::write_at(fd, "x", 0), uring::fsync(fd), uring::nop()).nothrow();
    EXPECT_EQ(codes(r), (std::array<std::int32_t, 3>{-ECANCELED, -EACCES, -ECANCELED}));
  }(fd));
  EXPECT_EQ(contents(fd), "");
}

// A chain needs all its SQEs in one submit, or the kernel would run its tail unlinked. With a 4-entry SQ
// and two operations before it, a three-step chain does not fit after them.
TEST_P(Chain, ANearlyFullSubmissionQueueDoesNotSplitAChain) {
  ASSERT_EQ(::pwrite(file_.get(), "abc", 3, 0), 3);
  unique_fd out = uring::test::temp_file();
  uring::executor_options o = options();
  o.sq_entries = 4;
  uring::executor ex(o);
  ex.run([](int fd, int out) -> task<void> {
    std::array<char, 10> buf{};
    auto nops = []() -> task<std::array<std::int32_t, 1>> {
      co_await uring::nop();
      co_await uring::nop();
      co_return std::array<std::int32_t, 1>{0};
    };
    auto short_read_first = [](int fd, int out,
                               std::array<char, 10>& buf) -> task<std::array<std::int32_t, 1>> {
      auto r = co_await chain(uring::read_at(fd, uring::mutable_buffer(buf.data(), buf.size()), 0),
                              uring::write_at(out, "x", 0), uring::write_at(out, "y", 1))
                   .nothrow();
      co_return std::array<std::int32_t, 1>{r[2].res};
    };
    for (int i = 0; i < 50; ++i) {
      auto [a, b, c] = co_await uring::when_all(nops(), nops(), short_read_first(fd, out, buf));
      EXPECT_EQ(c[0], -ECANCELED) << "round " << i;
    }
  }(file_.get(), out.get()));
  EXPECT_EQ(contents(out.get()), "");
}

INSTANTIATE_BACKENDS(Chain);

}  // namespace
