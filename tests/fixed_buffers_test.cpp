// Registered buffers on every backend: registration and leases (bounded, a waiter when all are out),
// read_fixed/write_fixed on a file and a pipe and send/send_zc from a registered buffer over loopback TCP
// with the bytes checked, the bounds refused before submission, the kernel's EFAULT for a bad index or
// bytes outside the buffer, an update with caller memory and its tag, unregistering while leased, the
// allowlist, and the RLIMIT_MEMLOCK error.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "expect_failure.hpp"
#include "seccomp_child.hpp"
#include "tcp_pair.hpp"
#include "test_util.hpp"

namespace {

using uring::fixed_buffer;
using uring::fixed_buffers;
using uring::fixed_slice;
using uring::op_kind;
using uring::task;
using uring::test::expect_failure;
using uring::test::tcp_pair;
using uring::test::unique_fd;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kSizes[] = {4 * kKiB, 64 * kKiB, 1024 * kKiB};

void fill(std::span<std::byte> bytes, unsigned seed) {
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::byte& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
}

// The error code of what `f` throws as std::system_error (0: nothing thrown).
template <class F>
int error_of(F f, std::string* what = nullptr) {
  try {
    f();
  } catch (const std::system_error& e) {
    if (what != nullptr) *what = e.what();
    return e.code().value();
  }
  return 0;
}

// Reads `n` bytes from `fd` on its own thread, each wait bounded (a stuck sender ends it short).
class reader_thread {
 public:
  reader_thread(int fd, std::size_t n)
      : thread_([this, fd, n] {
          got_.resize(n);
          std::size_t have = 0;
          while (have < n) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 30'000) <= 0) break;
            const ssize_t r = ::read(fd, got_.data() + have, n - have);
            if (r <= 0) break;
            have += static_cast<std::size_t>(r);
          }
          got_.resize(have);
        }) {}
  ~reader_thread() {
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::byte> take() {
    thread_.join();
    return std::move(got_);
  }

 private:
  std::vector<std::byte> got_;
  std::thread thread_;
};

class FixedBuffers : public uring::test::backend_test {};

TEST_P(FixedBuffers, LeasesAreBoundedByTheCount) {
  run([]() -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(4, 4000);
    EXPECT_EQ(bufs.count(), 4u);
    EXPECT_EQ(bufs.buffer_size(), 4000u);
    std::vector<fixed_buffer> out;
    for (int i = 0; i < 4; ++i) out.push_back(co_await bufs.lease());
    for (std::uint32_t i = 0; i < 4; ++i) {
      EXPECT_EQ(out[i].index(), i);
      EXPECT_EQ(out[i].size(), 4000u);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(out[i].data()) % 4096, 0u) << "page-aligned";
    }
    EXPECT_EQ(bufs.available(), 0u);
    EXPECT_FALSE(bufs.try_lease().has_value());
    out[2].reset();
    std::optional<fixed_buffer> again = bufs.try_lease();
    EXPECT_TRUE(again.has_value() && again->index() == 2u);
  }());
}

TEST_P(FixedBuffers, ALeaseWaitsForAReturnInOrder) {
  run([]() -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
    fixed_buffer held = co_await bufs.lease();
    std::vector<int> order;
    auto waiter = [&](int id) -> task<void> {
      fixed_buffer b = co_await bufs.lease();
      EXPECT_EQ(b.index(), 0u);
      order.push_back(id);
    };
    auto first = uring::spawn(waiter(1));
    auto second = uring::spawn(waiter(2));
    for (int i = 0; i < 100 && bufs.waiting() < 2; ++i) co_await uring::nop();
    EXPECT_EQ(bufs.waiting(), 2u);
    EXPECT_TRUE(order.empty()) << "nobody gets a buffer while all are out";
    held.reset();
    co_await std::move(first);
    co_await std::move(second);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
    EXPECT_EQ(bufs.available(), 1u);
  }());
}

TEST_P(FixedBuffers, ReadAndWriteFixedOnAFileAtSeveralSizes) {
  for (std::size_t size : kSizes) {
    unique_fd file = uring::test::temp_file();
    run([](int fd, std::size_t size) -> task<void> {
      fixed_buffers bufs = co_await uring::register_buffers(2, size);
      fixed_buffer out = co_await bufs.lease();
      fixed_buffer in = co_await bufs.lease();
      fill(out.bytes(), static_cast<unsigned>(size));
      EXPECT_EQ(co_await uring::write_fixed(fd, out, 0), size);
      EXPECT_EQ(co_await uring::read_fixed(fd, in, 0), size);
      EXPECT_EQ(std::memcmp(in.data(), out.data(), size), 0) << size;
      // A slice: the second half, read into the start.
      std::memset(in.data(), 0, size);
      EXPECT_EQ(co_await uring::read_fixed(fd, in.slice(0, size / 2), size / 2), size / 2);
      EXPECT_EQ(std::memcmp(in.data(), out.data() + size / 2, size / 2), 0) << size;
    }(file.get(), size));
  }
}

