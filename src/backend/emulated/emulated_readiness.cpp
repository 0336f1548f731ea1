// emulated_readiness.cpp — the emulated backend's waiting side (emulated_backend.hpp): operations parked on
// their fd in epoll and retried in order when it is ready, pollers woken by the events they asked for, and
// the deadlines (timeouts, linked timeouts) that bound the epoll wait.
#include "backend/emulated/emulated_backend.hpp"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace uring::detail {

void emulated_backend::arm_foreign_timer() {
  drop_stale_timers();
  std::int64_t deadline = timers_.empty() ? 0 : std::max<std::int64_t>(1, timers_.top().deadline_ns);
  if (deadline == armed_deadline_) return;
  itimerspec spec{};
  spec.it_value = {static_cast<time_t>(deadline / 1'000'000'000),
                   static_cast<long>(deadline % 1'000'000'000)};
  if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0) armed_deadline_ = deadline;
}

waiter_list& emulated_backend::list_for(fd_state& st, op_code code) {
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

std::uint64_t emulated_backend::park(operation& op) {
  std::uint64_t id = ++last_wait_id_;
  waiting_[&op] = id;
  if (op.request.link_timeout != nullptr) {
    const link_time t = link_time_of(op.request);
    timers_.push(timer{t.absolute ? ns_of(*t.time) : monotonic_ns() + ns_of(*t.time), &op, id, true});
  }
  return id;
}

bool emulated_backend::park_on_fd(operation& op, waiter_list& list) {
  const int fd = op.request.fd;
  list.push_back(op);
  fd_state& st = fds_[fd];
  if (!update_interest(fd, st)) {
    list.remove(op);
    if (st.idle()) forget(fds_.find(fd));  // a failed update leaves the fd unregistered
    return false;
  }
  park(op);
  return true;
}

void emulated_backend::unpark(operation& op) {
  waiting_.erase(&op);
  const io_request& r = op.request;
  // A timeout's timer goes stale; a futex wait waits on no fd (futex_registry.hpp).
  if (r.code == op_code::timeout || r.code == op_code::futex_wait) return;
  auto it = fds_.find(r.fd);
  if (it == fds_.end()) return;
  list_for(it->second, r.code).remove(op);
  settle(it);
}

void emulated_backend::settle(std::unordered_map<int, fd_state>::iterator it) {
  fd_state& st = it->second;
  update_interest(it->first, st);
  if (st.idle() && (!st.in_epoll || direct_.closing(it->first))) forget(it);
}

void emulated_backend::forget(std::unordered_map<int, fd_state>::iterator it) {
  const int fd = it->first;
  fds_.erase(it);
  direct_.released(fd);
}

void emulated_backend::forget_number(int fd) {
  auto it = fds_.find(fd);
  if (it != fds_.end() && it->second.idle()) fds_.erase(it);
}

int emulated_backend::close_direct(int index) {
  return direct_.empty(index, [this](int fd) {
    forget_number(fd);  // if nobody waits on it, its file closes now, and epoll forgets it with it
    return fds_.count(fd) != 0;
  });
}

// One-shot interest: an event disarms the fd, and the next wait re-arms it by one EPOLL_CTL_MOD, where
// level-triggered interest would take an ADD and a DEL around every wait. A multishot accept stays armed,
// level-triggered, between its batches.
bool emulated_backend::update_interest(int fd, fd_state& st) {
  std::uint32_t want = (st.readers.empty() ? 0u : std::uint32_t{EPOLLIN}) |
                       (st.writers.empty() ? 0u : std::uint32_t{EPOLLOUT});
  st.pollers.for_each([&](const operation& p) { want |= p.request.op_flags; });
  const bool level =
      !st.readers.empty() && op_info(st.readers.front()->request.code).emulated_as == emulation::multishot;
  if (want == st.events && (want == 0 || level == st.level)) return true;
  ++stats_.interest_changes;
  if (want == 0) {
    // Armed with nobody waiting (a waiter withdrawn): disarmed, so that a number reused by another file
    // never looks armed.
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    st.events = 0;
    st.in_epoll = false;
    return true;
  }
  epoll_event ev{};
  ev.events = want | (level ? 0u : std::uint32_t{EPOLLONESHOT});
  ev.data.fd = fd;
  int rc;
  if (!st.in_epoll) {
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    if (rc != 0 && errno == EEXIST) rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  } else {
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
    // The fd was closed and its number reused since we registered it: register afresh.
    if (rc != 0 && errno == ENOENT) rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  if (rc != 0) {
    st.events = 0;
    st.in_epoll = false;
    return false;
  }
  st.events = want;
  st.level = level;
  st.in_epoll = true;
  return true;
}

void emulated_backend::wait_for_events(bool block) {
  timespec timeout{0, 0};
  timespec* timeout_ptr = &timeout;
  drop_stale_timers();
  if (block) {
    if (timers_.empty()) {
      timeout_ptr = nullptr;  // only an fd (or the executor's wake-up eventfd) can end this wait
    } else {
      std::int64_t left = std::max<std::int64_t>(0, timers_.top().deadline_ns - monotonic_ns());
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
    if (futex_inbox_ != nullptr && events[i].data.fd == futex_inbox_->fd()) {
      take_woken_futexes();
      continue;
    }
    auto it = fds_.find(events[i].data.fd);
    if (it == fds_.end()) continue;
    const std::uint32_t ready = events[i].events;
    if (!it->second.level) it->second.events = 0;  // a one-shot disarms as it fires
    bool broken = ready & (EPOLLERR | EPOLLHUP);
    if (ready & EPOLLIN || broken) retry(it->second.readers);
    if (ready & EPOLLOUT || broken) retry(it->second.writers);
    wake_pollers(it->second.pollers, ready);
    settle(it);
  }
  expire_timers();
}

void emulated_backend::retry(waiter_list& list) {
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

void emulated_backend::wake_pollers(waiter_list& list, std::uint32_t events) {
  list.remove_if([&](operation& op) {
    const std::uint32_t got = events & (op.request.op_flags | EPOLLERR | EPOLLHUP);
    if (got == 0) return false;
    waiting_.erase(&op);
    post(op, static_cast<int>(got));
    return true;
  });
}

void emulated_backend::drain_foreign_fd(int fd) {
  std::uint64_t v;
  (void)!::read(fd, &v, sizeof v);
  if (fd == timer_fd_) armed_deadline_ = 0;
}

void emulated_backend::drop_stale_timers() {
  while (!timers_.empty() && !live(timers_.top())) timers_.pop();
}

bool emulated_backend::live(const timer& t) const {
  auto it = waiting_.find(t.op);
  return it != waiting_.end() && it->second == t.wait_id;
}

void emulated_backend::expire_timers() {
  const std::int64_t now = monotonic_ns();
  while (!timers_.empty() && timers_.top().deadline_ns <= now) {
    timer t = timers_.top();
    timers_.pop();
    if (!live(t) || !withdraw(*t.op)) continue;
    // A timeout's expiry is its success (-ETIME, as the kernel says); a linked timeout cancels its op,
    // a timeout op's own included.
    post(*t.op, t.linked ? -ECANCELED : -ETIME);
  }
}

}  // namespace uring::detail
