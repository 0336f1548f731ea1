// unlink, rmdir, rename, mkdir, symlink, link, fadvise and madvise on every backend: their effects as
// plain syscalls see them, the errors as the syscalls give them, and the allowlist naming each of them.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "eventfd_count.hpp"
#include "expect_failure.hpp"
#include "test_util.hpp"

namespace {

using uring::op_kind;
using uring::task;
using uring::test::expect_failure;
using uring::test::take;
using uring::test::take_signalled;
using uring::test::unique_fd;

// What awaiting `op` throws: the system_error's what(), or "" when it succeeds.
template <class Awaitable>
task<std::string> what_of(Awaitable op) {
  try {
    co_await std::move(op);
  } catch (const std::system_error& e) {
    co_return e.what();
  }
  co_return "";
}

// lstat(2)'s errno for `path`: 0 when it exists.
int lstat_errno(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? 0 : errno;
}

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st;
}

std::string readlink_of(const std::string& path) {
  std::array<char, 256> buf{};
  const ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
  return n < 0 ? "<" + std::string(std::strerror(errno)) + ">"
               : std::string(buf.data(), static_cast<std::size_t>(n));
}

std::string contents_of(const std::string& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return "<" + std::string(std::strerror(errno)) + ">";
  std::array<char, 256> buf{};
  const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
  return n < 0 ? "<read failed>" : std::string(buf.data(), static_cast<std::size_t>(n));
}

class FsOps : public uring::test::backend_test {
 protected:
  [[nodiscard]] std::string path(const std::string& name) const { return dir_.path + "/" + name; }