TEST_P(FixedBuffers, ReadAndWriteFixedOnAPipeAtSeveralSizes) {
  for (std::size_t size : kSizes) {
    uring::test::pipe_pair p;
    run([](int r, int w, std::size_t size) -> task<void> {
      fixed_buffers bufs = co_await uring::register_buffers(2, size);
      fixed_buffer out = co_await bufs.lease();
      fixed_buffer in = co_await bufs.lease();
      fill(out.bytes(), static_cast<unsigned>(size) + 7);
      auto writer = [&]() -> task<void> {
        for (std::size_t done = 0; done < size;)
          done += co_await uring::write_fixed(w, out.slice(done, size - done));
      };
      auto reader = [&]() -> task<void> {
        for (std::size_t done = 0; done < size;) {
          const std::size_t n = co_await uring::read_fixed(r, in.slice(done, size - done));
          EXPECT_GT(n, 0u);
          if (n == 0) break;
          done += n;
        }
      };
      co_await uring::when_all(writer(), reader());
      EXPECT_EQ(std::memcmp(in.data(), out.data(), size), 0) << size;
    }(p.read_end.get(), p.write_end.get(), size));
  }
}

// A plain send from a registered buffer needs a kernel whose IORING_OP_SEND takes IORING_RECVSEND_FIXED_BUF
// (the probe's send_fixed_buf); elsewhere the kernel refuses it, EINVAL. The emulation always has it.
bool plain_fixed_send(const uring::test::backend_config& c) {
  return c.options.backend == uring::backend_kind::emulated || uring::probed_kernel().send_fixed_buf;
}

TEST_P(FixedBuffers, SendFixedWithoutKernelSupportSaysEINVAL) {
  if (plain_fixed_send(GetParam())) GTEST_SKIP() << "this kernel sends from registered buffers";
  tcp_pair tcp;
  run([](int sock) -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
    fixed_buffer b = co_await bufs.lease();
    co_await expect_failure([&] { return uring::send_fixed(sock, b); }, EINVAL, "send_fixed");
  }(tcp.sender.get()));
}

TEST_P(FixedBuffers, SendAndSendZcFromAFixedBufferOverLoopbackTcp) {
  for (bool zc : {false, true}) {
    if (!zc && !plain_fixed_send(GetParam())) continue;
    for (std::size_t size : {64 * kKiB, 1024 * kKiB}) {
      tcp_pair tcp;
      reader_thread peer(tcp.peer.get(), size);
      std::vector<std::byte> sent(size);
      run([](int fd, std::size_t size, bool zc, std::vector<std::byte>* sent) -> task<void> {
        fixed_buffers bufs = co_await uring::register_buffers(1, size);
        fixed_buffer b = co_await bufs.lease();
        fill(b.bytes(), static_cast<unsigned>(size) + zc);
        std::memcpy(sent->data(), b.data(), size);
        for (std::size_t done = 0; done < size;) {
          const fixed_slice rest = b.slice(done, size - done);
          done += zc ? co_await uring::send_zc_fixed(fd, rest) : co_await uring::send_fixed(fd, rest);
        }
      }(tcp.sender.get(), size, zc, &sent));
      const std::vector<std::byte> got = peer.take();
      ASSERT_EQ(got.size(), size) << (zc ? "send_zc_fixed " : "send_fixed ") << size;
      EXPECT_TRUE(got == sent) << (zc ? "send_zc_fixed " : "send_fixed ") << size;
    }
  }
}

TEST_P(FixedBuffers, ASliceOutsideTheLeaseIsRefusedBeforeSubmission) {
  uring::executor ex(options());
  ex.run([]() -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
    fixed_buffer b = co_await bufs.lease();
    std::string what;
    EXPECT_EQ(error_of([&] { (void)b.slice(4000, 200); }, &what), EINVAL);
    EXPECT_EQ(
        what,
        "uring::fixed_buffer::slice(4000, 200): past the end of buffer 0 (4096 bytes): Invalid argument");
    EXPECT_EQ(error_of([&] { (void)b.slice(4097, 0); }), EINVAL);
    EXPECT_EQ(error_of([&] { (void)b.slice(0, ~std::size_t{0}); }), EINVAL);
    EXPECT_EQ(error_of([&] { (void)b.slice(4096, 0); }), 0);
    EXPECT_EQ(error_of([&] { (void)fixed_buffer{}.slice(0, 0); }), EINVAL);
  }());
  EXPECT_EQ(ex.stats().started(op_kind::read_fixed) + ex.stats().started(op_kind::write_fixed), 0u);
}

