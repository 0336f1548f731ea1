// open/open_at, close, fsync/fdatasync, statx/stat/fstat on every backend: results, path lifetimes, errors,
// the nothrow form, timeouts and stop tokens, and no fd leaked by many concurrent opens.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::test::unique_fd;

using uring::test::open_fd_count;

// The errno and what() of the std::system_error that `fn` throws, or {0, ""} if it throws none.
std::pair<int, std::string> failure_of(auto&& fn) {
  try {
    fn();
  } catch (const std::system_error& e) {
    return {e.code().value(), e.what()};
  }
  return {0, ""};
}

unsigned current_umask() {
  mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

class File : public uring::test::backend_test {
 protected:
  [[nodiscard]] std::string path(const std::string& name) const { return dir_.path + "/" + name; }

  uring::test::temp_dir dir_{"uring_file_test"};
};

TEST_P(File, OpenWriteReadSyncStatAndClose) {
  const std::string p = path("data");
  run([&]() -> task<void> {
    int fd = co_await uring::open(p, O_CREAT | O_RDWR | O_CLOEXEC, 0640);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC);  // a real fd of this process, with the flags asked for
    EXPECT_EQ(co_await uring::write_at(fd, std::string_view("hello"), 0), 5u);
    EXPECT_EQ(co_await uring::write_at(fd, std::string_view("world"), 10), 5u);
    co_await uring::fsync(fd);
    co_await uring::fdatasync(fd);

    std::array<char, 32> buf{};
    std::size_t n = co_await uring::read_at(fd, buf, 0);
    EXPECT_EQ(n, 15u);
    EXPECT_EQ(std::string(buf.data(), 5), "hello");
    EXPECT_EQ(std::string(buf.data() + 10, 5), "world");
    n = co_await uring::read_at(fd, std::span(buf.data(), 3), 11);
    EXPECT_EQ(std::string(buf.data(), n), "orl");

    struct statx by_fd = co_await uring::fstat(fd);
    EXPECT_EQ(by_fd.stx_size, 15u);
    EXPECT_TRUE(S_ISREG(by_fd.stx_mode));
    EXPECT_EQ(by_fd.stx_mode & 0777u, 0640u & ~current_umask());
    struct statx by_path = co_await uring::stat(p);
    EXPECT_EQ(by_path.stx_size, 15u);
    EXPECT_EQ(by_path.stx_ino, by_fd.stx_ino);
    EXPECT_EQ(by_path.stx_mode, by_fd.stx_mode);

    co_await uring::close(fd);
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // the fd is gone
    auto r = co_await uring::read_at(fd, buf, 0).nothrow();
    EXPECT_EQ(r.res, -EBADF);
  }());
  // What the ring wrote is what the file holds.
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 15);
  EXPECT_EQ(st.st_mode & 0777u, 0640u & ~current_umask());
}

