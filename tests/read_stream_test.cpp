// read_stream: a pipe or an eventfd read as leased chunks, on every backend, on native without the
// multishot read (one read per chunk from the buffer ring) and without the buffer ring (poll, then read):
// bursts read completely and in order, end of file, eventfd counters, stops and time-outs that take no
// bytes, non-blocking pipes and FIFOs, a two-buffer pool drained and recovered, the per-stream share, the
// stream destroyed with its read armed, bad fds, a restricted ring. Pools whose share is the whole pool
// read natively by one multishot read; the others by one read per chunk.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "leased_recv.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using uring::owned_fd;
using uring::read_stream;
using uring::task;
using uring::net::buffer_pool;
using uring::net::leased_buffer;
using uring::net::recv_result;
using namespace std::chrono_literals;

std::vector<backend_config> read_stream_backends() {
  auto configs = backends_and_native_without(uring::feature::read_multishot, "native_no_read_multishot");
  uring::executor_options no_ring;
  no_ring.backend = uring::backend_kind::native;
  no_ring.disable = uring::feature::buf_ring;
  configs.push_back({"native_no_buf_ring", no_ring});
  return configs;
}

class ReadStream : public backend_test {};

// A pipe: the read end for a read_stream, the write end for the test.
struct pipe_pair {
  owned_fd reader;
  owned_fd writer;
  pipe_pair() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "pipe2");
    reader.reset(p[0]);
    writer.reset(p[1]);
  }
};

// Everything up to end of file.
task<std::string> read_to_eof(read_stream& s) {
  std::string got;
  for (;;) {
    leased_buffer chunk = co_await s.next();
    if (chunk.empty()) break;
    got.append(chunk.view());
  }
  co_return got;
}

task<recv_result> next_of_stoppable(read_stream& s, std::stop_token t) {
  co_return co_await uring::with_stop_token(s.next().nothrow(), std::move(t));
}

task<leased_buffer> next_lease(read_stream& s) { co_return co_await s.next(); }

TEST_P(ReadStream, PipeBurstsReadCompletelyAndInOrder) {
  pipe_pair p;
  const std::string payload = pattern(static_cast<std::size_t>(scaled(1 << 20)), 3);
  std::thread writer([&] {
    // Bursts of growing sizes, some larger than the pipe's buffer.
    std::size_t at = 0;
    for (std::size_t burst = 1; at < payload.size(); burst = burst * 3 + 7) {
      const std::size_t n = std::min(burst, payload.size() - at);
      write_fully(p.writer.get(), payload.substr(at, n));
      at += n;
    }
    p.writer.reset();  // end of file
  });
  std::uint32_t available = 0;
  std::string got = run([](owned_fd fd, std::uint32_t& available) -> task<std::string> {
    buffer_pool pool({.count = 8, .size = 4096, .max_per_stream = 8});
    std::string got;
    {
      read_stream s(std::move(fd), pool);
      got = co_await read_to_eof(s);
      EXPECT_TRUE((co_await s.next()).empty()) << "end of file is for good";
    }
    for (int i = 0; i < 4; ++i) co_await uring::nop();
    available = pool.available();
    co_return got;
  }(std::move(p.reader), available));
  writer.join();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes differ";
  EXPECT_EQ(available, 8u);
}

