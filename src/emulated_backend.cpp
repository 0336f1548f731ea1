// emulated_backend.cpp — the backend contract without io_uring: for kernels that lack it, for seccomp
// profiles that block it (Docker's default), and for tests that force it.
//
// Operations are attempted at submission with non-blocking syscalls (RWF_NOWAIT, MSG_DONTWAIT, so the
// caller's fd flags are not touched; only accept and connect, which have no such per-call flag, switch a
// blocking socket to non-blocking for the duration of the call). A multishot accept accepts everything
// waiting, posting each connection flagged kCqeMore, and waits on. One that would block waits for readiness in epoll and is retried when its fd
// is ready. Regular files cannot be waited for with epoll (EPERM), so their I/O completes synchronously
// at submission, as io-wq would complete it later — the documented difference (docs/emulation.md).
// Deadlines (timeouts, linked timeouts) sit in a heap and bound the epoll wait. Completions are queued in
// the order they happen and reaped like CQEs.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string_view>
#include <deque>
#include <functional>
#include <queue>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "uring/error.hpp"

namespace uring::detail {

namespace {

// A read or write as io_uring would do it. With RWF_NOWAIT (`flags`) it never blocks: -EAGAIN then
// means "wait for readiness". Without, it is for fds epoll cannot watch (regular files), which complete
// synchronously, and for files whose driver does not know RWF_NOWAIT.
int do_rw(const io_request& r, int flags) {
  iovec iov{r.addr, r.len};
  auto off = static_cast<off_t>(r.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(r.offset));
  for (;;) {
    ssize_t n = r.code == op_code::read ? ::preadv2(r.fd, &iov, 1, off, flags) : ::pwritev2(r.fd, &iov, 1, off, flags);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    // io_uring ignores the offset of a stream (pipe, socket); the syscall refuses it.
    if (errno == ESPIPE && off != -1) {
      off = -1;
      continue;
    }
    return -errno;
  }
}
int blocking_rw(const io_request& r) { return do_rw(r, 0); }

// Runs `f` (a syscall returning -1 and errno on failure) with `fd` non-blocking, and gives its result as
// io_uring would: the value, or -errno. accept(2) and connect(2) have no per-call MSG_DONTWAIT, so a
// blocking socket (the library's own are blocking, as io_uring prefers) is switched for the call only.
template <class F>
int nonblocking(int fd, F f) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  const bool toggle = (flags & O_NONBLOCK) == 0;
  if (toggle && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -errno;
  int rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  const int err = errno;
  if (toggle) ::fcntl(fd, F_SETFL, flags);
  return rc < 0 ? -err : rc;
}

template <class F>
int retry_eintr(F f) {
  long rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  return rc < 0 ? -errno : static_cast<int>(rc);
}

// recv or send with MSG_WAITALL, as io_uring does it: on until the whole buffer is done, the stream
// ends or an error comes; with bytes done, their count is the result then. Progress lives in the request
// (addr and len advance; offset, unused by recv and send, counts the bytes done), so that the operation
// can wait in epoll between tries. `once` is one non-blocking try on r's current addr and len.
template <class F>
int transfer_all(io_request& r, F once) {
  for (;;) {
    const int n = retry_eintr(once);
    if (n > 0 && n < static_cast<int>(r.len)) {
      r.addr = static_cast<char*>(r.addr) + n;
      r.len -= static_cast<std::uint32_t>(n);
      r.offset += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == -EAGAIN || (n < 0 && r.offset == 0)) return n;
    return static_cast<int>(r.offset) + std::max(n, 0);
  }
}

// One non-blocking attempt at an operation that waits for readiness: -EAGAIN means "wait in epoll".
int attempt(io_request& r) {
  switch (r.code) {
    case op_code::read:
    case op_code::write:
      return do_rw(r, RWF_NOWAIT);
    case op_code::recv:
    case op_code::send:
    case op_code::send_zc: {  // a copy: the buffer is free again as soon as this returns
      const int flags = static_cast<int>(r.op_flags) | MSG_DONTWAIT;
      auto once = [&] {
        return r.code == op_code::recv ? ::recv(r.fd, r.addr, r.len, flags) : ::send(r.fd, r.addr, r.len, flags);
      };
      return (r.op_flags & MSG_WAITALL) != 0 ? transfer_all(r, once) : retry_eintr(once);
    }
    case op_code::recvmsg:
      return retry_eintr(
          [&] { return ::recvmsg(r.fd, static_cast<msghdr*>(r.addr), static_cast<int>(r.op_flags) | MSG_DONTWAIT); });
    case op_code::sendmsg:
      return retry_eintr([&] {
        return ::sendmsg(r.fd, static_cast<const msghdr*>(r.addr), static_cast<int>(r.op_flags) | MSG_DONTWAIT);
      });
    case op_code::accept:
    case op_code::accept_multishot:
    case op_code::accept_direct:  // op_flags: SOCK_CLOEXEC, as the table's dups have
    case op_code::accept_multishot_direct:
      return nonblocking(r.fd, [&] {
        return ::accept4(r.fd, static_cast<sockaddr*>(r.addr), reinterpret_cast<socklen_t*>(r.aux),
                         static_cast<int>(r.op_flags));
      });
    case op_code::splice: {
      // Non-blocking on both ends: SPLICE_F_NONBLOCK covers the pipe; a socket output is switched for the
      // call (splice has no per-call flag for it), as accept and connect are.
      loff_t off = static_cast<loff_t>(r.offset);
      loff_t* off_in = r.offset == kCurrentPosition ? nullptr : &off;
      return nonblocking(r.fd, [&] {
        return static_cast<int>(::splice(static_cast<int>(r.aux), off_in, r.fd, nullptr, r.len,
                                         r.op_flags | SPLICE_F_NONBLOCK));
      });
    }
    case op_code::connect: {
      // The first call starts the handshake; a later one (once epoll says writable) reports how it went:
      // EISCONN when it succeeded, the socket's error when it failed, EALREADY while it is still going.
      int rc = nonblocking(r.fd, [&] { return ::connect(r.fd, static_cast<const sockaddr*>(r.addr), r.len); });
      if (rc == -EINPROGRESS || rc == -EALREADY) return -EAGAIN;
      if (rc == -EISCONN) return 0;
      return rc;
    }
    default:
      return -EINVAL;
  }
}

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

std::int64_t to_ns(const timespec64& t) { return t.tv_sec * 1'000'000'000LL + t.tv_nsec; }

// The synchronous operations: what io-wq would do in a worker, done at submission. `in_worker` says
// whether the kernel would have run it in a worker (not inline), which is what an async-only eventfd
// signals for.
int run_sync(const io_request& r, bool& in_worker) {
  in_worker = r.code != op_code::close && r.code != op_code::shutdown;  // both done inline natively
  long rc = -1;
  switch (r.code) {
    case op_code::openat: {
      // io_uring first tries an open inline with O_NONBLOCK added (cleared again on the new file), unless
      // O_CREAT, O_TRUNC or O_TMPFILE send it straight to io-wq; only an EAGAIN sends it there. So a FIFO
      // opens at once for reading and fails with ENXIO for writing when nobody reads, where open(2)
      // would wait for the other end. Do the same, rather than block the executor thread.
      const auto path = static_cast<const char*>(r.addr);
      const int flags = static_cast<int>(r.op_flags);
      const bool inline_first = (flags & (O_CREAT | O_TRUNC | O_TMPFILE)) == 0;
      rc = ::openat(r.fd, path, inline_first ? flags | O_NONBLOCK : flags, r.len);
      in_worker = !inline_first;
      if (rc < 0 && inline_first && errno == EAGAIN) {
        rc = ::openat(r.fd, path, flags, r.len);
        in_worker = true;
      }
      if (rc >= 0 && (flags & O_NONBLOCK) == 0) {
        const int now = ::fcntl(static_cast<int>(rc), F_GETFL);
        if (now >= 0 && (now & O_NONBLOCK) != 0) ::fcntl(static_cast<int>(rc), F_SETFL, now & ~O_NONBLOCK);
      }
      break;
    }
    case op_code::close:
      rc = ::close(r.fd);
      // close() releases the fd even when it reports EINTR; io_uring's close says 0 then too.
      if (rc != 0 && errno == EINTR) rc = 0;
      break;
    case op_code::statx:
      rc = ::statx(r.fd, static_cast<const char*>(r.addr), static_cast<int>(r.op_flags), r.len,
                   reinterpret_cast<struct statx*>(r.aux));
      break;
    case op_code::fsync:
      rc = (r.op_flags & 1u) ? ::fdatasync(r.fd) : ::fsync(r.fd);
      break;
    case op_code::shutdown:
      rc = ::shutdown(r.fd, static_cast<int>(r.len));
      break;
    default:
      return -EINVAL;
  }
  return rc < 0 ? -errno : static_cast<int>(rc);
}

class emulated_backend final : public backend {
 public:
  emulated_backend(const executor_options& opts, executor_stats& stats)
      : stats_(stats), refused_(opts.allowed_ops.refused_bits() & ~kExecutorOwnOps), direct_(opts.direct_files, -1) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw std::system_error(errno, std::system_category(), "emulated backend: epoll_create1");
  }
  ~emulated_backend() override {
    for (int fd : direct_) {
      if (fd >= 0) ::close(fd);
    }
    for (int fd : closing_) ::close(fd);
    ::close(epoll_fd_);
    if (timer_fd_ >= 0) ::close(timer_fd_);
  }
  emulated_backend(const emulated_backend&) = delete;
  emulated_backend& operator=(const emulated_backend&) = delete;

  void submit(operation* first, bool wait) override {
    for (operation* op = first; op != nullptr;) {
      operation* next = op->next;
      if (completes_early(op->state)) [[unlikely]] {
        post(*op, early_result(op->state));
      } else if ((refused_ >> static_cast<unsigned>(op->request.code)) & 1u) [[unlikely]] {
        // What the kernel does with an SQE its restrictions refuse: the operation fails, -EACCES. (The
        // executor refuses such operations before they get here; this keeps the contract the same.)
        op->state = op_state::submitted;
        post(*op, -EACCES);
      } else {
        op->state = op_state::submitted;
        ++stats_.sqes;
        ++stats_.ops[static_cast<std::size_t>(op->request.code)];
        start(*op);
      }
      op = next;
    }
    // Waiting operations complete "in the background" natively; here they progress whenever the loop
    // turns: a quick look if there is other work, a wait until the next deadline if there is none.
    if (!waiting_.empty()) wait_for_events(wait && done_.empty());
    signal_eventfd();
    if (timer_fd_ >= 0) arm_foreign_timer();
  }

  std::size_t reap(completion* out, std::size_t max) override {
    std::size_t n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }

  void flush() override {}  // nothing is ever queued here
  void flush_if_alone() override {}

  bool poll_completions() override {
    // Waiting operations progress only when we look (epoll_wait without a timeout): every 32 calls.
    if (done_.empty() && !waiting_.empty() && ++polls_ % 32 == 0) wait_for_events(false);
    return !done_.empty();
  }

  void cancel(operation& target) override {
    ++stats_.cancels;
    if (waiting_.count(&target) == 0) return;  // already completed: like the kernel's -ENOENT
    unpark(target);
    post(target, -ECANCELED);
  }

  void cancel_all() override {
    while (!waiting_.empty()) cancel(*waiting_.begin()->first);
    timers_ = {};
  }

  void send_message(int, std::uint64_t, std::uint64_t) override {
    throw std::logic_error("emulated backend: MSG_RING is not available; use the mailbox");
  }
  void make_sq_room() override { throw std::logic_error("emulated backend: there is no SQ to write in place"); }
  int ring_fd() const noexcept override { return -1; }

  // The eventfd slot, as the kernel keeps it: one fd, signalled once per turn that posted completions.
  int register_eventfd(int fd, bool async_only) override {
    if (eventfd_ >= 0) return -EBUSY;
    if (int r = check_eventfd(fd); r != 0) return r;
    eventfd_ = fd;
    eventfd_async_ = async_only;
    eventfd_on_ = true;
    posted_ = posted_in_worker_ = false;
    return 0;
  }
  int unregister_eventfd() override {
    if (eventfd_ < 0) return -ENXIO;
    eventfd_ = -1;
    return 0;
  }
  int enable_eventfd(bool on) override {
    eventfd_on_ = on;
    return 0;
  }
  // Nothing here progresses in the background: the foreign loop watches our epoll fd, which holds what
  // we wait for, the executor's eventfd (posts from other threads, completions) and a timerfd kept at
  // the earliest deadline.
  int foreign_watch_fd(int notify) override {
    if (timer_fd_ >= 0) return epoll_fd_;
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) return -errno;
    for (int fd : {notify, timer_fd_}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return -errno;
    }
    notify_fd_ = notify;
    return epoll_fd_;
  }

