// nop, read and write on pipes and files: results, offsets, EOF, errors and the nothrow form.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using uring::task;
using uring::test::pipe_pair;
using uring::test::temp_file;

class Io : public uring::test::backend_test {
 protected:
  template <class F>
  auto run_body(F&& body) {
    return run(body());
  }
};

TEST_P(Io, NopCompletes) {
  run_body([]() -> task<void> { co_await uring::nop(); });
  auto r = run_body([]() -> task<uring::io_result> { co_return co_await uring::nop().nothrow(); });
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.res, 0);
}

TEST_P(Io, PipeRoundTrip) {
  pipe_pair p;
  std::string got = run_body([&]() -> task<std::string> {
    std::size_t w = co_await uring::write(p.write_end.get(), std::string_view("hello pipe"));
    EXPECT_EQ(w, 10u);
    std::array<char, 64> buf{};
    std::size_t n = co_await uring::read(p.read_end.get(), buf);
    co_return std::string(buf.data(), n);
  });
  EXPECT_EQ(got, "hello pipe");
}

TEST_P(Io, ReadWaitsForAWriterInAnotherCoroutine) {
  pipe_pair p;
  std::string got = run_body([&]() -> task<std::string> {
    auto writer = [&]() -> task<void> {
      for (int i = 0; i < 3; ++i) co_await uring::nop();  // let the reader park first
      co_await uring::write(p.write_end.get(), std::string_view("late"));
    };
    uring::spawn(writer());
    std::vector<std::byte> buf(16);
    std::size_t n = co_await uring::read(p.read_end.get(), buf);
    co_return std::string(reinterpret_cast<const char*>(buf.data()), n);
  });
  EXPECT_EQ(got, "late");
}

TEST_P(Io, ReadReturnsZeroAtEndOfFile) {
  pipe_pair p;
  p.write_end.reset();
  std::size_t n = run_body([&]() -> task<std::size_t> {
    char buf[8];
    co_return co_await uring::read(p.read_end.get(), buf);
  });
  EXPECT_EQ(n, 0u);
}

TEST_P(Io, FileReadsAndWritesAtOffsets) {
  auto f = temp_file();
  std::string got = run_body([&]() -> task<std::string> {
    co_await uring::write_at(f.get(), std::string_view("0123456789"), 0);
    co_await uring::write_at(f.get(), std::string_view("abc"), 4);   // overwrite in the middle
    co_await uring::write_at(f.get(), std::string_view("XYZ"), 20);  // past the end: leaves a hole
    std::array<char, 32> buf{};
    std::size_t n = co_await uring::read_at(f.get(), buf, 0);
    EXPECT_EQ(n, 23u);
    EXPECT_EQ(buf[10], '\0');  // the hole reads as zeros
    std::size_t tail = co_await uring::read_at(f.get(), std::span(buf.data(), 3), 20);
    EXPECT_EQ(std::string(buf.data(), tail), "XYZ");
    std::size_t past = co_await uring::read_at(f.get(), buf, 100);
    EXPECT_EQ(past, 0u);
    co_await uring::read_at(f.get(), buf, 0);
    co_return std::string(buf.data(), 10);
  });
  EXPECT_EQ(got, "0123abc789");
}

TEST_P(Io, CurrentPositionAdvancesTheFileOffset) {
  auto f = temp_file();
  ASSERT_EQ(::write(f.get(), "abcdef", 6), 6);
  ASSERT_EQ(::lseek(f.get(), 0, SEEK_SET), 0);
  std::string got = run_body([&]() -> task<std::string> {
    char a[2], b[2];
    co_await uring::read(f.get(), a);  // at the current position, which it advances
    co_await uring::read(f.get(), b);
    co_return std::string(a, 2) + "|" + std::string(b, 2);
  });
  EXPECT_EQ(got, "ab|cd");
  EXPECT_EQ(::lseek(f.get(), 0, SEEK_CUR), 4);
}

// read and write take no offset (a third argument does not compile); read_at and write_at take one.
template <class... A>
concept reads = requires(A... a) {
  uring::read(a...);
};
template <class... A>
concept writes = requires(A... a) {
  uring::write(a...);
};
static_assert(reads<int, uring::mutable_buffer> && !reads<int, uring::mutable_buffer, int>);
static_assert(writes<int, uring::const_buffer> && !writes<int, uring::const_buffer, int>);