// From an incremental pool: small writes, each read before the next, share one buffer, one chunk after
// another (natively a buffer-selecting read from an IOU_PBUF_RING_INC ring), and end of file ends it.
TEST_P(ReadStream, SmallChunksShareABufferOfAnIncrementalPool) {
  pipe_pair p;
  const int writer = p.writer.get();
  struct result {
    std::string got;
    bool contiguous = true;
    std::uint64_t filled = 0;
    std::uint32_t available = 0;
  } r;
  run([](owned_fd fd, int writer, owned_fd& writer_end, result& r) -> task<void> {
    buffer_pool pool({.count = 4, .size = 4096, .max_per_stream = 32, .incremental = true});
    {
      read_stream s(std::move(fd), pool);
      std::vector<leased_buffer> held;
      for (unsigned i = 0; i < 20; ++i) {
        write_fully(writer, pattern(50, i));
        held.push_back(co_await s.next());
        r.got.append(held.back().view());
        if (i > 0) r.contiguous = r.contiguous && held[i].data() == held[i - 1].data() + 50;
      }
      writer_end.reset();
      EXPECT_TRUE((co_await s.next()).empty());
      r.filled = pool.buffers_filled();
    }
    for (int i = 0; i < 4; ++i) co_await uring::nop();
    r.available = pool.available();
  }(std::move(p.reader), writer, p.writer, r));
  std::string want;
  for (unsigned i = 0; i < 20; ++i) want += pattern(50, i);
  EXPECT_EQ(r.got, want);
  EXPECT_TRUE(r.contiguous) << "each chunk should continue where the previous one ended";
  EXPECT_EQ(r.filled, 1u);
  EXPECT_EQ(r.available, 4u);
}

TEST_P(ReadStream, EndOfFileEndsTheStream) {
  pipe_pair p;
  write_fully(p.writer.get(), "abc");
  p.writer.reset();
  run([](owned_fd fd) -> task<void> {
    buffer_pool pool({.count = 4, .size = 16});
    read_stream s(std::move(fd), pool);
    EXPECT_EQ(co_await read_to_eof(s), "abc");
    recv_result again = co_await s.next().nothrow();
    EXPECT_EQ(again.res, 0);
    EXPECT_TRUE(again.buffer.empty());
  }(std::move(p.reader)));
}

TEST_P(ReadStream, EventfdCountersComeAsEightByteChunks) {
  owned_fd efd(::eventfd(0, EFD_CLOEXEC));
  ASSERT_GE(efd.get(), 0);
  const int writer = efd.get();
  run([](owned_fd fd, int writer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64, .max_per_stream = 4});
    read_stream s(std::move(fd), pool);
    for (std::uint64_t value : {5u, 7u, 1u << 20}) {
      EXPECT_EQ(::eventfd_write(writer, value), 0);
      leased_buffer chunk = co_await uring::with_timeout(s.next(), 30s);
      EXPECT_EQ(chunk.size(), sizeof(std::uint64_t));
      std::uint64_t got = 0;
      if (chunk.size() == sizeof got) std::memcpy(&got, chunk.data(), sizeof got);
      EXPECT_EQ(got, value);
    }
  }(std::move(efd), writer));
}

// A non-blocking pipe, and a FIFO opened non-blocking, are waited for as the blocking pipe is: no EAGAIN.
TEST_P(ReadStream, NonBlockingPipesAndFifosWaitForData) {
  temp_dir dir;
  const std::string path = dir.path + "/fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  owned_fd fifo_reader(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_GE(fifo_reader.get(), 0);
  owned_fd fifo_writer(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  ASSERT_GE(fifo_writer.get(), 0);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  owned_fd pipe_reader(fds[0]), pipe_writer(fds[1]);
  // The FIFO's stream may hold the whole pool (natively a multishot read), the pipe's one buffer.
  const std::tuple<owned_fd*, owned_fd*, std::uint32_t> ends[] = {{&fifo_reader, &fifo_writer, 4u},
                                                                  {&pipe_reader, &pipe_writer, 1u}};
  for (const auto& [reader, writer, share] : ends) {
    std::string got = run([](owned_fd fd, owned_fd* w_end, std::uint32_t stream_share) -> task<std::string> {
      buffer_pool pool({.count = 4, .size = 64, .max_per_stream = stream_share});
      read_stream s(std::move(fd), pool);
      auto write_later = [](owned_fd* w) -> task<void> {
        for (int i = 0; i < 3; ++i) co_await uring::nop();
        write_fully(w->get(), "late bytes");
        w->reset();
      };
      auto [text, written] = co_await uring::when_all(read_to_eof(s), write_later(w_end));
      co_return text;
    }(std::move(*reader), writer, share));
    EXPECT_EQ(got, "late bytes");
  }
}

// A wait cut short by a time-out, a stop, or the task's deadline takes no bytes: what is written
// afterwards comes whole to the next next().
TEST_P(ReadStream, StopAndTimeoutTakeNoBytes) {
  pipe_pair p;
  const int writer = p.writer.get();
  run([](owned_fd fd, int writer) -> task<void> {
    buffer_pool pool({.count = 4, .size = 64, .max_per_stream = 4});
    read_stream s(std::move(fd), pool);

    recv_result timed = co_await uring::with_timeout(s.next().nothrow(), 5ms);
    EXPECT_EQ(timed.res, -ETIMEDOUT);

    std::stop_source stop;
    auto stopper = [](std::stop_source* src) -> task<void> {
      co_await uring::nop();
      std::jthread([src] { src->request_stop(); }).join();
    };
    auto [stopped, done] = co_await uring::when_all(next_of_stoppable(s, stop.get_token()), stopper(&stop));
    EXPECT_EQ(stopped.res, -ECANCELED);

    try {
      (void)co_await uring::with_timeout(next_lease(s), 5ms);
      ADD_FAILURE() << "the deadline did not end the wait";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ETIMEDOUT) << e.what();
    }
    EXPECT_EQ(pool.available(), 4u) << "an interrupted wait holds no buffer";

    write_fully(writer, "hello, pipe");
    std::string got;
    while (got.size() < 11) got.append((co_await uring::with_timeout(s.next(), 30s)).view());
    EXPECT_EQ(got, "hello, pipe");
  }(std::move(p.reader), writer));
}