  int empty_slot(unsigned index) override { return close_direct(static_cast<int>(index)); }
  // Provided buffers are a kernel feature: the library falls back to receiving into its own pool.
  int register_buf_ring(void*, unsigned, std::uint16_t) override { return -EOPNOTSUPP; }
  int unregister_buf_ring(std::uint16_t) override { return -EOPNOTSUPP; }

  bool registered_ring() const noexcept override { return false; }
  ring_flags active_flags() const noexcept override { return ring_flags::none; }
  ring_flags dropped_flags() const noexcept override { return ring_flags::none; }

 private:
  struct fd_state {
    std::deque<operation*> readers;  // FIFO, as the kernel serves waiters of one file
    std::deque<operation*> writers;
    std::deque<operation*> pollers;
    std::uint32_t events = 0;  // what epoll watches for this fd now
  };
  // A deadline: a timeout operation's expiry, or a linked timeout that cancels its operation.
  struct timer {
    std::int64_t deadline_ns;
    operation* op;
    std::uint64_t wait_id;  // the wait it belongs to; a timer whose wait has ended is stale
    bool operator>(const timer& o) const { return deadline_ns > o.deadline_ns; }
  };

  // `in_worker`: the kernel would have completed it in an io-wq worker (see run_sync).
  void post(operation& op, int res, std::uint32_t flags = 0, bool in_worker = false) {
    if (op.request.code == op_code::accept_direct && res >= 0) res = adopt_direct(res);
    done_.push_back(completion{reinterpret_cast<std::uint64_t>(&op), res, flags});
    posted_ = true;
    posted_in_worker_ |= in_worker;
  }