TEST_P(Io, AStringLiteralWritesItsCharactersWithoutTheNul) {
  static_assert(uring::const_buffer("hi").size() == 2);
  static constexpr const char kRaw[3] = {'a', 'b', 'c'};  // no NUL at its end: every byte counts
  static_assert(uring::const_buffer(kRaw).size() == 3);
  pipe_pair p;
  auto got = run([&]() -> task<std::string> {
    std::size_t n = co_await uring::write(p.write_end.get(), "hi");
    p.write_end.reset();
    char buf[8];
    std::size_t r = co_await uring::read(p.read_end.get(), buf);
    co_return std::to_string(n) + ":" + std::string(buf, r);
  }());
  EXPECT_EQ(got, "2:hi");
}

TEST_P(Io, ErrorsThrowSystemErrorNamingTheOperation) {
  auto attempt = [this](auto make_op) {
    try {
      run_body([&]() -> task<void> { co_await make_op(); });
    } catch (const std::system_error& e) {
      return std::pair<std::error_code, std::string>(e.code(), e.what());
    }
    return std::pair<std::error_code, std::string>();
  };
  char buf[4];
  auto [code, what] = attempt([&] { return uring::read(-1, buf); });
  EXPECT_EQ(code, std::errc::bad_file_descriptor);
  EXPECT_EQ(what.rfind("read: ", 0), 0u) << what;

  auto [wcode, wwhat] = attempt([&] { return uring::write(12345, std::string_view("x")); });
  EXPECT_EQ(wcode, std::errc::bad_file_descriptor);
  EXPECT_EQ(wwhat.rfind("write: ", 0), 0u) << wwhat;

  // Reading from the write end of a pipe.
  pipe_pair p;
  auto [rcode, rwhat] = attempt([&] { return uring::read(p.write_end.get(), buf); });
  EXPECT_EQ(rcode, std::errc::bad_file_descriptor);
}

TEST_P(Io, NothrowFormYieldsTheErrno) {
  char buf[4];
  auto r = run_body([&]() -> task<uring::io_result> { co_return co_await uring::read(-1, buf).nothrow(); });
  EXPECT_FALSE(r);
  EXPECT_EQ(r.res, -EBADF);
  EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
}

TEST_P(Io, WriteToAPipeWithNoReaderFailsWithEpipe) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old), 0);
  pipe_pair p;
  p.read_end.reset();
  auto r = run_body([&]() -> task<uring::io_result> {
    co_return co_await uring::write(p.write_end.get(), std::string_view("lost")).nothrow();
  });
  ::sigaction(SIGPIPE, &old, nullptr);
  EXPECT_EQ(r.res, -EPIPE);
}

