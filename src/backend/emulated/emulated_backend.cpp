// emulated_backend.cpp — the emulated backend's contract (emulated_backend.hpp): submission, where each
// operation is tried at once or handed to the waiting side (emulated_readiness.cpp), cancellation, and the
// queue of completions that the executor reaps like CQEs.
#include "backend/emulated/emulated_backend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <system_error>
#include <vector>

#include "ops/syscall.hpp"
#include "uring/error.hpp"

namespace uring::detail {

namespace {
bool opens_fd(op_code c) noexcept {
  return c == op_code::accept || c == op_code::accept_multishot || c == op_code::socket ||
         c == op_code::openat;
}
bool uses_fixed_buffer(op_code c) noexcept {
  return c == op_code::read_fixed || c == op_code::write_fixed || c == op_code::send_fixed ||
         c == op_code::send_zc_fixed;
}
}  // namespace

emulated_backend::emulated_backend(const executor_options& opts, executor_stats& stats)
    : stats_(stats),
      direct_(opts.direct_files),
      refused_(opts.allowed_ops.refused().without(kExecutorOwnOps)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0)
    throw std::system_error(errno, std::system_category(), "emulated backend: epoll_create1");
}

emulated_backend::~emulated_backend() {
  for (const auto& [op, id] : waiting_) {
    if (op->request.code == op_code::futex_wait) futex_withdraw(*op);  // no wake may reach our inbox now
  }
  ::close(epoll_fd_);
  if (timer_fd_ >= 0) ::close(timer_fd_);
}

void emulated_backend::submit(operation* first, bool wait) {
  for (operation* op = first; op != nullptr;) {
    operation* next = op->next;
    op->state = op_state::submitted;
    ++stats_.sqes;
    if (refused_.contains(op->request.code)) [[unlikely]] {
      // What the kernel does with an SQE its restrictions refuse: the operation fails, -EACCES. (The
      // executor refuses such operations before they get here; this is the restricted ring's own check.)
      post(*op, -EACCES);
    } else {
      start(*op);
    }
    op = next;
  }
  // Waiting operations complete "in the background" natively; here they progress as the loop turns: a
  // wait until the next deadline when there is nothing else to do, a quick look when the turn completed
  // nothing (its waits are the likeliest to be ready), and on every 32nd turn whatever it did.
  if (!waiting_.empty() && (done_.empty() || ++peeks_ % 32 == 0)) wait_for_events(wait && done_.empty());
  eventfd_.signal_turn();
  if (timer_fd_ >= 0) arm_foreign_timer();
}

std::size_t emulated_backend::reap(completion* out, std::size_t max) {
  std::size_t n = 0;
  while (n < max && !done_.empty()) {
    out[n++] = done_.front();
    done_.pop_front();
  }
  return n;
}

bool emulated_backend::poll_completions() {
  // Waiting operations progress only when we look (epoll_wait without a timeout): every 32 calls.
  if (done_.empty() && !waiting_.empty() && ++polls_ % 32 == 0) wait_for_events(false);
  return !done_.empty();
}

void emulated_backend::cancel(operation& target) {
  ++stats_.cancels;
  if (waiting_.count(&target) == 0) return;  // already completed: like the kernel's -ENOENT
  if (!withdraw(target)) return;
  post(target, -ECANCELED);
}

void emulated_backend::cancel_all() {
  take_woken_futexes();
  while (!waiting_.empty()) {
    cancel(*waiting_.begin()->first);
    take_woken_futexes();  // a futex wait that a wake took first completes from the inbox
  }
  timers_ = {};
}

bool emulated_backend::withdraw(operation& op) {
  if (op.request.code == op_code::futex_wait && !futex_withdraw(op)) return false;
  unpark(op);
  return true;
}