  // The kernel signals the eventfd when it posts completions (async-only: from a worker); the emulation
  // posts a turn's completions together, so it signals once per turn.
  void signal_eventfd() {
    if (eventfd_ >= 0 && eventfd_on_ && (eventfd_async_ ? posted_in_worker_ : posted_)) {
      std::uint64_t one = 1;
      (void)!::write(eventfd_, &one, sizeof one);
    }
    posted_ = posted_in_worker_ = false;
  }

  // A real eventfd, or the errno the kernel's registration would give.
  static int check_eventfd(int fd) {
    if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return -EBADF;
    char path[32];
    char target[64] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(path, target, sizeof target - 1);
    if (n < 0) return -errno;
    return std::string_view(target, static_cast<std::size_t>(n)) == "anon_inode:[eventfd]" ? 0 : -EINVAL;
  }

  // Keeps the timerfd of a foreign loop at the earliest live deadline (disarmed when there is none).
  void arm_foreign_timer() {
    drop_stale_timers();
    std::int64_t deadline = timers_.empty() ? 0 : std::max<std::int64_t>(1, timers_.top().deadline_ns);
    if (deadline == armed_deadline_) return;
    itimerspec spec{};
    spec.it_value = {static_cast<time_t>(deadline / 1'000'000'000), static_cast<long>(deadline % 1'000'000'000)};
    if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0) armed_deadline_ = deadline;
  }