// Two buffers, both held by the reader while it asks for more, and a writer of many chunks: each such
// next() waits for a return, and every byte arrives, in order.
TEST_P(ReadStream, SmallPoolDrainedLosesNothing) {
  pipe_pair p;
  const std::string payload = pattern(static_cast<std::size_t>(scaled(256 << 10)), 9);
  std::thread writer([&] {
    write_fully(p.writer.get(), payload);
    p.writer.reset();
  });
  std::uint64_t exhausted = 0;
  std::string got = run([](owned_fd fd, std::uint64_t& exhausted) -> task<std::string> {
    buffer_pool pool({.count = 2, .size = 64, .max_per_stream = 2});
    read_stream s(std::move(fd), pool);
    std::string got = co_await read_holding_every_buffer(pool, [&] { return next_lease(s); });
    exhausted = pool.exhausted();
    co_return got;
  }(std::move(p.reader), exhausted));
  writer.join();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "bytes differ";
  EXPECT_GT(exhausted, 0u) << "the pool never ran dry: the test did not exercise recovery";
}

// A stream holds its share of the pool, not the whole pool, while data waits in the pipe.
TEST_P(ReadStream, HoldsItsShareOfThePool) {
  pipe_pair p;
  write_fully(p.writer.get(), pattern(8 * 64, 5));
  p.writer.reset();
  std::uint32_t available = 0;
  std::string got = run([](owned_fd fd, std::uint32_t& available) -> task<std::string> {
    buffer_pool pool({.count = 8, .size = 64, .max_per_stream = 2});
    read_stream s(std::move(fd), pool);
    std::string got((co_await s.next()).view());
    for (int i = 0; i < 8; ++i) co_await uring::nop();
    available = pool.available();
    got += co_await read_to_eof(s);
    co_return got;
  }(std::move(p.reader), available));
  EXPECT_EQ(got, pattern(8 * 64, 5));
  EXPECT_GE(available, 6u) << "the stream took more than its share";
}