int emulated_backend::foreign_watch_fd(int notify) {
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

void emulated_backend::post(operation& op, int res, std::uint32_t flags, bool in_worker) {
  const op_code code = op.request.code;
  if ((code == op_code::accept_direct || code == op_code::socket_direct) && res >= 0)
    res = direct_.adopt(res);
  if (res >= 0 && opens_fd(code)) forget_number(res);
  if (code == op_code::waitid) emulated_waitid_done(op.request);  // the pidfd it opened, if any
  done_.push_back(completion{reinterpret_cast<std::uint64_t>(&op), res, flags});
  eventfd_.note_post(in_worker);
}

void emulated_backend::start(operation& op) {
  const io_request& r = op.request;
  if (r.direct) [[unlikely]] {
    if (r.code == op_code::close) return post(op, close_direct(r.fd));
    // The slot's file, as the kernel looks it up when the operation is issued.
    const int fd = direct_.lookup(r.fd);
    if (fd < 0) return post(op, -EBADF);
    op.request.fd = fd;
    op.request.direct = false;
  }
  if (r.code == op_code::close) forget_number(r.fd);
  if (r.code == op_code::waitid) [[unlikely]] {
    // A process is no fd: a wait that would block is made to name a pidfd (ops/process_ops.cpp).
    if (const int rc = emulated_waitid_target(op.request); rc != kWaitOnPidfd) return post(op, rc);
  }
  if (uses_fixed_buffer(r.code)) [[unlikely]] {
    if (const int bad = buffers_.check(r); bad != 0) return post(op, bad);
  }
  switch (op_info(r.code).emulated_as) {
    case emulation::readable:
    case emulation::writable:
      start_rw(op);
      return;
    case emulation::multishot:
      start_multishot(op);
      return;
    case emulation::synchronous: {
      emu_try t{.may_block = true, .in_worker = true};
      const int res = op_info(r.code).emulated(op.request, t);
      post(op, res, 0, t.in_worker);
      return;
    }
    case emulation::backend:
      start_own(op);
      return;
    case emulation::none:  // the library takes another road here (the mailbox, its own pool)
      break;
  }
  post(op, -EINVAL);
}

void emulated_backend::start_own(operation& op) {
  const io_request& r = op.request;
  switch (r.code) {
    case op_code::nop:
      post(op, 0);
      return;
    case op_code::cancel_fd:
      post(op, cancel_fd(r.fd));
      return;
    case op_code::install_direct:
      post(op, direct_.install(*static_cast<int*>(r.addr)));
      return;
    case op_code::plain_fd:  // the slot's file was looked up above, as the kernel does
      post(op, retry_eintr([&] { return ::fcntl(r.fd, F_DUPFD_CLOEXEC, 0); }));
      return;
    case op_code::poll: {
      // Parked without a look first: arming epoll checks readiness itself, and the wait at the end of
      // this submission reports a ready fd. An fd epoll cannot watch (a regular file) is asked directly.
      if (park_on_fd(op, fds_[r.fd].pollers)) return;
      pollfd p{r.fd, static_cast<short>(r.op_flags), 0};
      post(op, ::poll(&p, 1, 0) < 0 || (p.revents & POLLNVAL) ? -EBADF : p.revents);
      return;
    }
    case op_code::futex_wait:
      start_futex_wait(op);
      return;
    case op_code::timeout: {
      const auto& t = *static_cast<const timespec64*>(r.addr);
      std::int64_t deadline = (r.op_flags & kTimeoutAbsolute) ? ns_of(t) : monotonic_ns() + ns_of(t);
      timers_.push(timer{deadline, &op, park(op)});
      return;
    }
    default:
      post(op, -EINVAL);  // a row that says `backend` without a case here
  }
}

void emulated_backend::start_rw(operation& op) {
  io_request& r = op.request;
  const op_row& row = op_info(r.code);
  // Later operations on an fd queue behind earlier ones, as they would in the kernel.
  auto it = fds_.find(r.fd);
  bool behind = it != fds_.end() && !list_for(it->second, r.code).empty();
  // A socket operation asked not to wait (MSG_DONTWAIT in its flags) tries once and fails with EAGAIN,
  // as io_uring's does (REQ_F_NOWAIT: no poll is armed for it, and it queues behind nothing).
  const bool dontwait = row.msg_flags && (r.op_flags & MSG_DONTWAIT) != 0;
  emu_try t;
  int res = behind && !dontwait ? -EAGAIN : row.emulated(r, t);
  if (res == -EAGAIN && dontwait) {
    post(op, res);
    return;
  }
  if (res == -EAGAIN) {
    if (park_on_fd(op, list_for(fds_[r.fd], r.code))) return;
    // epoll cannot watch this fd (a regular file): done blocking, as an io-wq worker would.
    t = emu_try{.may_block = true};
    res = row.emulated(r, t);
  }
  post(op, res, 0, t.in_worker);
}

void emulated_backend::start_multishot(operation& op) {
  auto it = fds_.find(op.request.fd);
  bool behind = it != fds_.end() && !it->second.readers.empty();
  if (!behind && accept_all(op)) return;
  if (!park_on_fd(op, fds_[op.request.fd].readers)) post(op, -EBADF);
}

bool emulated_backend::accept_all(operation& op) {
  for (;;) {
    int fd = attempt(op.request);
    if (fd == -EAGAIN) return false;
    // Into a slot: a full table closes the connection and ends the request, as the kernel's does.
    if (fd >= 0 && op.request.code == op_code::accept_multishot_direct) fd = direct_.adopt(fd);
    if (fd < 0) {
      post(op, fd);
      return true;
    }
    post(op, fd, kCqeMore);
  }
}

int emulated_backend::cancel_fd(int fd) {
  std::vector<operation*> victims;
  for (const auto& [op, id] : waiting_) {
    const op_code code = op->request.code;
    if (code != op_code::timeout && code != op_code::futex_wait && op->request.fd == fd)
      victims.push_back(op);
  }
  for (operation* v : victims) {
    unpark(*v);
    post(*v, -ECANCELED);
  }
  return victims.empty() ? -ENOENT : static_cast<int>(victims.size());
}

void emulated_backend::start_futex_wait(operation& op) {
  if (futex_inbox_ == nullptr) {
    auto inbox = std::make_unique<futex_inbox>();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = inbox->fd();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, inbox->fd(), &ev) != 0) return post(op, -errno);
    futex_inbox_ = std::move(inbox);
  }
  const int rc = futex_register(op, *futex_inbox_);
  if (rc < 0) return post(op, rc);
  park(op);
}

void emulated_backend::take_woken_futexes() {
  if (futex_inbox_ == nullptr) return;
  for (operation* op : futex_inbox_->take()) {
    if (waiting_.erase(op) != 0) post(*op, 0);
  }
}

std::unique_ptr<backend> make_emulated_backend(const executor_options& opts, executor_stats& stats) {
  return std::make_unique<emulated_backend>(opts, stats);
}

}  // namespace uring::detail
