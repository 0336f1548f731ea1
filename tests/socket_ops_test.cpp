// socket, bind and listen as operations on the ring, on every backend: a listener made by them takes a
// real connection on loopback, a datagram socket made by them carries datagrams, their errors are the
// syscalls' own, the direct form's slot works with the library's recv, and the allowlist names them.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "expect_failure.hpp"
#include "test_util.hpp"

namespace {

using uring::op_kind;
using uring::task;
using uring::test::expect_failure;
using uring::test::starts_with;
using uring::test::unique_fd;
namespace net = uring::net;

// A plain blocking socket whose reads and writes give up after a generous limit rather than hang.
unique_fd plain_socket(int domain, int type) {
  unique_fd fd(::socket(domain, type | SOCK_CLOEXEC, 0));
  EXPECT_GE(fd.get(), 0) << std::strerror(errno);
  const timeval limit{.tv_sec = 20, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  return fd;
}

net::address local_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len), 0) << std::strerror(errno);
  return net::address::from_native(reinterpret_cast<const sockaddr*>(&ss), len);
}

// A plain call on the executor's thread, again while it fails EINTR: the ring's task work interrupts
// blocking calls as a signal does, and a socket with a time limit does not restart them.
template <class F>
auto no_eintr(F call) {
  auto rc = call();
  for (int i = 0; i < 1000 && rc < 0 && errno == EINTR; ++i) rc = call();
  return rc;
}

