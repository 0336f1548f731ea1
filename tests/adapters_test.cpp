// The adapters (with_timeout, with_stop_token, .nothrow()) on every backend: on single operations, on
// sleeps, on streams, on whole tasks and on composite operations, with the errors each gives.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::test::error_of;
using uring::test::pipe_pair;

class Adapters : public uring::test::backend_test {};

// Reads the pipe (nobody writes it) and records how the read ended before passing the error on.
task<std::size_t> read_and_record(int fd, int& seen) {
  char buf[8];
  auto r = co_await uring::read(fd, buf).nothrow();
  seen = r.ok() ? 0 : -r.res;
  if (!r) uring::throw_errno(-r.res, "read");
  co_return static_cast<std::size_t>(r.res);
}

TEST_P(Adapters, ASleepThatEndsWithinItsTimeoutSucceeds) {
  auto r = run([]() -> task<uring::io_result> {
    co_await uring::with_timeout(uring::sleep_for(1ms), 10s);  // the throwing form does not throw
    co_return co_await uring::with_timeout(uring::sleep_for(5ms).nothrow(), 10s);
  }());
  EXPECT_EQ(r.res, 0);
}

TEST_P(Adapters, ASleepThatOutlivesItsTimeoutIsEtimedout) {
  auto r = run([]() -> task<uring::io_result> {
    co_return co_await uring::with_timeout(uring::sleep_for(10s), 5ms).nothrow();
  }());
  EXPECT_EQ(r.res, -ETIMEDOUT);
  EXPECT_EQ(error_of([&] {
              run([]() -> task<void> { co_await uring::with_timeout(uring::sleep_for(10s), 5ms); }());
            }).value(),
            ETIMEDOUT);
}

TEST_P(Adapters, ATaskThatOutlivesItsTimeoutHasItsOperationsTimedOut) {
  pipe_pair p;
  int seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run(uring::with_timeout(read_and_record(p.read_end.get(), seen), 20ms));
    FAIL() << "expected ETIMEDOUT";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ETIMEDOUT);
    EXPECT_EQ(std::string(e.what()), "read: Connection timed out");
  }
  EXPECT_EQ(seen, ETIMEDOUT);  // the task's own read was cut short, not left behind
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_P(Adapters, ATaskThatEndsFirstGivesItsValueAndCancelsTheTimer) {
  const auto t0 = std::chrono::steady_clock::now();
  int v = run(uring::with_timeout(
      []() -> task<int> {
        co_await uring::sleep_for(1ms);
        co_return 42;
      }(),
      30s));
  EXPECT_EQ(v, 42);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // the timer did not hold the executor
}

TEST_P(Adapters, ATaskExceptionPassesThroughItsTimeout) {
  EXPECT_THROW(run(uring::with_timeout(
                   []() -> task<void> {
                     co_await uring::nop();
                     throw std::runtime_error("mine");
                   }(),
                   30s)),
               std::runtime_error);
}

TEST_P(Adapters, TheAwaitersStopReachesATimedTaskAsEcanceled) {
  pipe_pair p;
  int seen = 0;
  std::stop_source source;
  int err = error_of([&] {
              run([&]() -> task<void> {
                uring::spawn([](std::stop_source& s) -> task<void> {
                  co_await uring::sleep_for(2ms);
                  s.request_stop();
                }(source));
                co_await uring::with_stop_token(
                    uring::with_timeout(read_and_record(p.read_end.get(), seen), 30s), source.get_token());
              }());
            }).value();
  EXPECT_EQ(err, ECANCELED);
  EXPECT_EQ(seen, ECANCELED);
}

TEST_P(Adapters, AStopTokenGivenToATaskReplacesTheAwaiters) {
  pipe_pair p;
  int seen = 0;
  std::stop_source mine;
  int err =
      error_of([&] {
        run([&]() -> task<void> {
          uring::spawn([](std::stop_source& s) -> task<void> {
            co_await uring::sleep_for(2ms);
            s.request_stop();
          }(mine));
          (void)co_await uring::with_stop_token(read_and_record(p.read_end.get(), seen), mine.get_token());
        }());
      }).value();
  EXPECT_EQ(err, ECANCELED);
  EXPECT_EQ(seen, ECANCELED);
}