TEST_P(File, StatxFillsTheCallersStruct) {
  const std::string target = path("target");
  ASSERT_EQ(::close(::open(target.c_str(), O_CREAT | O_WRONLY, 0600)), 0);
  ASSERT_EQ(::truncate(target.c_str(), 4096 + 7), 0);
  ASSERT_EQ(::symlink("target", path("link").c_str()), 0);
  unique_fd dir(::open(dir_.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_GE(dir.get(), 0);
  run([&]() -> task<void> {
    struct statx out {};
    co_await uring::statx(AT_FDCWD, target, 0, STATX_SIZE | STATX_MODE, out);
    EXPECT_EQ(out.stx_size, 4096u + 7);
    EXPECT_TRUE(out.stx_mask & STATX_SIZE);
    EXPECT_TRUE(S_ISREG(out.stx_mode));

    // Relative to a directory fd, following the symlink or not.
    struct statx followed {};
    co_await uring::statx(dir.get(), "link", 0, STATX_BASIC_STATS, followed);
    EXPECT_TRUE(S_ISREG(followed.stx_mode));
    EXPECT_EQ(followed.stx_size, 4096u + 7);
    struct statx link {};
    co_await uring::statx(dir.get(), "link", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, link);
    EXPECT_TRUE(S_ISLNK(link.stx_mode));
    EXPECT_EQ(link.stx_size, std::string("target").size());  // a symlink's size is its target's length

    struct statx missing {};
    auto r = co_await uring::statx(dir.get(), "nope", 0, STATX_BASIC_STATS, missing).nothrow();
    EXPECT_EQ(r.res, -ENOENT);
  }());
}

TEST_P(File, OpenAtResolvesRelativeToTheDirectory) {
  run([&]() -> task<void> {
    int dirfd = co_await uring::open(dir_.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = co_await uring::open_at(dirfd, "rel", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    co_await uring::write_at(fd, std::string_view("x"), 0);
    co_await uring::close(fd);
    // O_EXCL on the file that now exists.
    auto again =
        co_await uring::open_at(dirfd, "rel", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600).nothrow();
    EXPECT_EQ(again.res, -EEXIST);
    struct statx st = co_await uring::fstat(dirfd);
    EXPECT_TRUE(S_ISDIR(st.stx_mode));
    co_await uring::close(dirfd);
  }());
  struct stat st {};
  ASSERT_EQ(::stat(path("rel").c_str(), &st), 0);  // created in dir_, not in the working directory
  EXPECT_EQ(st.st_size, 1);
  EXPECT_NE(::access("rel", F_OK), 0);
}

TEST_P(File, OpenOfAMissingPathThrowsEnoentNamingOpen) {
  auto [err, what] =
      failure_of([&] { run([&]() -> task<void> { co_await uring::open(path("missing"), O_RDONLY); }()); });
  EXPECT_EQ(err, ENOENT);
  EXPECT_TRUE(starts_with(what, "open: ")) << what;

  auto r = run([&]() -> task<uring::io_result> {
    co_return co_await uring::open(path("missing"), O_RDONLY).nothrow();
  }());
  EXPECT_EQ(r.res, -ENOENT);
  EXPECT_EQ(r.error(), std::errc::no_such_file_or_directory);

  auto [serr, swhat] =
      failure_of([&] { run([&]() -> task<void> { (void)co_await uring::stat(path("missing")); }()); });
  EXPECT_EQ(serr, ENOENT);
  EXPECT_TRUE(starts_with(swhat, "stat: ")) << swhat;
  auto sr =
      run([&]() -> task<uring::io_result> { co_return co_await uring::stat(path("missing")).nothrow(); }());
  EXPECT_EQ(sr.res, -ENOENT);
}

TEST_P(File, TheAwaitableOwnsItsPath) {
  unique_fd dir(::open(dir_.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_GE(dir.get(), 0);
  run([&]() -> task<void> {
    // The strings die at the end of each full expression, long before the co_await. "s" is short enough
    // to live inside the std::string (no heap), so every move of the awaitable moves its bytes too.
    auto short_op = uring::open_at(dir.get(), std::string("s"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    auto long_op = uring::open(dir_.path + "/a-name-long-enough-for-the-heap", O_CREAT | O_WRONLY, 0600);
    auto moved = std::move(short_op);
    auto timed = uring::with_timeout(std::move(long_op), 5s);
    auto stat_op = uring::stat(dir_.path + "/s");
    auto stat_moved = uring::with_stop_token(std::move(stat_op), std::stop_token{});
    int a = co_await std::move(moved);
    int b = co_await std::move(timed);
    struct statx st = co_await std::move(stat_moved);
    EXPECT_TRUE(S_ISREG(st.stx_mode));
    co_await uring::close(a);
    co_await uring::close(b);
  }());
  EXPECT_EQ(::access(path("s").c_str(), F_OK), 0);
  EXPECT_EQ(::access(path("a-name-long-enough-for-the-heap").c_str(), F_OK), 0);
}

TEST_P(File, CloseOfABadFdFailsWithEbadf) {
  auto [err, what] = failure_of([&] { run([]() -> task<void> { co_await uring::close(-1); }()); });
  EXPECT_EQ(err, EBADF);
  EXPECT_TRUE(starts_with(what, "close: ")) << what;
  auto r = run([]() -> task<uring::io_result> { co_return co_await uring::close(1'000'000).nothrow(); }());
  EXPECT_EQ(r.res, -EBADF);
}

TEST_P(File, SyncAndFstatOfABadFdFailWithEbadf) {
  auto [err, what] = failure_of([&] { run([]() -> task<void> { co_await uring::fdatasync(-1); }()); });
  EXPECT_EQ(err, EBADF);
  EXPECT_TRUE(starts_with(what, "fdatasync: ")) << what;
  auto [ferr, fwhat] = failure_of([&] { run([]() -> task<void> { co_await uring::fsync(-1); }()); });
  EXPECT_EQ(ferr, EBADF);
  EXPECT_TRUE(starts_with(fwhat, "fsync: ")) << fwhat;
  auto r = run([]() -> task<uring::io_result> { co_return co_await uring::fstat(-1).nothrow(); }());
  EXPECT_EQ(r.res, -EBADF);
}

TEST_P(File, ODirectoryOnARegularFileFailsWithEnotdir) {
  const std::string p = path("plain");
  ASSERT_EQ(::close(::open(p.c_str(), O_CREAT | O_WRONLY, 0600)), 0);
  auto [err, what] =
      failure_of([&] { run([&]() -> task<void> { co_await uring::open(p, O_RDONLY | O_DIRECTORY); }()); });
  EXPECT_EQ(err, ENOTDIR);
  EXPECT_TRUE(starts_with(what, "open: ")) << what;
}

TEST_P(File, AStoppedTokenOpensNothing) {
  std::stop_source stop;
  stop.request_stop();
  auto r = run([&]() -> task<uring::io_result> {
    co_return co_await uring::with_stop_token(uring::open(path("never"), O_CREAT | O_WRONLY, 0600),
                                              stop.get_token())
        .nothrow();
  }());
  EXPECT_EQ(r.res, -ECANCELED);
  EXPECT_NE(::access(path("never").c_str(), F_OK), 0);
}

// io_uring tries an open inline with O_NONBLOCK (then clears it on the file): a FIFO does not wait for its
// other end, unlike open(2). The emulation does the same (docs/emulation.md).
TEST_P(File, AFifoOpensWithoutWaitingForItsOtherEnd) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got = run([&]() -> task<std::string> {
    auto lonely = co_await uring::with_timeout(uring::open(fifo, O_WRONLY | O_CLOEXEC), 5s).nothrow();
    EXPECT_EQ(lonely.res, -ENXIO);  // nobody reads the FIFO
    int rd = co_await uring::with_timeout(uring::open(fifo, O_RDONLY | O_CLOEXEC), 5s);  // nobody writes yet
    EXPECT_EQ(::fcntl(rd, F_GETFL) & O_NONBLOCK, 0);  // a blocking fd, as asked
    int wr = co_await uring::with_timeout(uring::open(fifo, O_WRONLY | O_CLOEXEC), 5s);
    EXPECT_EQ(::fcntl(wr, F_GETFL) & O_NONBLOCK, 0);
    co_await uring::write(wr, std::string_view("ping"));
    std::array<char, 8> buf{};
    std::size_t n = co_await uring::read(rd, buf);
    co_await uring::close(wr);
    co_await uring::close(rd);
    co_return std::string(buf.data(), n);
  }());
  EXPECT_EQ(got, "ping");
}

// With O_CREAT (or O_TRUNC) io_uring sends the open to io-wq, where a FIFO waits for its other end as with
// open(2): natively the executor runs on meanwhile; emulated, the open blocks its thread (docs/emulation.md).
TEST_P(File, AFifoOpenedWithOCreatWaitsForItsOtherEnd) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    // O_RDWR never waits (so this thread cannot hang if the test fails) and releases the reader.
    unique_fd wr(::open(fifo.c_str(), O_RDWR | O_CLOEXEC));
    EXPECT_GE(wr.get(), 0);
  });
  int ticks_during_open = run([&]() -> task<int> {
    int ticks = 0;
    bool opened = false;
    auto ticker = [&]() -> task<void> {
      while (!opened) {
        co_await uring::sleep_for(1ms);
        ++ticks;
      }
    };
    uring::spawn(ticker());
    co_await uring::nop();  // the ticker sleeps
    const auto t0 = std::chrono::steady_clock::now();
    int rd = co_await uring::open(fifo, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);  // it did wait for the writer
    const int seen = ticks;
    opened = true;
    co_await uring::close(rd);
    co_return seen;
  }());
  writer.join();
  if (emulated()) {
    EXPECT_EQ(ticks_during_open, 0);
  } else {
    EXPECT_GT(ticks_during_open, 0);
  }
}

TEST_P(File, ManyConcurrentOpensLeaveNoFdBehind) {
  const long before_executor = open_fd_count();
  constexpr int kFiles = 200;
  run([&]() -> task<void> {
    const long baseline = open_fd_count();
    int done = 0;
    long peak = 0;
    auto one = [&](int i) -> task<void> {
      const std::string content = "file " + std::to_string(i);
      int fd =
          co_await uring::open(path("f" + std::to_string(i)), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
      co_await uring::write_at(fd, std::string_view(content), 0);
      co_await uring::nop();  // let the others open theirs before this one closes
      if (done == 0) peak = std::max(peak, open_fd_count() - baseline);
      co_await uring::close(fd);
      ++done;
    };
    for (int i = 0; i < kFiles; ++i) uring::spawn(one(i));
    while (done < kFiles) co_await uring::nop();
    EXPECT_GT(peak, 1);  // the opens really overlapped
    EXPECT_EQ(open_fd_count(), baseline);
  }());
  EXPECT_EQ(open_fd_count(), before_executor);
  for (int i = 0; i < kFiles; ++i) {
    const std::string expected = "file " + std::to_string(i);
    unique_fd fd(::open(path("f" + std::to_string(i)).c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_GE(fd.get(), 0) << i;
    std::array<char, 32> buf{};
    ASSERT_EQ(::read(fd.get(), buf.data(), buf.size()), static_cast<ssize_t>(expected.size())) << i;
    EXPECT_EQ(std::string(buf.data(), expected.size()), expected);
  }
}

INSTANTIATE_BACKENDS(File);

}  // namespace
