// readv/writev on files, pipes and sockets, fallocate and ftruncate, on every backend: results as the
// syscalls give them, errors, and the allowlist naming each of them. Also the op table as users see it:
// every op_kind has a name of its own.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "fd_leak.hpp"
#include "test_util.hpp"

namespace {

using uring::op_kind;
using uring::task;
using uring::test::unique_fd;

class FileOps : public uring::test::backend_test {
 protected:
  // A new file of this test's directory, open read-write.
  unique_fd new_file(const std::string& name) const {
    unique_fd fd(::open((dir_.path + "/" + name).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    EXPECT_GE(fd.get(), 0) << std::strerror(errno);
    return fd;
  }

  uring::test::temp_dir dir_{"uring_file_ops_test"};
};

struct stat_result {
  off_t size;
  blkcnt_t blocks;
};
stat_result stat_of(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return {st.st_size, st.st_blocks};
}

TEST_P(FileOps, WritevThenReadvScatterAtOffsets) {
  unique_fd fd = new_file("v");
  run([](int f) -> task<void> {
    std::string a = "hello, ", b = "vectored ", c = "world";
    const std::array<iovec, 3> out{{{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}}};
    EXPECT_EQ(co_await uring::writev_at(f, out, 4), a.size() + b.size() + c.size());

    std::array<char, 4> head{};
    std::array<char, 6> mid{};
    std::array<char, 32> tail{};
    const std::array<iovec, 3> in{
        {{head.data(), head.size()}, {mid.data(), mid.size()}, {tail.data(), tail.size()}}};
    const std::size_t n = co_await uring::readv_at(f, in, 0);
    EXPECT_EQ(n, 4 + a.size() + b.size() + c.size());  // the 4-byte hole reads as zeros
    EXPECT_EQ(std::string(head.data(), 4), std::string(4, '\0'));
    EXPECT_EQ(std::string(mid.data(), 6), "hello,");
    EXPECT_EQ(std::string(tail.data(), n - 10), " vectored world");
  }(fd.get()));
}

TEST_P(FileOps, ReadvAndWritevOnAPipeAndASocketUseTheirStream) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  unique_fd pr(p[0]), pw(p[1]);
  int s[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
  unique_fd s0(s[0]), s1(s[1]);
  run([](int r, int w, int a, int b) -> task<void> {
    for (auto [from, to] : {std::pair{r, w}, std::pair{b, a}}) {
      std::string x = "ab", y = "cde";
      const std::array<iovec, 2> out{{{x.data(), 2}, {y.data(), 3}}};
      EXPECT_EQ(co_await uring::writev(to, out), 5u);
      std::array<char, 1> one{};
      std::array<char, 8> rest{};
      const std::array<iovec, 2> in{{{one.data(), 1}, {rest.data(), rest.size()}}};
      const std::size_t n = co_await uring::readv(from, in);
      EXPECT_EQ(n, 5u);
      EXPECT_EQ(one[0], 'a');
      EXPECT_EQ(std::string(rest.data(), n - 1), "bcde");
    }
    // A readv that must wait: the data comes after it started.
    std::array<char, 4> buf{};
    const std::array<iovec, 1> in{{{buf.data(), buf.size()}}};
    auto reader = [](int fd, std::span<const iovec> bufs) -> task<std::size_t> {
      co_return co_await uring::readv(fd, bufs);
    };
    auto writer = [](int fd) -> task<std::size_t> {
      co_return co_await uring::write(fd, std::string_view("late"));
    };
    auto [n, wrote] = co_await uring::when_all(reader(b, in), writer(a));
    EXPECT_EQ(n, 4u);
    EXPECT_EQ(wrote, 4u);
    EXPECT_EQ(std::string(buf.data(), 4), "late");
  }(pr.get(), pw.get(), s0.get(), s1.get()));
}

TEST_P(FileOps, FallocateReservesAndPunchesAsTheSyscallDoes) {
  unique_fd fd = new_file("f");
  run([](int f) -> task<void> {
    co_await uring::fallocate(f, 0, 0, 1 << 20);
    EXPECT_EQ(stat_of(f).size, 1 << 20);
    EXPECT_GE(stat_of(f).blocks * 512, 1 << 20);
    co_await uring::fallocate(f, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20);  // beyond the end, size kept
    EXPECT_EQ(stat_of(f).size, 1 << 20);
    EXPECT_GE(stat_of(f).blocks * 512, 2 << 20);
    const auto before = stat_of(f).blocks;
    auto punched =
        co_await uring::fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 << 20).nothrow();
    if (punched.res != -EOPNOTSUPP) {  // a file system without holes says so, on both backends
      EXPECT_EQ(punched.res, 0);
      EXPECT_LT(stat_of(f).blocks, before);
    }
    // An invalid mode and a bad fd fail as fallocate(2) does.
    EXPECT_EQ((co_await uring::fallocate(f, 0, 0, 0).nothrow()).res, -EINVAL);  // zero length
    EXPECT_EQ((co_await uring::fallocate(-1, 0, 0, 4096).nothrow()).res, -EBADF);
  }(fd.get()));
}

TEST_P(FileOps, FtruncateGrowsAndShrinksAsTheSyscallDoes) {
  unique_fd fd = new_file("t");
  ASSERT_EQ(::write(fd.get(), "0123456789", 10), 10);
  unique_fd ro(::open((dir_.path + "/t").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(ro.get(), 0);
  errno = 0;
  const int syscall_errno =
      ::ftruncate(ro.get(), 1) == 0 ? 0 : errno;  // what ftruncate(2) says of a read-only fd
  run([&](int f, int r) -> task<void> {
    co_await uring::ftruncate(f, 4);
    EXPECT_EQ(stat_of(f).size, 4);
    std::array<char, 16> buf{};
    EXPECT_EQ(co_await uring::read_at(f, buf, 0), 4u);
    EXPECT_EQ(std::string(buf.data(), 4), "0123");
    co_await uring::ftruncate(f, 8192);
    EXPECT_EQ(stat_of(f).size, 8192);
    EXPECT_EQ((co_await uring::ftruncate(r, 1).nothrow()).res, -syscall_errno);
    try {
      co_await uring::ftruncate(-1, 0);
      ADD_FAILURE() << "ftruncate of fd -1 did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EBADF);
      EXPECT_EQ(std::string(e.what()).rfind("ftruncate: ", 0), 0u) << e.what();
    }
  }(fd.get(), ro.get()));
}

TEST_P(FileOps, TheAllowlistNamesEachNewOperation) {
  unique_fd fd = new_file("a");
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::readv, op_kind::writev};
  uring::executor ex(o);
  ex.run([](int f) -> task<void> {
    std::string x = "ok";
    const std::array<iovec, 1> out{{{x.data(), 2}}};
    EXPECT_EQ(co_await uring::writev_at(f, out, 0), 2u);
    EXPECT_EQ((co_await uring::fallocate(f, 0, 0, 4096).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::ftruncate(f, 0).nothrow()).res, -EACCES);
    try {
      co_await uring::ftruncate(f, 0);
      ADD_FAILURE() << "ftruncate was not refused";
    } catch (const std::system_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "ftruncate: not in this executor's op allowlist (executor_options::allowed_ops): Permission "
                "denied");
    }
  }(fd.get()));
  EXPECT_EQ(stat_of(fd.get()).size, 2);  // nothing refused reached the file
  EXPECT_EQ(ex.stats().started(op_kind::writev), 1u);
}

INSTANTIATE_BACKENDS(FileOps);

TEST(OpTable, EveryKindHasANameOfItsOwn) {
  std::set<std::string> names;
  for (std::size_t k = 0; k < uring::detail::kOpCodeCount; ++k) {
    const std::string name = uring::to_string(op_kind(k));
    EXPECT_NE(name, "?") << k;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
  }
  EXPECT_EQ(std::string(uring::to_string(op_kind::ftruncate)), "ftruncate");
  // Past the 32 the allowlist once held: it names and refuses any kind.
  const uring::op_allowlist list{op_kind::ftruncate};
  EXPECT_TRUE(list.allows(op_kind::ftruncate));
  EXPECT_FALSE(list.allows(op_kind::readv));
  EXPECT_EQ(uring::to_string(list), "ftruncate");
}

}  // namespace