  void start(operation& op) {
    const io_request& r = op.request;
    if (r.direct) [[unlikely]] {
      if (r.code == op_code::close) return post(op, close_direct(r.fd));
      // The slot's file, as the kernel looks it up when the operation is issued.
      const int fd = r.fd >= 0 && static_cast<std::size_t>(r.fd) < direct_.size() ? direct_[r.fd] : -1;
      if (fd < 0) return post(op, -EBADF);
      op.request.fd = fd;
      op.request.direct = false;
    }
    switch (r.code) {
      case op_code::nop:
        post(op, 0);
        return;
      case op_code::read:
      case op_code::write:
      case op_code::recv:
      case op_code::send:
      case op_code::send_zc:
      case op_code::recvmsg:
      case op_code::sendmsg:
      case op_code::accept:
      case op_code::accept_direct:
      case op_code::connect:
      case op_code::splice:
        start_rw(op);
        return;
      case op_code::accept_multishot:
      case op_code::accept_multishot_direct:
        start_multishot(op);
        return;
      case op_code::cancel_fd:
        post(op, cancel_fd(r.fd));
        return;
      case op_code::install_direct:
        post(op, install_direct(*static_cast<int*>(r.addr)));
        return;
      case op_code::plain_fd:  // the slot's file was looked up above, as the kernel does
        post(op, retry_eintr([&] { return ::fcntl(r.fd, F_DUPFD_CLOEXEC, 0); }));
        return;
      case op_code::send_direct:
        break;  // no other ring to send to: send_direct takes the mailbox road here (-EINVAL below)
      case op_code::recv_multishot:
        break;  // no provided buffers here (register_buf_ring refuses): -EINVAL below
      case op_code::poll: {
        pollfd p{r.fd, static_cast<short>(r.op_flags), 0};
        if (::poll(&p, 1, 0) > 0) {
          post(op, (p.revents & POLLNVAL) ? -EBADF : p.revents);
        } else if (!park_on_fd(op, fds_[r.fd].pollers)) {
          post(op, -EBADF);
        }
        return;
      }
      case op_code::timeout: {
        const auto& t = *static_cast<const timespec64*>(r.addr);
        std::int64_t deadline = (r.op_flags & kTimeoutAbsolute) ? to_ns(t) : now_ns() + to_ns(t);
        timers_.push(timer{deadline, &op, park(op)});
        return;
      }
      case op_code::openat:
      case op_code::close:
      case op_code::statx:
      case op_code::fsync:
      case op_code::shutdown: {
        bool in_worker = false;
        int res = run_sync(r, in_worker);
        post(op, res, 0, in_worker);
        return;
      }
    }
    post(op, -EINVAL);
  }