TEST_P(Adapters, ACompositeOperationTakesATimeout) {
  int err = error_of([&] {
              run([]() -> task<void> {
                uring::net::tcp_listener l =
                    uring::net::tcp_listener::bind(uring::net::address::ip("127.0.0.1", 0));
                auto client = co_await uring::net::tcp_stream::connect_to(l.local_address());
                auto server = co_await l.accept();
                char buf[4];
                // Two bytes of the four come: read_exactly waits for the rest until its time is up.
                co_await client.write_all(std::string_view("ab"));
                co_await uring::with_timeout(server.read_exactly(uring::mutable_buffer(buf, 4)), 20ms);
              }());
            }).value();
  EXPECT_EQ(err, ETIMEDOUT);
}

TEST_P(Adapters, ANothrowTaskYieldsItsValueOrWhatItThrew) {
  auto [value, refused, kept] = run([]() -> task<std::tuple<int, std::error_code, bool>> {
    auto v = co_await []() -> task<int> {
      co_await uring::nop();
      co_return 42;
    }()
                                  .nothrow();
    auto bad = co_await []() -> task<void> {
      char b[1];
      co_await uring::read(-1, b);
    }()
                                    .nothrow();
    auto odd = co_await []() -> task<void> {
      co_await uring::nop();
      throw std::runtime_error("mine");
    }()
                                    .nothrow();
    bool other = !odd && !odd.error() && odd.exception() != nullptr;
    try {
      odd.value();
      other = false;
    } catch (const std::runtime_error&) {
    }
    co_return std::tuple{v.ok() ? v.value() : -1, bad.error(), other};
  }());
  EXPECT_EQ(value, 42);
  EXPECT_EQ(refused, std::error_code(EBADF, std::system_category()));
  EXPECT_TRUE(kept);  // not a system_error: no code, the exception kept and rethrown by value()
}

TEST_P(Adapters, ANothrowTaskKeepsItsTimeoutAndTheAwaitersStop) {
  pipe_pair p;
  std::stop_source stop;
  auto [timed_out, cancelled] = run([](int fd, std::stop_source& stop) -> task<std::pair<int, int>> {
    auto read_one = [](int fd) -> task<void> {
      char b[1];
      co_await uring::read(fd, b);
    };
    auto timed = co_await uring::with_timeout(read_one(fd), 20ms).nothrow();
    uring::spawn([](std::stop_source& s) -> task<void> {
      co_await uring::sleep_for(2ms);
      s.request_stop();
    }(stop));
    auto stopped = co_await uring::with_stop_token(
        [](int fd, decltype(read_one) r) -> task<uring::result<void>> { co_return co_await r(fd).nothrow(); }(
                                             fd, read_one),
        stop.get_token());
    co_return std::pair{timed.error().value(), stopped.error().value()};
  }(p.read_end.get(), stop));
  EXPECT_EQ(timed_out, ETIMEDOUT);
  EXPECT_EQ(cancelled, ECANCELED);  // the stop reached the task awaited in its nothrow form
}

TEST_P(Adapters, AStreamsNextInItsNothrowFormYieldsTheTimeoutAndThenTheConnection) {
  auto listener = uring::net::tcp_listener::bind(uring::net::address::ip("127.0.0.1", 0));
  auto r = run([](const uring::net::tcp_listener& l) -> task<std::pair<std::error_code, bool>> {
    auto stream = l.accept_all();
    auto late = co_await uring::with_timeout(stream.next(), 20ms).nothrow();
    auto [client, got] = co_await uring::when_all(uring::net::tcp_stream::connect_to(l.local_address()),
                                                  [](uring::net::accept_stream& s) -> task<bool> {
                                                    auto r = co_await s.next().nothrow();
                                                    co_return r.ok() && r.value().fd() >= 0;
                                                  }(stream));
    co_return std::pair{late.error(), got};
  }(listener));
  EXPECT_EQ(r.first, std::error_code(ETIMEDOUT, std::system_category()));
  EXPECT_TRUE(r.second);
}

INSTANTIATE_BACKENDS(Adapters);

}  // namespace
