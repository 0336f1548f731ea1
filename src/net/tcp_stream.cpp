// tcp_stream.cpp — the composite stream operations: connect_to, read_exactly, write_all (zero-copy for large
// buffers), send_file; and what the socket says of the peer (unacknowledged).
#include "uring/net/tcp_stream.hpp"
#include "executor/executor_state.hpp"

#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <stop_token>
#include <string>
#include <system_error>

#include "net/zc_step.hpp"
#include "uring/detail/deadline.hpp"
#include "uring/io.hpp"
#include "uring/owned_fd.hpp"

namespace uring::net {

namespace {
// write_all sends buffers of this size and up by IORING_OP_SEND_ZC where the executor has it, smaller ones
// by a copying send: below that, pinning pages and the second completion cost more than copying them
// (bench/README.md, "Zero-copy sends by size"). A real NIC only widens the gap in its favour for large sends.
constexpr std::size_t kZeroCopyThreshold = 64 * 1024;

// The awaiting task's limits as they stand, without suspending: none (no stop token that can stop, no
// deadline), live, or passed (a stop was asked for, or the deadline is behind us).
enum class limits { none, live, passed };
struct limits_now {
  limits seen = limits::none;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) noexcept {
    if constexpr (detail::has_stop_token<Promise>) {
      const std::stop_token& stop = h.promise().stop_token();
      const detail::deadline* d = detail::deadline_of(h.promise());
      if (stop.stop_requested() || (d != nullptr && d->at_ns() <= detail::monotonic_ns())) {
        seen = limits::passed;
      } else if (stop.stop_possible() || d != nullptr) {
        seen = limits::live;
      }
    }
    return false;
  }
  limits await_resume() const noexcept { return seen; }
};

// A send that cannot wait (MSG_DONTWAIT: what the socket has room for now, else EAGAIN), awaited outside
// the task's limits: it needs neither a linked timeout nor a canceller, which natively are an SQE and
// an allocation each per send.
struct send_now {
  detail::io_awaitable<std::size_t, false> op;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) { return op.await_suspend(h); }
  io_result await_resume() { return op.await_resume(); }
};
send_now send_now_on(int fd, const_buffer buf) noexcept {
  return {{"write_all",
           {.code = detail::op_code::send,
            .fd = fd,
            .len = detail::clamp_len(buf.size()),
            .op_flags = MSG_NOSIGNAL | MSG_DONTWAIT,
            .addr = const_cast<void*>(buf.data())}}};
}
}  // namespace

tcp_stream tcp_stream::open(int family) { return tcp_stream(open_fd(family, SOCK_STREAM)); }

task<tcp_stream> tcp_stream::connect_to(address peer) {
  tcp_stream s = open(peer.family());
  co_await s.connect(peer);
  co_return s;
}

task<void> tcp_stream::read_exactly(mutable_buffer buf) const {
  auto* p = static_cast<std::byte*>(buf.data());
  std::size_t done = 0;
  while (done < buf.size()) {
    io_result r = co_await read_some(mutable_buffer(p + done, buf.size() - done)).nothrow();
    if (!r) throw_errno(-r.res, "read_exactly");
    if (r.res == 0) {
      throw std::system_error(ENODATA, std::system_category(),
                              "read_exactly: end of stream after " + std::to_string(done) + " of " +
                                  std::to_string(buf.size()) + " bytes");
    }
    done += static_cast<std::size_t>(r.res);
  }
}

task<void> tcp_stream::write_all(const_buffer buf) const {
  const auto* p = static_cast<const std::byte*>(buf.data());
  std::size_t done = 0;
  if (buf.size() >= kZeroCopyThreshold &&
      detail::executor_core::zero_copy_send(detail::executor_access::current("write_all"))) {
    while (done < buf.size()) {
      io_result r = co_await detail::send_zc_step(fd(), const_buffer(p + done, buf.size() - done));
      if (r.res == -EOPNOTSUPP) break;  // a socket without zero-copy (unix-domain): the rest by copy
      if (!r) throw_errno(-r.res, "write_all");
      done += static_cast<std::size_t>(r.res);
    }
  }
  // Under a time limit or a stop token, a first send that cannot wait takes what the socket has room
  // for (mostly all of it) without the limits' cost; only what is left waits, within them. Limits
  // already passed skip it: the sends below then fail at once, and nothing goes out.
  if (done < buf.size() && co_await limits_now{} == limits::live) {
    io_result r = co_await send_now_on(fd(), const_buffer(p + done, buf.size() - done));
    if (!r && r.res != -EAGAIN) throw_errno(-r.res, "write_all");
    if (r) done += static_cast<std::size_t>(r.res);
  }
  while (done < buf.size()) {
    io_result r = co_await write_some(const_buffer(p + done, buf.size() - done)).nothrow();
    if (!r) throw_errno(-r.res, "write_all");
    done += static_cast<std::size_t>(r.res);
  }
}

task<void> tcp_stream::write_all_zc(const_buffer buf) const {
  const auto* p = static_cast<const std::byte*>(buf.data());
  for (std::size_t done = 0; done < buf.size();)
    done += co_await send_zc(const_buffer(p + done, buf.size() - done));
}

namespace {
// One splice of up to `len` bytes from `in` (at `offset`, or kCurrentPosition) to `out`.
detail::io_awaitable<std::size_t> splice(int in, std::uint64_t offset, int out, std::size_t len) {
  return {"send_file",
          {.code = detail::op_code::splice,
           .fd = out,
           .len = detail::clamp_len(len),
           .op_flags = SPLICE_F_MOVE,
           .offset = offset,
           .aux = static_cast<std::uint64_t>(in)}};
}
}  // namespace

task<std::size_t> tcp_stream::send_file(int file_fd, std::uint64_t offset, std::size_t len) const {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(errno, "send_file: pipe2");
  const owned_fd from_pipe(fds[0]), to_pipe(fds[1]);
  // A pipe holds 64 KiB by default; a larger one moves more per pair of splices (best effort: the
  // unprivileged limit is /proc/sys/fs/pipe-max-size).
  (void)::fcntl(to_pipe.get(), F_SETPIPE_SZ, 1 << 20);
  // A splice into a socket the peer does not read blocks in an io-wq worker, where a linked timeout
  // does not reach it: the task's deadline ends it by a cancel instead, through the token it stops.
  const detail::wait_stop stop = co_await detail::awaiting_stop{};
  std::size_t done = 0;
  while (done < len) {
    std::size_t in_pipe = co_await splice(file_fd, offset + done, to_pipe.get(), len - done);
    if (in_pipe == 0) break;  // the file ended
    for (std::size_t out = 0; out < in_pipe;) {
      out += co_await uring::with_stop_token(
          splice(from_pipe.get(), detail::kCurrentPosition, fd(), in_pipe - out), stop.token());
    }
    done += in_pipe;
  }
  co_return done;
}

void tcp_stream::set_nodelay(bool on) { set_option(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0); }

std::size_t tcp_stream::unacknowledged() const noexcept {
  int n = 0;
  return ::ioctl(fd(), SIOCOUTQ, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
}

}  // namespace uring::net