TEST_P(FixedBuffers, ABadIndexOrBytesOutsideTheBufferFailEFAULT) {
  unique_fd file = uring::test::temp_file();
  tcp_pair tcp;
  const int send_error = plain_fixed_send(GetParam()) ? EFAULT : EINVAL;
  run([](int fd, int sock, int send_error) -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(2, 4096);
    fixed_buffer b = co_await bufs.lease();
    const fixed_slice bad_index{7, b.data(), 16};
    std::vector<std::byte> elsewhere(64);
    const fixed_slice outside{b.index(), elsewhere.data(), 16};
    const fixed_slice overruns{b.index(), b.data() + 4000, 200};
    for (const fixed_slice& s : {bad_index, outside, overruns}) {
      co_await expect_failure([&] { return uring::read_fixed(fd, s, 0); }, EFAULT, "read_fixed");
      co_await expect_failure([&] { return uring::write_fixed(fd, s, 0); }, EFAULT, "write_fixed");
      co_await expect_failure([&] { return uring::send_fixed(sock, s); }, send_error, "send_fixed");
    }
  }(file.get(), tcp.sender.get(), send_error));
}

TEST_P(FixedBuffers, AnUpdatePutsCallerMemoryInASlotAndWaitsForTheOldOnesTag) {
  unique_fd file = uring::test::temp_file();
  run([](int fd) -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(2, 4096);
    std::vector<std::byte> mine(8192);
    fill(mine, 3);
    co_await bufs.update(0, mine);  // slot 0 held its own buffer: nothing to wait for
    fixed_buffer b = co_await bufs.lease();
    EXPECT_EQ(b.index(), 0u);
    EXPECT_EQ(b.data(), mine.data());
    EXPECT_EQ(b.size(), mine.size());
    EXPECT_EQ(co_await uring::write_fixed(fd, b, 0), 8192u);
    std::string what;
    try {
      co_await bufs.update(0, {});
    } catch (const std::system_error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("fixed_buffers::update(0): the slot is leased"), std::string::npos) << what;
    b.reset();
    // Back to its own buffer: completes once the kernel has let go of `mine` (its tag's completion).
    co_await bufs.update(0, {});
    b = co_await bufs.lease();
    EXPECT_NE(b.data(), mine.data());
    EXPECT_EQ(b.size(), 4096u);
    EXPECT_EQ(co_await uring::read_fixed(fd, b, 4096), 4096u);
    EXPECT_EQ(std::memcmp(b.data(), mine.data() + 4096, 4096), 0);
    // The memory it held is no longer the table's: EFAULT.
    co_await expect_failure(
        [&] {
          return uring::read_fixed(fd, fixed_slice{0, mine.data(), 16}, 0);
        },
        EFAULT, "read_fixed");
    // Twice in a row with caller memory: the second waits for the first's tag.
    b.reset();
    std::vector<std::byte> other(4096);
    co_await bufs.update(0, mine);
    co_await bufs.update(0, other);
    b = co_await bufs.lease();
    EXPECT_EQ(b.data(), other.data());
    b.reset();
    co_await bufs.update(0, {});
    what.clear();
    try {
      co_await bufs.update(9, {});
    } catch (const std::system_error& e) {
      what = e.what();
    }
    EXPECT_EQ(what, "uring::fixed_buffers::update(9): the set has 2 buffers: Invalid argument");
  }(file.get()));
}

TEST_P(FixedBuffers, UnregisteringWhileLeasedKeepsTheMemoryAndFailsItsOperations) {
  unique_fd file = uring::test::temp_file();
  run([](int fd) -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
    fixed_buffer b = co_await bufs.lease();
    int waiter_error = 0;
    auto wait_for_one = [&]() -> task<void> {
      try {
        (void)co_await bufs.lease();
      } catch (const std::system_error& e) {
        waiter_error = e.code().value();
      }
    };
    auto waiter = uring::spawn(wait_for_one());
    for (int i = 0; i < 100 && bufs.waiting() == 0; ++i) co_await uring::nop();
    EXPECT_EQ(bufs.waiting(), 1u);
    bufs.unregister();
    co_await std::move(waiter);
    EXPECT_EQ(waiter_error, ECANCELED);
    EXPECT_FALSE(bufs.registered());
    EXPECT_EQ(error_of([&] { (void)bufs.try_lease(); }), ENXIO);
    fill(b.bytes(), 9);  // still ours
    co_await expect_failure([&] { return uring::write_fixed(fd, b, 0); }, EFAULT, "write_fixed");
    // A new set on the same executor: the old lease names a slot whose bytes are elsewhere now.
    fixed_buffers again = co_await uring::register_buffers(1, 4096);
    co_await expect_failure([&] { return uring::write_fixed(fd, b, 0); }, EFAULT, "write_fixed");
    b.reset();
    fixed_buffer c = co_await again.lease();
    EXPECT_EQ(co_await uring::write_fixed(fd, c, 0), 4096u);
  }(file.get()));
}