TEST_P(Io, LargeTransfersThroughAPipeArriveIntact) {
  pipe_pair p;
  std::string payload(1 << 20, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  std::string received = run_body([&]() -> task<std::string> {
    auto writer = [&]() -> task<void> {
      std::size_t off = 0;
      while (off < payload.size()) {  // short writes are legal: loop
        off += co_await uring::write(p.write_end.get(), std::string_view(payload).substr(off));
      }
      p.write_end.reset();
    };
    uring::spawn(writer());
    std::string out;
    std::array<char, 4096> buf;
    for (;;) {
      std::size_t n = co_await uring::read(p.read_end.get(), buf);
      if (n == 0) break;
      out.append(buf.data(), n);
    }
    co_return out;
  });
  EXPECT_EQ(received.size(), payload.size());
  EXPECT_TRUE(received == payload);
}

// A stream ignores the offset (io_uring does; the emulation must too, though preadv2 would say ESPIPE).
TEST_P(Io, StreamsIgnoreTheOffset) {
  pipe_pair p;
  std::string got = run_body([&]() -> task<std::string> {
    co_await uring::write_at(p.write_end.get(), std::string_view("abc"), 0);
    char buf[8];
    std::size_t n = co_await uring::read_at(p.read_end.get(), buf, 0);
    co_return std::string(buf, n);
  });
  EXPECT_EQ(got, "abc");
}

// Two readers parked on one pipe each get one write. The kernel does not promise an order among them (6.18
// serves the newest first); the emulation serves them in the order they started (docs/emulation.md).
TEST_P(Io, WaitersOnOneFdEachGetOneWrite) {
  pipe_pair p;
  std::string order = run_body([&]() -> task<std::string> {
    std::string seen;
    int finished = 0;
    auto reader = [&](char tag) -> task<void> {
      char c;
      co_await uring::read(p.read_end.get(), std::span(&c, 1));
      seen += tag;
      seen += c;
      ++finished;
    };
    uring::spawn(reader('a'));
    uring::spawn(reader('b'));
    for (int i = 0; i < 3; ++i) co_await uring::nop();  // both are parked now
    co_await uring::write(p.write_end.get(), std::string_view("1"));
    while (finished < 1) co_await uring::nop();
    co_await uring::write(p.write_end.get(), std::string_view("2"));
    while (finished < 2) co_await uring::nop();
    co_return seen;
  });
  ASSERT_EQ(order.size(), 4u);
  EXPECT_TRUE(order == "a1b2" || order == "b1a2") << order;
  if (emulated()) {
    EXPECT_EQ(order, "a1b2");
  }
}

// Readers parked on one pipe leave from the head, the middle and the tail (cancelled), and one parks after
// them: the rest are each served one write, in the order they started on the emulated backend, whose
// waiters form a list linked through the operations.
TEST_P(Io, WaitersLeaveFromAnyPlaceAndTheRestKeepTheirOrder) {
  pipe_pair p;
  std::string order = run_body([&]() -> task<std::string> {
    std::string seen;
    int finished = 0;
    int cancelled = 0;
    std::vector<std::stop_source> stops(6);
    auto reader = [&](char tag, std::stop_token tok) -> task<void> {
      char c;
      auto r =
          co_await uring::with_stop_token(uring::read(p.read_end.get(), std::span(&c, 1)), tok).nothrow();
      if (r.res == -ECANCELED) {
        ++cancelled;
      } else {
        EXPECT_EQ(r.res, 1);
        seen += tag;
        seen += c;
      }
      ++finished;
    };
    for (int i = 0; i < 5; ++i) uring::spawn(reader(static_cast<char>('a' + i), stops[i].get_token()));
    for (int i = 0; i < 3; ++i) co_await uring::nop();  // all five are parked now
    for (int i : {0, 2, 4}) stops[i].request_stop();
    while (cancelled < 3) co_await uring::nop();
    uring::spawn(reader('f', stops[5].get_token()));
    for (int i = 0; i < 3; ++i) co_await uring::nop();
    for (char c : {'1', '2', '3'}) {
      const int before = finished;
      co_await uring::write(p.write_end.get(), std::string_view(&c, 1));
      while (finished == before) co_await uring::nop();
    }
    co_return seen;
  });
  ASSERT_EQ(order.size(), 6u) << order;
  std::string tags{order[0], order[2], order[4]};
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, "bdf") << order;
  if (emulated()) {
    EXPECT_EQ(order, "b1d2f3");
  }
}

// Plain operations go straight into the ring's SQ (op_queue::start_inline), stoppable ones through the
// turn's list: however they mix, the kernel must see them in the order they were awaited, and each must
// be counted as started.
TEST_P(Io, PlainAndStoppableOperationsReachTheKernelInAwaitOrder) {
  for (const char* pattern : {"PSPS", "SPSP", "PPSS", "SSPP"}) {
    pipe_pair p;
    std::stop_source never;
    uring::executor ex(options());
    ex.run([&]() -> task<void> {
      int done = 0;
      auto writer = [](int fd, char c, bool stoppable, std::stop_token tok, int& count) -> task<void> {
        const char buf[1] = {c};
        if (stoppable) {
          co_await uring::with_stop_token(uring::write(fd, std::string_view(buf, 1)), tok);
        } else {
          co_await uring::write(fd, std::string_view(buf, 1));
        }
        ++count;
      };
      for (int i = 0; i < 4; ++i) {
        uring::spawn(writer(p.write_end.get(), static_cast<char>('a' + i), pattern[i] == 'S',
                            never.get_token(), done));
      }
      while (done < 4) co_await uring::nop();
    }());
    char got[8] = {};
    ASSERT_EQ(::read(p.read_end.get(), got, sizeof got), 4);
    EXPECT_EQ(std::string(got, 4), "abcd") << pattern;
    EXPECT_EQ(ex.stats().started(uring::op_kind::write), 4u) << pattern;
  }
}

INSTANTIATE_BACKENDS(Io);

}  // namespace
