// emulated_backend.cpp — the backend contract without io_uring: for kernels that lack it, for seccomp
// profiles that block it (Docker's default), and for tests that force it.
//
// Operations are attempted at submission with non-blocking syscalls (RWF_NOWAIT, so the caller's fd
// flags are never touched). One that would block waits for readiness in epoll and is retried when its fd
// is ready. Regular files cannot be waited for with epoll (EPERM), so their I/O completes synchronously
// at submission, as io-wq would complete it later — the documented difference (docs/emulation.md).
// Completions are queued in submission order and reaped like CQEs.
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <system_error>
#include <unordered_map>

#include "backend.hpp"
#include "uring/error.hpp"

namespace uring::detail {

namespace {

// One attempt at a read or write that must not block. -EAGAIN means "wait for readiness".
int attempt_rw(const io_request& r) {
  iovec iov{r.addr, r.len};
  auto off = static_cast<off_t>(r.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(r.offset));
  for (;;) {
    ssize_t n = r.code == op_code::read ? ::preadv2(r.fd, &iov, 1, off, RWF_NOWAIT)
                                        : ::pwritev2(r.fd, &iov, 1, off, RWF_NOWAIT);
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

// The same without RWF_NOWAIT: for fds epoll cannot watch (regular files), which then complete
// synchronously, and for files whose driver does not know RWF_NOWAIT.
int blocking_rw(const io_request& r) {
  iovec iov{r.addr, r.len};
  auto off = static_cast<off_t>(r.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(r.offset));
  for (;;) {
    ssize_t n = r.code == op_code::read ? ::preadv2(r.fd, &iov, 1, off, 0) : ::pwritev2(r.fd, &iov, 1, off, 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == ESPIPE && off != -1) {
      off = -1;
      continue;
    }
    return -errno;
  }
}

class emulated_backend final : public backend {
 public:
  explicit emulated_backend(executor_stats& stats) : stats_(stats) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw std::system_error(errno, std::system_category(), "emulated backend: epoll_create1");
  }
  ~emulated_backend() override { ::close(epoll_fd_); }
  emulated_backend(const emulated_backend&) = delete;
  emulated_backend& operator=(const emulated_backend&) = delete;

  void submit(operation* first, bool wait) override {
    for (operation* op = first; op != nullptr;) {
      operation* next = op->next;  // start() may queue `op` on a wait list, which reuses `next`
      ++stats_.sqes;
      start(*op);
      op = next;
    }
    if (waiting_ == 0) return;
    // Operations waiting on fds complete "in the background" natively; here they progress whenever the
    // loop turns: a quick look if there is other work, a blocking wait if there is none.
    poll_fds(wait && done_.empty() ? -1 : 0);
  }

  std::size_t reap(completion* out, std::size_t max) override {
    std::size_t n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }

  void cancel_all() override {
    for (auto& [fd, state] : fds_) {
      for (auto* list : {&state.readers, &state.writers}) {
        for (operation* op : *list) post(*op, -ECANCELED);
        list->clear();
      }
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    }
    fds_.clear();
    waiting_ = 0;
  }

  bool registered_ring() const noexcept override { return false; }
  ring_flags active_flags() const noexcept override { return ring_flags::none; }
  ring_flags dropped_flags() const noexcept override { return ring_flags::none; }

 private:
  struct fd_state {
    std::deque<operation*> readers;  // FIFO, as the kernel serves waiters of one file
    std::deque<operation*> writers;
    std::uint32_t events = 0;  // what epoll watches for this fd now
  };

  void post(operation& op, int res) { done_.push_back(completion{reinterpret_cast<std::uint64_t>(&op), res, 0}); }

  void start(operation& op) {
    const io_request& r = op.request;
    switch (r.code) {
      case op_code::nop:
        post(op, 0);
        return;
      case op_code::read:
      case op_code::write: {
        // Later operations on an fd queue behind earlier ones, as they would in the kernel.
        auto it = fds_.find(r.fd);
        bool queued_behind = it != fds_.end() && !(r.code == op_code::read ? it->second.readers : it->second.writers).empty();
        int res = queued_behind ? -EAGAIN : attempt_rw(r);
        if (res == -EAGAIN) {
          if (wait_for(op)) return;
          res = blocking_rw(r);  // epoll cannot watch this fd: complete synchronously
        } else if (res == -EOPNOTSUPP) {
          res = blocking_rw(r);
        }
        post(op, res);
        return;
      }
    }
    post(op, -EINVAL);
  }

  // Queues `op` until its fd is ready. False when epoll cannot watch the fd (a regular file).
  bool wait_for(operation& op) {
    const int fd = op.request.fd;
    fd_state& st = fds_[fd];
    (op.request.code == op_code::read ? st.readers : st.writers).push_back(&op);
    if (!update_interest(fd, st)) {
      (op.request.code == op_code::read ? st.readers : st.writers).pop_back();
      if (st.readers.empty() && st.writers.empty()) fds_.erase(fd);
      return false;
    }
    ++waiting_;
    return true;
  }

  // Makes epoll watch exactly what fd's waiters need. False if the fd cannot be watched.
  bool update_interest(int fd, fd_state& st) {
    std::uint32_t want = (st.readers.empty() ? 0u : std::uint32_t{EPOLLIN}) | (st.writers.empty() ? 0u : std::uint32_t{EPOLLOUT});
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

  void poll_fds(int timeout_ms) {
    epoll_event events[64];
    ++stats_.enters;
    int n = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) return;  // a signal: the loop turns and comes back
      throw std::system_error(errno, std::system_category(), "emulated backend: epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      auto it = fds_.find(fd);
      if (it == fds_.end()) continue;
      std::uint32_t e = events[i].events;
      bool broken = e & (EPOLLERR | EPOLLHUP);
      if (e & EPOLLIN || broken) retry(it->second.readers);
      if (e & EPOLLOUT || broken) retry(it->second.writers);
      update_interest(fd, it->second);
      if (it->second.readers.empty() && it->second.writers.empty()) fds_.erase(it);
    }
  }

  // Retries the waiters of one direction in order until one would block again.
  void retry(std::deque<operation*>& list) {
    while (!list.empty()) {
      operation& op = *list.front();
      int res = attempt_rw(op.request);
      if (res == -EAGAIN) return;
      list.pop_front();
      --waiting_;
      post(op, res);
    }
  }

  executor_stats& stats_;
  int epoll_fd_ = -1;
  std::deque<completion> done_;
  std::unordered_map<int, fd_state> fds_;
  std::size_t waiting_ = 0;  // operations parked on fds
};

}  // namespace

std::unique_ptr<backend> make_emulated_backend(const executor_options& /*opts*/, executor_stats& stats) {
  return std::make_unique<emulated_backend>(stats);
}

}  // namespace uring::detail