// A set still in use when its executor ends (its owner, a lease and a waiter in frames that never
// finished) goes with the frames, nothing resumed, nothing leaked (LeakSanitizer, the fd check).
TEST_P(FixedBuffers, AnExecutorThatEndsWithASetInUseFreesIt) {
  uring::test::pipe_pair p;
  uring::executor ex(options());
  ex.run([](int fd) -> task<void> {
    auto holder = [](int in) -> task<void> {
      fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
      fixed_buffer b = co_await bufs.lease();
      auto waiter = [](fixed_buffers* set) -> task<void> { (void)co_await set->lease(); };
      uring::spawn(waiter(&bufs));
      std::array<char, 1> c{};
      (void)co_await uring::read(in, c);  // nothing ever comes
    };
    uring::spawn(holder(fd));
    for (int i = 0; i < 4; ++i) co_await uring::nop();
  }(p.read_end.get()));
}

TEST_P(FixedBuffers, OneSetPerExecutor) {
  run([]() -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);
    std::string what;
    try {
      (void)co_await uring::register_buffers(1, 4096);
    } catch (const std::system_error& e) {
      what = e.what();
      EXPECT_EQ(e.code().value(), EBUSY);
    }
    EXPECT_NE(what.find("one set per executor"), std::string::npos) << what;
    what.clear();
    try {
      (void)co_await uring::register_buffers(0, 4096);
    } catch (const std::system_error& e) {
      what = e.what();
    }
    EXPECT_EQ(
        what,
        "uring::register_buffers(0, 4096): 1 to 16384 buffers of 1 byte to 1 GiB each: Invalid argument");
  }());
}

TEST_P(FixedBuffers, TheAllowlistRefusesEachUnlisted) {
  unique_fd file = uring::test::temp_file();
  tcp_pair tcp;
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::write_fixed};
  uring::executor ex(o);
  ex.run([](int fd, int sock) -> task<void> {
    fixed_buffers bufs = co_await uring::register_buffers(1, 4096);  // registration passes the restrictions
    fixed_buffer b = co_await bufs.lease();
    EXPECT_EQ(co_await uring::write_fixed(fd, b, 0), 4096u);
    EXPECT_EQ((co_await uring::read_fixed(fd, b, 0).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await uring::send_fixed(sock, b).nothrow()).res, -EACCES);
    int err = 0;
    try {
      (void)co_await uring::send_zc_fixed(sock, b);
    } catch (const std::system_error& e) {
      err = e.code().value();
    }
    EXPECT_EQ(err, EACCES);
  }(file.get(), tcp.sender.get()));
  EXPECT_EQ(ex.stats().started(op_kind::write_fixed), 1u);
  EXPECT_STREQ(uring::to_string(op_kind::read_fixed), "read_fixed");
  EXPECT_STREQ(uring::to_string(op_kind::write_fixed), "write_fixed");
  EXPECT_STREQ(uring::to_string(op_kind::send_fixed), "send_fixed");
  EXPECT_STREQ(uring::to_string(op_kind::send_zc_fixed), "send_zc_fixed");
}

// Without CAP_IPC_LOCK (root has it) the kernel counts pinned pages against RLIMIT_MEMLOCK: in a child
// that drops the capability and lowers the limit, a registration past it fails with the message.
TEST_P(FixedBuffers, ALowMemlockLimitSaysWhatToRaise) {
  const uring::executor_options opts = options();
  const auto result = uring::test::run_in_child([&opts]() -> int {
    __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2]{};
    if (::syscall(SYS_capget, &head, caps) != 0) return 10;
    caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    if (::syscall(SYS_capset, &head, caps) != 0) return 11;
    const rlimit lim{4 << 20, 4 << 20};  // room for the ring itself (6.13+ counts it), not for 16 MiB
    if (::setrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 12;
    uring::executor ex(opts);
    return ex.run([]() -> task<int> {
      try {
        (void)co_await uring::register_buffers(16, 1024 * 1024);
      } catch (const std::system_error& e) {
        std::printf("%s\n", e.what());
        co_return e.code().value() == ENOMEM ? 0 : 2;
      }
      co_return 1;
    }());
  });
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("could not pin 16384 KiB of registered buffers: the locked-memory limit "
                               "RLIMIT_MEMLOCK (ulimit -l) is 4096 KiB; raise it"),
            std::string::npos)
      << result.output;
}

INSTANTIATE_BACKENDS(FixedBuffers);

}  // namespace
