// emulated_backend.cpp — the backend contract without io_uring: for kernels that lack it, for seccomp
// profiles that block it (Docker's default), and for tests that force it.
//
// Operations are attempted at submission with non-blocking syscalls (RWF_NOWAIT, MSG_DONTWAIT, so the
// caller's fd flags are not touched; only accept and connect, which have no such per-call flag, switch a
// blocking socket to non-blocking for the duration of the call). A multishot accept accepts everything
// waiting, posting each connection flagged kCqeMore, and waits on. One that would block waits for readiness
// in epoll and is retried when its fd is ready. Regular files cannot be waited for with epoll (EPERM), so
// their I/O completes synchronously at submission, as io-wq would complete it later — the documented
// difference (docs/emulation.md). Deadlines (timeouts, linked timeouts) sit in a heap and bound the epoll
// wait. Completions are queued in the order they happen and reaped like CQEs.
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
#include <deque>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/emulated/direct_table.hpp"
#include "backend/emulated/eventfd_slot.hpp"
#include "ops/op_table.hpp"
#include "ops/syscall.hpp"
#include "uring/error.hpp"

namespace uring::detail {

namespace {

// One non-blocking try at an operation that waits for readiness: -EAGAIN means "wait in epoll".
int attempt(io_request& r) {
  emu_try t;
  return op_info(r.code).emulated(r, t);
}

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

std::int64_t to_ns(const timespec64& t) { return t.tv_sec * 1'000'000'000LL + t.tv_nsec; }

class emulated_backend final : public backend {
 public:
  emulated_backend(const executor_options& opts, executor_stats& stats)
      : stats_(stats),
        direct_(opts.direct_files),
        refused_(opts.allowed_ops.refused().without(kExecutorOwnOps)) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0)
      throw std::system_error(errno, std::system_category(), "emulated backend: epoll_create1");
  }
  ~emulated_backend() override {
    ::close(epoll_fd_);
    if (timer_fd_ >= 0) ::close(timer_fd_);
  }
  emulated_backend(const emulated_backend&) = delete;
  emulated_backend& operator=(const emulated_backend&) = delete;

  void submit(operation* first, bool wait) override {
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
    // Waiting operations complete "in the background" natively; here they progress whenever the loop
    // turns: a quick look if there is other work, a wait until the next deadline if there is none.
    if (!waiting_.empty()) wait_for_events(wait && done_.empty());
    eventfd_.signal_turn();
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

  // The eventfd slot, as the kernel keeps it (eventfd_slot.hpp).
  int register_eventfd(int fd, bool async_only) override { return eventfd_.register_fd(fd, async_only); }
  int unregister_eventfd() override { return eventfd_.unregister_fd(); }
  int enable_eventfd(bool on) override { return eventfd_.enable(on); }
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
    if (op.request.code == op_code::accept_direct && res >= 0) res = direct_.adopt(res);
    done_.push_back(completion{reinterpret_cast<std::uint64_t>(&op), res, flags});
    eventfd_.note_post(in_worker);
  }

  // Keeps the timerfd of a foreign loop at the earliest live deadline (disarmed when there is none).
  void arm_foreign_timer() {
    drop_stale_timers();
    std::int64_t deadline = timers_.empty() ? 0 : std::max<std::int64_t>(1, timers_.top().deadline_ns);
    if (deadline == armed_deadline_) return;
    itimerspec spec{};
    spec.it_value = {static_cast<time_t>(deadline / 1'000'000'000),
                     static_cast<long>(deadline % 1'000'000'000)};
    if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0) armed_deadline_ = deadline;
  }

  void start(operation& op) {
    const io_request& r = op.request;
    if (r.direct) [[unlikely]] {
      if (r.code == op_code::close) return post(op, close_direct(r.fd));
      // The slot's file, as the kernel looks it up when the operation is issued.
      const int fd = direct_.lookup(r.fd);
      if (fd < 0) return post(op, -EBADF);
      op.request.fd = fd;
      op.request.direct = false;
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

  // The operations the emulation serves from its own state.
  void start_own(operation& op) {
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
      default:
        post(op, -EINVAL);  // a row that says `backend` without a case here
    }
  }

  void start_rw(operation& op) {
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
      if (fd >= 0 && op.request.code == op_code::accept_multishot_direct) fd = direct_.adopt(fd);
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
    switch (op_info(code).emulated_as) {
      case emulation::readable:
      case emulation::multishot:
        return st.readers;
      case emulation::writable:
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
    direct_.released(fd);
  }

  // Empties a direct slot. Operations waiting on its file keep it, as in the kernel: it is closed once the
  // last of them is done (forget).
  int close_direct(int index) {
    return direct_.empty(index, [this](int fd) { return fds_.count(fd) != 0; });
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
      if (errno != EINTR)
        throw std::system_error(errno, std::system_category(), "emulated backend: epoll_pwait2");
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
      if (op_info(op.request.code).emulated_as == emulation::multishot) {
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
  int epoll_fd_ = -1;
  std::deque<completion> done_;
  std::unordered_map<int, fd_state> fds_;
  std::unordered_map<operation*, std::uint64_t> waiting_;  // parked operations and their wait ids
  emulated_direct_table direct_;
  const op_set refused_;  // the allowlist as a restricted ring's kernel enforces it
  std::uint64_t last_wait_id_ = 0;
  std::priority_queue<timer, std::vector<timer>, std::greater<>> timers_;
  emulated_eventfd_slot eventfd_;
  // Driven by a foreign loop: the executor's eventfd and a timerfd sit in our epoll set.
  int notify_fd_ = -1;
  int timer_fd_ = -1;
  unsigned polls_ = 0;               // poll_completions calls, to look for events on every 32nd
  std::int64_t armed_deadline_ = 0;  // what timer_fd_ is set to (0: disarmed)
};

}  // namespace

std::unique_ptr<backend> make_emulated_backend(const executor_options& opts, executor_stats& stats) {
  return std::make_unique<emulated_backend>(opts, stats);
}

}  // namespace uring::detail