  // A new file of this test's directory holding `text`.
  void make_file(const std::string& name, const std::string& text = "") const {
    unique_fd fd(::open(path(name).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
    ASSERT_GE(fd.get(), 0) << std::strerror(errno);
    ASSERT_EQ(::write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  void make_dir(const std::string& name) const { ASSERT_EQ(::mkdir(path(name).c_str(), 0700), 0); }

  [[nodiscard]] unique_fd open_dir() const {
    unique_fd fd(::open(dir_.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    EXPECT_GE(fd.get(), 0) << std::strerror(errno);
    return fd;
  }

  uring::test::temp_dir dir_{"uring_fs_ops_test"};
};

TEST_P(FsOps, UnlinkRemovesAFileAndRmdirAnEmptyDirectory) {
  make_file("f");
  make_file("g");
  make_dir("d");
  make_file("d/inside");
  const unique_fd dir = open_dir();
  run([&](int dirfd) -> task<void> {
    // The path is the awaitable's own: the string it came from is gone before the operation starts.
    auto op = uring::unlink(std::string(path("f")));
    co_await std::move(op);
    EXPECT_EQ(lstat_errno(path("f")), ENOENT);
    co_await expect_failure([&] { return uring::unlink(path("f")); }, ENOENT, "unlink");

    co_await uring::unlink_at(dirfd, "g");  // relative to the directory's fd
    EXPECT_EQ(lstat_errno(path("g")), ENOENT);

    EXPECT_EQ((co_await uring::unlink(path("d")).nothrow()).res, -EISDIR);  // unlink(2) on a directory
    co_await expect_failure([&] { return uring::rmdir(path("d")); }, ENOTEMPTY, "rmdir");
    EXPECT_EQ(lstat_errno(path("d/inside")), 0);
    co_await uring::unlink(path("d/inside"));
    co_await uring::rmdir(path("d"));
    EXPECT_EQ(lstat_errno(path("d")), ENOENT);
    EXPECT_EQ((co_await uring::rmdir(path("d")).nothrow()).res, -ENOENT);
  }(dir.get()));
}

TEST_P(FsOps, RenameMovesReplacesExchangesAndRefuses) {
  make_file("a", "first");
  make_file("b", "second");
  make_file("c", "third");
  make_dir("sub");
  const unique_fd dir = open_dir();
  run([&](int dirfd) -> task<void> {
    co_await uring::rename(path("a"), path("moved"));
    EXPECT_EQ(lstat_errno(path("a")), ENOENT);
    EXPECT_EQ(contents_of(path("moved")), "first");

    // Onto an existing name: replaced, unless RENAME_NOREPLACE.
    EXPECT_EQ((co_await uring::rename_at(dirfd, "moved", dirfd, "b", RENAME_NOREPLACE).nothrow()).res,
              -EEXIST);
    EXPECT_EQ(contents_of(path("moved")), "first");
    EXPECT_EQ(contents_of(path("b")), "second");
    co_await uring::rename_at(dirfd, "moved", dirfd, "b");
    EXPECT_EQ(lstat_errno(path("moved")), ENOENT);
    EXPECT_EQ(contents_of(path("b")), "first");

    // RENAME_EXCHANGE swaps the two, where the file system can.
    const int exchanged = (co_await uring::rename_at(dirfd, "b", dirfd, "c", RENAME_EXCHANGE).nothrow()).res;
    if (exchanged != -EINVAL) {
      EXPECT_EQ(exchanged, 0);
      EXPECT_EQ(contents_of(path("b")), "third");
      EXPECT_EQ(contents_of(path("c")), "first");
    }

    // Across directories, the new one named by its own fd.
    const unique_fd sub(::open(path("sub").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    co_await uring::rename_at(dirfd, "c", sub.get(), "c2");
    EXPECT_EQ(lstat_errno(path("c")), ENOENT);
    EXPECT_EQ(lstat_errno(path("sub/c2")), 0);

    co_await expect_failure([&] { return uring::rename(path("nothing"), path("x")); }, ENOENT, "rename");
    EXPECT_EQ(lstat_errno(path("x")), ENOENT);
  }(dir.get()));
}

TEST_P(FsOps, MkdirCreatesWithTheModeLessTheUmask) {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  const unique_fd dir = open_dir();
  run([&](int dirfd) -> task<void> {
    co_await uring::mkdir(path("d"), 0751);
    const struct stat st = lstat_of(path("d"));
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0751 & ~mask);

    co_await uring::mkdir_at(dirfd, "e", 0700);
    EXPECT_EQ(lstat_of(path("e")).st_mode & 07777, 0700 & ~mask);

    co_await expect_failure([&] { return uring::mkdir(path("d")); }, EEXIST, "mkdir");
    EXPECT_EQ((co_await uring::mkdir(path("no/such/parent")).nothrow()).res, -ENOENT);
  }(dir.get()));
}

TEST_P(FsOps, SymlinkStoresItsTargetAsGiven) {
  make_file("exists");
  const unique_fd dir = open_dir();
  run([&](int dirfd) -> task<void> {
    co_await uring::symlink("nowhere/at/all", path("dangling"));
    EXPECT_EQ(readlink_of(path("dangling")), "nowhere/at/all");
    EXPECT_TRUE(S_ISLNK(lstat_of(path("dangling")).st_mode));

    co_await uring::symlink_at("exists", dirfd, "rel");
    EXPECT_EQ(readlink_of(path("rel")), "exists");
    struct stat followed {};
    EXPECT_EQ(::stat(path("rel").c_str(), &followed), 0);  // it resolves from its own directory

    EXPECT_EQ((co_await uring::symlink("x", path("exists")).nothrow()).res, -EEXIST);
    co_await expect_failure([&] { return uring::symlink("x", path("no/such/dir/l")); }, ENOENT, "symlink");
  }(dir.get()));
}

TEST_P(FsOps, LinkGivesTheFileASecondName) {
  make_file("a", "shared");
  make_file("taken");
  make_dir("sub");
  const unique_fd dir = open_dir();
  run([&](int dirfd) -> task<void> {
    co_await uring::link(path("a"), path("b"));
    const struct stat a = lstat_of(path("a"));
    const struct stat b = lstat_of(path("b"));
    EXPECT_EQ(a.st_nlink, 2u);
    EXPECT_EQ(a.st_ino, b.st_ino);
    EXPECT_EQ(contents_of(path("b")), "shared");

    const unique_fd sub(::open(path("sub").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    co_await uring::link_at(dirfd, "a", sub.get(), "c");
    EXPECT_EQ(lstat_of(path("a")).st_nlink, 3u);

    EXPECT_EQ((co_await uring::link(path("a"), path("taken")).nothrow()).res, -EEXIST);
    co_await expect_failure([&] { return uring::link(path("nothing"), path("d")); }, ENOENT, "link");
    EXPECT_EQ(lstat_errno(path("d")), ENOENT);
  }(dir.get()));
}

TEST_P(FsOps, FadviseAndMadviseAsTheSyscallsDo) {
  make_file("f", std::string(8192, 'x'));
  const unique_fd f(::open(path("f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(f.get(), 0);
  const long page = ::sysconf(_SC_PAGESIZE);
  void* region = ::mmap(nullptr, static_cast<std::size_t>(2 * page), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  run([&](int fd) -> task<void> {
    co_await uring::fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    EXPECT_EQ((co_await uring::fadvise(fd, 0, 4096, POSIX_FADV_WILLNEED).nothrow()).res, 0);
    co_await expect_failure([] { return uring::fadvise(-1, 0, 0, POSIX_FADV_SEQUENTIAL); }, EBADF, "fadvise");
    EXPECT_EQ((co_await uring::fadvise(fd, 0, 0, 12345).nothrow()).res, -EINVAL);  // no such advice

    const auto len = static_cast<std::uint32_t>(2 * page);
    co_await uring::madvise(region, len, MADV_WILLNEED);
    void* unaligned = static_cast<char*>(region) + 1;
    co_await expect_failure([&] { return uring::madvise(unaligned, 16, MADV_WILLNEED); }, EINVAL, "madvise");
  }(f.get()));
  ::munmap(region, static_cast<std::size_t>(2 * page));
}

// An async-only eventfd hears of the completions an io-wq worker made: the kernel runs the name
// operations and madvise there, and fadvise too except for the advice that only sets the read-ahead mode.
TEST_P(FsOps, AnAsyncOnlyEventfdHearsOfTheWorkerCompletions) {
  make_file("f", "x");
  const unique_fd f(::open(path("f").c_str(), O_RDONLY | O_CLOEXEC));
  const unique_fd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ASSERT_GE(efd.get(), 0);
  const long page = ::sysconf(_SC_PAGESIZE);
  void* region = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  run([&](int fd, int ev) -> task<void> {
    auto reg =
        co_await uring::executor::current()->register_eventfd(ev, uring::eventfd_options{.async_only = true});
    take(ev);
    co_await uring::fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    EXPECT_EQ(take(ev), 0u) << "fadvise(SEQUENTIAL), done inline, signalled";
    co_await uring::fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    EXPECT_GE(take_signalled(ev), 1u) << "fadvise(WILLNEED)";
    co_await uring::madvise(region, static_cast<std::uint32_t>(page), MADV_WILLNEED);
    EXPECT_GE(take_signalled(ev), 1u) << "madvise";
    co_await uring::mkdir(path("d"));
    EXPECT_GE(take_signalled(ev), 1u) << "mkdir";
    co_await uring::rename(path("d"), path("e"));
    EXPECT_GE(take_signalled(ev), 1u) << "rename";
    co_await uring::rmdir(path("e"));
    EXPECT_GE(take_signalled(ev), 1u) << "rmdir";
  }(f.get(), efd.get()));
  ::munmap(region, static_cast<std::size_t>(page));
}

TEST_P(FsOps, TheAllowlistRefusesEachUnlisted) {
  make_file("f");
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::mkdirat};
  uring::executor ex(o);
  ex.run([&]() -> task<void> {
    co_await uring::mkdir(path("d"));
    EXPECT_EQ((co_await uring::unlink(path("f")).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::rmdir(path("d")).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::rename(path("f"), path("g")).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::symlink("f", path("s")).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::link(path("f"), path("l")).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::fadvise(0, 0, 0, POSIX_FADV_NORMAL).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::madvise(nullptr, 0, MADV_NORMAL).nothrow()).res, -EACCES);
    // The message names the op_kind to allow where the operation's own name differs from it.
    EXPECT_EQ(co_await what_of(uring::unlink(path("f"))),
              "unlink: op_kind::unlinkat is not in this executor's op allowlist "
              "(executor_options::allowed_ops): Permission denied");
  }());
  // Nothing refused reached the file system.
  EXPECT_EQ(lstat_errno(path("f")), 0);
  EXPECT_EQ(lstat_errno(path("d")), 0);
  for (const char* name : {"g", "s", "l"}) EXPECT_EQ(lstat_errno(path(name)), ENOENT) << name;
  EXPECT_EQ(ex.stats().started(op_kind::mkdirat), 1u);
}

INSTANTIATE_BACKENDS(FsOps);

TEST(FsOpTable, EachKindIsNamedAfterItsKernelOperation) {
  const std::pair<op_kind, const char*> names[] = {
      {op_kind::unlinkat, "unlinkat"},   {op_kind::renameat, "renameat"}, {op_kind::mkdirat, "mkdirat"},
      {op_kind::symlinkat, "symlinkat"}, {op_kind::linkat, "linkat"},     {op_kind::fadvise, "fadvise"},
      {op_kind::madvise, "madvise"}};
  for (auto [kind, name] : names) EXPECT_EQ(std::string(uring::to_string(kind)), name);
  const uring::op_allowlist list{op_kind::renameat, op_kind::madvise};
  EXPECT_TRUE(list.allows(op_kind::madvise));
  EXPECT_FALSE(list.allows(op_kind::unlinkat));
  EXPECT_EQ(uring::to_string(list), "renameat,madvise");
}

}  // namespace