  void start_rw(operation& op) {
    io_request& r = op.request;
    // Later operations on an fd queue behind earlier ones, as they would in the kernel.
    auto it = fds_.find(r.fd);
    bool behind = it != fds_.end() && !list_for(it->second, r.code).empty();
    const bool rw = r.code == op_code::read || r.code == op_code::write;
    // A socket operation asked not to wait (MSG_DONTWAIT in its flags) tries once and fails with EAGAIN,
    // as io_uring's does (REQ_F_NOWAIT: no poll is armed for it, and it queues behind nothing).
    const bool dontwait = !rw && r.code != op_code::accept && r.code != op_code::accept_direct &&
                          r.code != op_code::connect && r.code != op_code::splice &&
                          (r.op_flags & MSG_DONTWAIT) != 0;
    int res = behind && !dontwait ? -EAGAIN : attempt(r);
    if (res == -EAGAIN && dontwait) {
      post(op, res);
      return;
    }
    bool in_worker = false;  // the kernel would have punted it to io-wq
    if (res == -EAGAIN) {
      if (park_on_fd(op, list_for(fds_[r.fd], r.code))) return;
      // epoll cannot watch this fd (a regular file): complete synchronously. Sockets it always watches.
      if (!rw) {
        post(op, -EBADF);
        return;
      }
      res = blocking_rw(r);
      in_worker = true;
    } else if (res == -EOPNOTSUPP && rw) {
      res = blocking_rw(r);
      in_worker = true;
    }
    post(op, res, 0, in_worker);
  }