// connect(2) from a plain blocking socket: 0 or errno. An interrupted TCP handshake goes on: it is
// waited for (20 s at most) and connect asked again for how it ended.
int connect_errno(int fd, const net::address& to) {
  for (int i = 0; i < 100; ++i) {
    if (::connect(fd, to.data(), to.size()) == 0) return 0;
    if (errno == EISCONN) return 0;
    if (errno != EINTR && errno != EALREADY) return errno;
    pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
    if (no_eintr([&] { return ::poll(&p, 1, 20'000); }) == 0) return ETIMEDOUT;
  }
  return EINTR;
}

class SocketOps : public uring::test::backend_test {
 protected:
  [[nodiscard]] std::string path(const std::string& name) const { return dir_.path + "/" + name; }

  uring::test::temp_dir dir_{"uring_socket_ops_test"};
};

TEST_P(SocketOps, AListenerMadeOnTheRingTakesAConnection) {
  run([]() -> task<void> {
    const unique_fd listener(co_await net::open_socket(AF_INET, SOCK_STREAM));
    EXPECT_NE(::fcntl(listener.get(), F_GETFD) & FD_CLOEXEC, 0);  // as every fd the library makes
    co_await net::bind(listener.get(), net::address::ip("127.0.0.1", 0));
    const net::address local = local_address_of(listener.get());
    EXPECT_NE(local.port(), 0);
    EXPECT_EQ(local.to_string().rfind("127.0.0.1:", 0), 0u) << local.to_string();
    co_await net::listen(listener.get(), 16);

    const unique_fd client = plain_socket(AF_INET, SOCK_STREAM);
    EXPECT_EQ(connect_errno(client.get(), local), 0);  // completes once the connection is queued
    const unique_fd served(
        no_eintr([&] { return ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC); }));
    EXPECT_GE(served.get(), 0) << std::strerror(errno);
    EXPECT_EQ(no_eintr([&] { return ::write(client.get(), "hi", 2); }), 2);
    std::array<char, 4> buf{};
    EXPECT_EQ(no_eintr([&] { return ::read(served.get(), buf.data(), buf.size()); }), 2);
    EXPECT_EQ(std::string(buf.data(), 2), "hi");
  }());
}

TEST_P(SocketOps, ADatagramSocketMadeOnTheRingCarriesDatagrams) {
  run([]() -> task<void> {
    const unique_fd fd(co_await net::open_socket(AF_INET, SOCK_DGRAM));
    co_await net::bind(fd.get(), net::address::ip("127.0.0.1", 0));
    const net::address ours = local_address_of(fd.get());
    const timeval limit{.tv_sec = 20, .tv_usec = 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));

    const unique_fd peer = plain_socket(AF_INET, SOCK_DGRAM);
    EXPECT_EQ(::sendto(peer.get(), "ping", 4, 0, ours.data(), ours.size()), 4);
    std::array<char, 16> buf{};
    sockaddr_storage from{};
    socklen_t from_len = sizeof(from);
    EXPECT_EQ(no_eintr([&] {
                return ::recvfrom(fd.get(), buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from),
                                  &from_len);
              }),
              4);
    EXPECT_EQ(std::string(buf.data(), 4), "ping");
    EXPECT_EQ(::sendto(fd.get(), "pong", 4, 0, reinterpret_cast<sockaddr*>(&from), from_len), 4);
    EXPECT_EQ(no_eintr([&] { return ::recv(peer.get(), buf.data(), buf.size(), 0); }), 4);
    EXPECT_EQ(std::string(buf.data(), 4), "pong");
  }());
}

TEST_P(SocketOps, ErrorsAreTheSyscallsOwn) {
  // An address taken by a plain listener (no SO_REUSEADDR on either side).
  const unique_fd taken = plain_socket(AF_INET, SOCK_STREAM);
  const net::address any_port = net::address::ip("127.0.0.1", 0);
  ASSERT_EQ(::bind(taken.get(), any_port.data(), any_port.size()), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(taken.get(), 4), 0);
  const net::address in_use = local_address_of(taken.get());
  // What socket(2) says to a domain that does not exist.
  constexpr int kNoSuchDomain = 4242;
  ASSERT_LT(::socket(kNoSuchDomain, SOCK_STREAM, 0), 0);
  const int bad_domain = errno;
  const unique_fd not_a_socket(::eventfd(0, EFD_CLOEXEC));

  run([&]() -> task<void> {
    const unique_fd fd(co_await net::open_socket(AF_INET, SOCK_STREAM));
    co_await expect_failure([&] { return net::bind(fd.get(), in_use); }, EADDRINUSE, "bind");
    co_await expect_failure([&] { return net::listen(not_a_socket.get()); }, ENOTSOCK, "listen");
    co_await expect_failure([&] { return net::open_socket(kNoSuchDomain, SOCK_STREAM); }, bad_domain,
                            "socket");
    co_await expect_failure([&] { return net::bind(not_a_socket.get(), any_port); }, ENOTSOCK, "bind");
  }());
}

TEST_P(SocketOps, ADirectSocketIsBoundAndListensInItsSlot) {
  const std::string dgram_path = path("dgram");
  const std::string stream_path = path("stream");
  uring::executor_options o = options();
  o.direct_files = 4;
  uring::executor ex(o);
  ex.run([&]() -> task<void> {
    // A datagram socket in a slot, bound there: a datagram sent to its path comes out of recv on the slot.
    const uring::direct_fd dgram = co_await net::open_socket_direct(AF_UNIX, SOCK_DGRAM);
    co_await net::bind(dgram, net::address::unix_path(dgram_path));
    const unique_fd peer = plain_socket(AF_UNIX, SOCK_DGRAM);
    const net::address to = net::address::unix_path(dgram_path);
    EXPECT_EQ(::sendto(peer.get(), "ping", 4, 0, to.data(), to.size()), 4);
    std::array<char, 16> buf{};
    EXPECT_EQ(co_await uring::recv(dgram, uring::mutable_buffer(buf.data(), buf.size())), 4u);
    EXPECT_EQ(std::string(buf.data(), 4), "ping");

    // A stream socket in a slot, listening there: a plain client's connect is queued, not refused.
    const uring::direct_fd stream = co_await net::open_socket_direct(AF_UNIX, SOCK_STREAM);
    EXPECT_NE(stream, dgram);
    co_await net::bind(stream, net::address::unix_path(stream_path));
    const unique_fd before = plain_socket(AF_UNIX, SOCK_STREAM);
    EXPECT_EQ(connect_errno(before.get(), net::address::unix_path(stream_path)), ECONNREFUSED);
    co_await net::listen(stream, 4);
    const unique_fd client = plain_socket(AF_UNIX, SOCK_STREAM);
    EXPECT_EQ(connect_errno(client.get(), net::address::unix_path(stream_path)), 0);

    co_await uring::close_direct(dgram);
    co_await uring::close_direct(stream);
  }());
}

TEST_P(SocketOps, TheDirectFormNeedsATable) {
  run([]() -> task<void> {
    try {
      (void)co_await net::open_socket_direct(AF_INET, SOCK_STREAM);
      ADD_FAILURE() << "open_socket_direct without a table did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ENXIO) << e.what();
      EXPECT_TRUE(starts_with(e.what(), "uring::socket_direct(")) << e.what();
    }
  }());
}

TEST_P(SocketOps, AFullTableRefusesTheDirectFormAndClosesTheSocket) {
  uring::executor_options o = options();
  o.direct_files = 1;
  uring::executor ex(o);
  ex.run([]() -> task<void> {
    const uring::direct_fd only = co_await net::open_socket_direct(AF_INET, SOCK_DGRAM);
    try {
      (void)co_await net::open_socket_direct(AF_INET, SOCK_DGRAM);
      ADD_FAILURE() << "open_socket_direct into a full table did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), ENFILE) << e.what();
    }
    co_await uring::close_direct(only);
  }());  // the fd leak check of every test sees no socket left behind
}

TEST_P(SocketOps, TheAllowlistRefusesEachUnlisted) {
  uring::executor_options o = options();
  o.allowed_ops = {op_kind::socket};
  uring::executor ex(o);
  ex.run([&]() -> task<void> {
    const unique_fd fd(co_await net::open_socket(AF_INET, SOCK_STREAM));
    EXPECT_EQ((co_await net::bind(fd.get(), net::address::ip("127.0.0.1", 0)).nothrow()).res, -EACCES);
    EXPECT_EQ((co_await net::listen(fd.get()).nothrow()).res, -EACCES);
    try {
      co_await net::listen(fd.get());
      ADD_FAILURE() << "listen was not refused";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EACCES);
      EXPECT_TRUE(starts_with(e.what(), "listen: ")) << e.what();
    }
    // Nothing refused reached the socket: it has no address yet.
    EXPECT_EQ(local_address_of(fd.get()).port(), 0);
  }());
  EXPECT_EQ(ex.stats().started(op_kind::socket), 1u);
}

INSTANTIATE_BACKENDS(SocketOps);

TEST(SocketOpTable, EachKindIsNamedAfterItsKernelOperation) {
  EXPECT_STREQ(uring::to_string(op_kind::socket), "socket");
  EXPECT_STREQ(uring::to_string(op_kind::socket_direct), "socket_direct");
  EXPECT_STREQ(uring::to_string(op_kind::bind), "bind");
  EXPECT_STREQ(uring::to_string(op_kind::listen), "listen");
  const uring::op_allowlist list{op_kind::bind, op_kind::listen};
  EXPECT_TRUE(list.allows(op_kind::listen));
  EXPECT_FALSE(list.allows(op_kind::socket));
  EXPECT_EQ(uring::to_string(list), "bind,listen");
}

}  // namespace