// Natively a stream whose share is the whole pool keeps one multishot read armed for all its chunks
// where the plan has it, and reads a chunk per request otherwise; the emulation polls, then reads.
TEST_P(ReadStream, OneMultishotReadForAllItsChunks) {
  pipe_pair p;
  const std::string payload = pattern(16 * 64, 6);
  write_fully(p.writer.get(), payload);
  p.writer.reset();
  uring::executor ex(options());
  std::string got = ex.run([](owned_fd fd) -> task<std::string> {
    buffer_pool pool({.count = 16, .size = 64, .max_per_stream = 16});
    read_stream s(std::move(fd), pool);
    co_return co_await read_to_eof(s);
  }(std::move(p.reader)));
  EXPECT_EQ(got, payload);
  const std::uint64_t reads = ex.stats().started(uring::op_kind::read_multishot);
  if (emulated() || options().disable.contains(uring::feature::buf_ring)) {
    EXPECT_EQ(reads, 0u);
    EXPECT_GT(ex.stats().started(uring::op_kind::poll), 0u);
  } else if (ex.plan().read_multishot) {
    EXPECT_LE(reads, 2u) << "the multishot read did not stay armed";
  } else {
    EXPECT_GE(reads, 16u);
  }
}

// Destroyed with its read armed and chunks read but not taken: the request ends, the buffers go back,
// and the fd is closed (the fd leak check of every test says so).
TEST_P(ReadStream, DestroyedWithItsReadArmed) {
  pipe_pair p;
  const int writer = p.writer.get();
  std::uint32_t available = 0;
  run([](owned_fd fd, int writer, std::uint32_t& available) -> task<void> {
    buffer_pool pool({.count = 4, .size = 8, .max_per_stream = 4});
    {
      read_stream s(std::move(fd), pool);
      write_fully(writer, "first");
      EXPECT_EQ((co_await uring::with_timeout(s.next(), 30s)).view(), "first");
      write_fully(writer, "0123456789abcdef");  // more than a buffer: chunks wait in the stream
      for (int i = 0; i < 4; ++i) co_await uring::nop();
    }
    for (int i = 0; i < 4; ++i) co_await uring::nop();
    available = pool.available();
  }(std::move(p.reader), writer, available));
  EXPECT_EQ(available, 4u);
}

TEST_P(ReadStream, BadFdsFailClearly) {
  run([]() -> task<void> {
    buffer_pool pool({.count = 2, .size = 16});
    try {
      read_stream s(owned_fd(-1), pool);
      ADD_FAILURE() << "an invalid fd was taken";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EBADF) << e.what();
    }
    unique_fd file = temp_file();
    try {
      read_stream s(owned_fd(::dup(file.get())), pool);
      ADD_FAILURE() << "a regular file was taken";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EBADFD) << e.what();
      EXPECT_NE(std::string(e.what()).find("read_stream"), std::string::npos) << e.what();
    }
    co_return;
  }());
}

// Natively the stream reads by one multishot read where the probe found it and nothing disabled it.
TEST_P(ReadStream, MultishotReadWhereThePlanHasIt) {
  uring::executor ex(options());
  const auto& off = options().disable;
  EXPECT_EQ(ex.plan().read_multishot,
            !emulated() && uring::probed_kernel().read_multishot && uring::probed_kernel().buf_ring &&
                !off.contains(uring::feature::read_multishot) && !off.contains(uring::feature::buf_ring))
      << uring::to_string(ex.plan());
}

// An executor restricted to what a read_stream starts (the multishot read, or a poll and a read) reads a
// pipe to its end; natively the kernel's restriction list names the multishot read's opcode.
TEST_P(ReadStream, RestrictedToItsOperations) {
  pipe_pair p;
  write_fully(p.writer.get(), "restricted");
  p.writer.reset();
  uring::executor_options o = options();
  o.allowed_ops = {uring::op_kind::read_multishot, uring::op_kind::poll, uring::op_kind::read};
  uring::executor ex(o);
  std::string got = ex.run([](owned_fd fd) -> task<std::string> {
    buffer_pool pool({.count = 4, .size = 16, .max_per_stream = 4});  // natively a multishot read
    read_stream s(std::move(fd), pool);
    co_return co_await read_to_eof(s);
  }(std::move(p.reader)));
  EXPECT_EQ(got, "restricted");
}

INSTANTIATE_TEST_SUITE_P(Backends, ReadStream, ::testing::ValuesIn(read_stream_backends()),
                         [](const auto& test_info) { return test_info.param.name; });

}  // namespace