  // A multishot accept: every connection waiting now completes at once (flagged kCqeMore), then the
  // operation waits for more in epoll. Only an error (or a cancel) ends it.
  void start_multishot(operation& op) {
    auto it = fds_.find(op.request.fd);
    bool behind = it != fds_.end() && !it->second.readers.empty();
    if (!behind && accept_all(op)) return;
    if (!park_on_fd(op, fds_[op.request.fd].readers)) post(op, -EBADF);
  }

  // Accepts until the backlog is empty (false: the operation goes on) or an error ends it (true, posted).
  bool accept_all(operation& op) {
    for (;;) {
      int fd = attempt(op.request);
      if (fd == -EAGAIN) return false;
      // Into a slot: a full table closes the connection and ends the request, as the kernel's does.
      if (fd >= 0 && op.request.code == op_code::accept_multishot_direct) fd = adopt_direct(fd);
      if (fd < 0) {
        post(op, fd);
        return true;
      }
      post(op, fd, kCqeMore);
    }
  }

  // IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL: every waiting operation on `fd` completes -ECANCELED.
  int cancel_fd(int fd) {
    std::vector<operation*> victims;
    for (const auto& [op, id] : waiting_) {
      if (op->request.code != op_code::timeout && op->request.fd == fd) victims.push_back(op);
    }
    for (operation* v : victims) {
      unpark(*v);
      post(*v, -ECANCELED);
    }
    return victims.empty() ? -ENOENT : static_cast<int>(victims.size());
  }

  static std::deque<operation*>& list_for(fd_state& st, op_code code) {
    switch (code) {
      case op_code::read:
      case op_code::recv:
      case op_code::recvmsg:
      case op_code::accept:
      case op_code::accept_multishot:
      case op_code::accept_direct:
      case op_code::accept_multishot_direct:
        return st.readers;
      case op_code::write:
      case op_code::send:
      case op_code::send_zc:
      case op_code::sendmsg:
      case op_code::connect:
      case op_code::splice:  // waits for its output to take more
        return st.writers;
      default:
        return st.pollers;
    }
  }

  // Records that `op` waits, arming its linked timeout if it has one. Returns the wait's id.
  std::uint64_t park(operation& op) {
    std::uint64_t id = ++last_wait_id_;
    waiting_[&op] = id;
    if (op.request.link_timeout != nullptr) {
      timers_.push(timer{now_ns() + to_ns(*op.request.link_timeout), &op, id});
    }
    return id;
  }

  // Queues `op` until its fd is ready. False when epoll cannot watch the fd.
  bool park_on_fd(operation& op, std::deque<operation*>& list) {
    const int fd = op.request.fd;
    list.push_back(&op);
    fd_state& st = fds_[fd];
    if (!update_interest(fd, st)) {
      list.pop_back();
      if (st.readers.empty() && st.writers.empty() && st.pollers.empty()) forget(fds_.find(fd));
      return false;
    }
    park(op);
    return true;
  }

  // Forgets that `op` waits (it is about to complete).
  void unpark(operation& op) {
    waiting_.erase(&op);
    const io_request& r = op.request;
    if (r.code == op_code::timeout) return;  // its timer goes stale
    auto it = fds_.find(r.fd);
    if (it == fds_.end()) return;
    auto& list = list_for(it->second, r.code);
    for (auto i = list.begin(); i != list.end(); ++i) {
      if (*i == &op) {
        list.erase(i);
        break;
      }
    }
    settle(it);
  }

