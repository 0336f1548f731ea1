// when_all and when_any on every backend: results, exceptions, cancellation of the rest, stop tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::test::pipe_pair;

class When : public uring::test::backend_test {};

task<int> value_after(int v, std::chrono::milliseconds d) {
  co_await uring::sleep_for(d);
  co_return v;
}
task<void> sleep_task(std::chrono::milliseconds d) { co_await uring::sleep_for(d); }
task<std::string> read_pipe(int fd) {
  char buf[16];
  std::size_t n = co_await uring::read(fd, buf);
  co_return std::string(buf, n);
}
task<int> fail_after(std::chrono::milliseconds d) {
  co_await uring::sleep_for(d);
  throw std::runtime_error("child failed");
}

TEST_P(When, AllYieldsEveryResultInOrder) {
  auto [a, b, c] = run([]() -> task<std::tuple<int, std::monostate, int>> {
    co_return co_await uring::when_all(value_after(1, 10ms), sleep_task(1ms), value_after(3, 0ms));
  }());
  EXPECT_EQ(a, 1);
  EXPECT_EQ(c, 3);
  (void)b;
}

TEST_P(When, AllRunsChildrenConcurrently) {
  auto t0 = std::chrono::steady_clock::now();
  run([]() -> task<void> {
    co_await uring::when_all(sleep_task(30ms), sleep_task(30ms), sleep_task(30ms));
  }());
  // Sequentially this would take 90 ms; concurrently about 30.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 85ms);
}

TEST_P(When, AllOverAVector) {
  auto values = run([]() -> task<std::vector<int>> {
    std::vector<task<int>> tasks;
    for (int i = 0; i < 50; ++i) tasks.push_back(value_after(i, std::chrono::milliseconds(i % 5)));
    co_return co_await uring::when_all(std::move(tasks));
  }());
  ASSERT_EQ(values.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(values[static_cast<std::size_t>(i)], i);
  auto empty =
      run([]() -> task<std::vector<int>> { co_return co_await uring::when_all(std::vector<task<int>>{}); }());
  EXPECT_TRUE(empty.empty());
}

TEST_P(When, AllStopsTheOthersWhenOneFailsAndRethrows) {
  pipe_pair p;  // nobody writes: only cancellation ends the read
  auto t0 = std::chrono::steady_clock::now();
  try {
    run([&]() -> task<void> { co_await uring::when_all(read_pipe(p.read_end.get()), fail_after(5ms)); }());
    FAIL() << "expected the child's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child failed");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_P(When, AnyReturnsTheFirstAndCancelsTheRest) {
  pipe_pair p;
  auto r = run([&]() -> task<std::variant<std::string, int>> {
    co_return co_await uring::when_any(read_pipe(p.read_end.get()), value_after(7, 5ms));
  }());
  ASSERT_EQ(r.index(), 1u);
  EXPECT_EQ(std::get<1>(r), 7);
}

TEST_P(When, AnyWithTheSameTypesTellsWhichWon) {
  auto r = run([]() -> task<std::variant<int, int, int>> {
    co_return co_await uring::when_any(value_after(1, 50ms), value_after(2, 1ms), value_after(3, 50ms));
  }());
  EXPECT_EQ(r.index(), 1u);
  EXPECT_EQ(std::get<1>(r), 2);
}

TEST_P(When, AnyRethrowsAWinningException) {
  pipe_pair p;
  EXPECT_THROW(
      run([&]() -> task<void> { co_await uring::when_any(read_pipe(p.read_end.get()), fail_after(2ms)); }()),
      std::runtime_error);
}

TEST_P(When, AnyAsADeadlineOnAWholeTask) {
  pipe_pair p;
  auto r = run([&]() -> task<std::size_t> {
    auto work = [](int fd) -> task<std::string> {
      std::string all;
      for (int i = 0; i < 3; ++i) all += co_await read_pipe(fd);  // never gets its bytes
      co_return all;
    };
    auto v = co_await uring::when_any(work(p.read_end.get()), sleep_task(10ms));
    co_return v.index();
  }());
  EXPECT_EQ(r, 1u);
}

TEST_P(When, AnyOverAVectorTellsTheWinnerAndCancelsTheRest) {
  pipe_pair p;
  auto [index, value] = run([&]() -> task<std::pair<std::size_t, std::string>> {
    std::vector<task<std::string>> tasks;
    tasks.push_back(read_pipe(p.read_end.get()));  // never gets its bytes: only cancellation ends it
    tasks.push_back([]() -> task<std::string> {
      co_await uring::sleep_for(5ms);
      co_return "second";
    }());
    tasks.push_back(read_pipe(p.read_end.get()));
    co_return co_await uring::when_any(std::move(tasks));
  }());
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(value, "second");
}

TEST_P(When, AnyOverAVectorRethrowsAWinningException) {
  pipe_pair p;
  EXPECT_THROW(run([&]() -> task<void> {
                 std::vector<task<int>> tasks;
                 tasks.push_back(value_after(1, 10s));
                 tasks.push_back(fail_after(1ms));
                 (void)co_await uring::when_any(std::move(tasks));
               }()),
               std::runtime_error);
}

TEST_P(When, AnyOverAnEmptyVectorIsAnError) {
  EXPECT_THROW(run([]() -> task<void> { (void)co_await uring::when_any(std::vector<task<int>>{}); }()),
               std::invalid_argument);
}

TEST_P(When, TheAwaitersStopTokenReachesEveryChild) {
  pipe_pair p1, p2;
  std::stop_source source;
  auto err = std::errc{};
  try {
    run([&]() -> task<void> {
      auto group = [&]() -> task<void> {
        co_await uring::when_all(read_pipe(p1.read_end.get()), read_pipe(p2.read_end.get()));
      };
      auto t = group();
      auto h = t.release();
      h.promise().set_stop_token(source.get_token());
      uring::spawn([](std::stop_source& s) -> task<void> {
        co_await uring::sleep_for(2ms);
        s.request_stop();
      }(source));
      co_await uring::task<void>(h);
    }());
  } catch (const std::system_error& e) {
    err = static_cast<std::errc>(e.code().value());
  }
  EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST_P(When, NestedGroups) {
  auto r = run([]() -> task<int> {
    auto inner = []() -> task<int> {
      auto [a, b] = co_await uring::when_all(value_after(2, 1ms), value_after(3, 2ms));
      co_return a* b;
    };
    auto v = co_await uring::when_any(inner(), value_after(-1, 2s));
    co_return std::get<0>(v);
  }());
  EXPECT_EQ(r, 6);
}

TEST_P(When, ChildrenThatCompleteSynchronouslyDoNotSuspendTheParent) {
  auto sum = run([]() -> task<int> {
    auto now = [](int v) -> task<int> { co_return v; };
    auto [a, b, c] = co_await uring::when_all(now(1), now(2), now(3));
    auto any = co_await uring::when_any(now(4), now(5));
    co_return a + b + c + std::get<0>(any);
  }());
  EXPECT_EQ(sum, 10);
}

INSTANTIATE_BACKENDS(When);

}  // namespace