  // Makes epoll watch exactly what an fd's waiters need, and forgets fds nobody waits on.
  void settle(std::unordered_map<int, fd_state>::iterator it) {
    update_interest(it->first, it->second);
    fd_state& st = it->second;
    if (st.readers.empty() && st.writers.empty() && st.pollers.empty()) forget(it);
  }

  // Nobody waits on the fd any more; if it is the file of a closed direct slot, it goes now.
  void forget(std::unordered_map<int, fd_state>::iterator it) {
    const int fd = it->first;
    fds_.erase(it);
    if (closing_.erase(fd) != 0) ::close(fd);
  }

  // Direct descriptors: `fd` becomes the table's own, in the lowest free slot (where the kernel's
  // IORING_FILE_INDEX_ALLOC picks its own). Returns the slot; without room, closes fd and returns -ENFILE
  // (the kernel's answer, also for a missing table).
  int adopt_direct(int fd) {
    auto slot = std::find(direct_.begin(), direct_.end(), -1);
    if (slot == direct_.end()) {
      ::close(fd);
      return -ENFILE;
    }
    *slot = fd;
    return static_cast<int>(slot - direct_.begin());
  }
  // install_direct: a slot holds a duplicate of the fd, so the caller's fd stays its own, as the kernel's
  // table holds its own reference to the file. The slot is written over `fd`; the result is the count
  // installed.
  int install_direct(int& fd) {
    if (direct_.empty()) return -ENXIO;
    const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return -errno;
    const int slot = adopt_direct(dup);
    if (slot < 0) return slot;
    fd = slot;
    return 1;
  }
  // Empties a slot. Operations waiting on its file keep it, as in the kernel: it is closed once the last
  // of them is done (forget).
  int close_direct(int index) {
    if (index < 0 || static_cast<std::size_t>(index) >= direct_.size() || direct_[index] < 0) return -EBADF;
    const int fd = std::exchange(direct_[index], -1);
    if (fds_.count(fd) != 0) {
      closing_.insert(fd);
    } else {
      ::close(fd);
    }
    return 0;
  }

  // False if the fd cannot be watched.
  bool update_interest(int fd, fd_state& st) {
    std::uint32_t want = (st.readers.empty() ? 0u : std::uint32_t{EPOLLIN}) |
                         (st.writers.empty() ? 0u : std::uint32_t{EPOLLOUT});
    for (operation* p : st.pollers) want |= p->request.op_flags;
    if (want == st.events) return true;
    epoll_event ev{};
    ev.events = want;
    ev.data.fd = fd;
    int rc;
    if (want == 0) {
      rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    } else if (st.events == 0) {
      rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
      if (rc != 0 && errno == EEXIST) rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
    } else {
      rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
      // The fd was closed and its number reused since we registered it: register afresh.
      if (rc != 0 && errno == ENOENT) rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    }
    if (rc != 0 && want != 0) return false;
    st.events = want;
    return true;
  }

  void wait_for_events(bool block) {
    timespec timeout{0, 0};
    timespec* timeout_ptr = &timeout;
    drop_stale_timers();
    if (block) {
      if (timers_.empty()) {
        timeout_ptr = nullptr;  // only an fd (or the executor's wake-up eventfd) can end this wait
      } else {
        std::int64_t left = std::max<std::int64_t>(0, timers_.top().deadline_ns - now_ns());
        timeout = {static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
      }
    }
    epoll_event events[64];
    ++stats_.enters;
    if (block) ++stats_.waits;
    int n = ::epoll_pwait2(epoll_fd_, events, 64, timeout_ptr, nullptr);
    if (n < 0) {
      if (errno != EINTR) throw std::system_error(errno, std::system_category(), "emulated backend: epoll_pwait2");
      n = 0;  // a signal: the loop turns and comes back
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == timer_fd_ || events[i].data.fd == notify_fd_) {
        drain_foreign_fd(events[i].data.fd);
        continue;
      }
      auto it = fds_.find(events[i].data.fd);
      if (it == fds_.end()) continue;
      std::uint32_t e = events[i].events;
      bool broken = e & (EPOLLERR | EPOLLHUP);
      if (e & EPOLLIN || broken) retry(it->second.readers);
      if (e & EPOLLOUT || broken) retry(it->second.writers);
      wake_pollers(it->second.pollers, e);
      settle(it);
    }
    expire_timers();
  }

  // Retries the waiters of one direction in order until one would block again.
  void retry(std::deque<operation*>& list) {
    while (!list.empty()) {
      operation& op = *list.front();
      if (op.request.code == op_code::accept_multishot || op.request.code == op_code::accept_multishot_direct) {
        if (!accept_all(op)) return;  // it waits on, at the head of the list
        list.pop_front();
        waiting_.erase(&op);
        continue;
      }
      int res = attempt(op.request);
      if (res == -EAGAIN) return;
      list.pop_front();
      waiting_.erase(&op);
      post(op, res);
    }
  }

  void wake_pollers(std::deque<operation*>& list, std::uint32_t events) {
    for (auto i = list.begin(); i != list.end();) {
      operation& op = **i;
      std::uint32_t got = events & (op.request.op_flags | EPOLLERR | EPOLLHUP);
      if (got == 0) {
        ++i;
        continue;
      }
      i = list.erase(i);
      waiting_.erase(&op);
      post(op, static_cast<int>(got));
    }
  }

  // A foreign loop's timerfd fired (expire_timers does the work), or the executor's eventfd was signalled.
  void drain_foreign_fd(int fd) {
    std::uint64_t v;
    (void)!::read(fd, &v, sizeof v);
    if (fd == timer_fd_) armed_deadline_ = 0;
  }

  void drop_stale_timers() {
    while (!timers_.empty() && !live(timers_.top())) timers_.pop();
  }

  bool live(const timer& t) const {
    auto it = waiting_.find(t.op);
    return it != waiting_.end() && it->second == t.wait_id;
  }

  void expire_timers() {
    const std::int64_t now = now_ns();
    while (!timers_.empty() && timers_.top().deadline_ns <= now) {
      timer t = timers_.top();
      timers_.pop();
      if (!live(t)) continue;
      unpark(*t.op);
      // A timeout's expiry is its success (-ETIME, as the kernel says); a linked timeout cancels its op.
      post(*t.op, t.op->request.code == op_code::timeout ? -ETIME : -ECANCELED);
    }
  }

  executor_stats& stats_;
  const std::uint32_t refused_;  // the allowlist as a restricted ring's kernel enforces it
  int epoll_fd_ = -1;
  std::deque<completion> done_;
  std::unordered_map<int, fd_state> fds_;
  std::unordered_map<operation*, std::uint64_t> waiting_;  // parked operations and their wait ids
  std::vector<int> direct_;         // the table of direct descriptors: a dup per slot, -1 when empty
  std::unordered_set<int> closing_;  // dups of emptied slots that operations still wait on
  std::uint64_t last_wait_id_ = 0;
  std::priority_queue<timer, std::vector<timer>, std::greater<>> timers_;
  // The eventfd slot.
  int eventfd_ = -1;
  bool eventfd_async_ = false;
  bool eventfd_on_ = true;
  bool posted_ = false;            // completions posted since the last signal
  bool posted_in_worker_ = false;  // ... of which some the kernel would have completed in a worker
  // Driven by a foreign loop: the executor's eventfd and a timerfd sit in our epoll set.
  int notify_fd_ = -1;
  int timer_fd_ = -1;
  unsigned polls_ = 0;  // poll_completions calls, to look for events on every 32nd
  std::int64_t armed_deadline_ = 0;  // what timer_fd_ is set to (0: disarmed)
};

}  // namespace

std::unique_ptr<backend> make_emulated_backend(const executor_options& opts, executor_stats& stats) {
  return std::make_unique<emulated_backend>(opts, stats);
}

}  // namespace uring::detail
