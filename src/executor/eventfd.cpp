// eventfd.cpp — the registration handle (uring/eventfd.hpp), executor::register_eventfd, and uring::event.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "executor/executor_state.hpp"
#include "uring/event.hpp"
#include "uring/eventfd.hpp"

namespace uring {

using detail::executor_access;
using detail::executor_core;

detail::owner_call<detail::register_eventfd_fn> executor::register_eventfd(int fd, eventfd_options opts) {
  return {this, {this, fd, opts}};
}

// The handle is made on the owner, so the registration is never without something that undoes it, even
// if the hop back fails. An unregistration posted by a handle destroyed off this thread may still wait in
// the mailbox while this call overtook it by MSG_RING: run it first, so the slot it frees is free.
eventfd_registration detail::register_eventfd_fn::operator()() const {
  executor_access::drain_remote(*ex);
  return eventfd_registration(*ex, executor_core::eventfd_register(*ex, fd, opts), fd, opts.async_only);
}

// On the owner's thread, while the awaiting coroutine is suspended (or inline on the owner itself).
void detail::unregister_eventfd_fn::operator()() const {
  if (executor* ex = std::exchange(self->ex_, nullptr)) executor_core::eventfd_unregister(*ex, self->id_);
}

void detail::enable_eventfd_fn::operator()() const {
  if (ex == nullptr)
    throw std::system_error(ENXIO, std::system_category(), "eventfd_registration::enable: not registered");
  executor_core::eventfd_enable(*ex, id, on);
}

eventfd_registration::eventfd_registration(eventfd_registration&& o) noexcept
    : ex_(std::exchange(o.ex_, nullptr)), id_(o.id_), fd_(o.fd_), async_only_(o.async_only_) {}

eventfd_registration& eventfd_registration::operator=(eventfd_registration&& o) noexcept {
  if (this != &o) {
    release();
    ex_ = std::exchange(o.ex_, nullptr);
    id_ = o.id_;
    fd_ = o.fd_;
    async_only_ = o.async_only_;
  }
  return *this;
}

eventfd_registration::~eventfd_registration() { release(); }

void eventfd_registration::release() noexcept {
  executor* ex = std::exchange(ex_, nullptr);
  if (ex == nullptr) return;
  const std::uint64_t id = id_;
  try {
    if (executor_core::on_owner_thread(*ex)) {
      executor_core::eventfd_unregister(*ex, id);
    } else {
      ex->post([ex, id] { executor_core::eventfd_unregister(*ex, id); });
    }
  } catch (const std::system_error& e) {
    // ESHUTDOWN from post: the executor is going away and its ring's exit drops the registration.
    if (e.code().value() != ESHUTDOWN) std::fprintf(stderr, "uring: ~eventfd_registration: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring: ~eventfd_registration: %s\n", e.what());
  }
}

// --- event ---------------------------------------------------------------------------------------------

namespace {
// auto_reset waits are kernel reads that must wait for a count (a blocking fd); manual_reset needs a
// non-blocking fd so that reset() never blocks.
int flags_for(event_mode mode) {
  return mode == event_mode::auto_reset ? EFD_SEMAPHORE | EFD_CLOEXEC : EFD_NONBLOCK | EFD_CLOEXEC;
}
}  // namespace

event::event(event_mode mode, std::uint64_t initial) : mode_(mode) {
  if (mode == event_mode::manual_reset && initial > 0) initial = 1;
  if (initial > 0xffffffffu) throw std::invalid_argument("uring::event: initial count above 2^32 - 1");
  fd_ = ::eventfd(static_cast<unsigned>(initial), flags_for(mode));
  if (fd_ < 0) throw std::system_error(errno, std::system_category(), "uring::event: eventfd");
}

event event::adopt(int fd, event_mode mode) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) throw std::system_error(errno, std::system_category(), "uring::event::adopt: fcntl");
  char path[32];
  char info[256] = {};
  std::snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
  bool semaphore = false;
  bool is_eventfd = false;
  if (FILE* f = std::fopen(path, "re")) {
    while (std::fgets(info, sizeof info, f) != nullptr) {
      unsigned long long v = 0;
      if (std::sscanf(info, "eventfd-count: %llx", &v) == 1) is_eventfd = true;
      int sem = 0;
      if (std::sscanf(info, "eventfd-semaphore: %d", &sem) == 1) semaphore = sem != 0;
    }
    std::fclose(f);
  }
  const bool nonblocking = (fl & O_NONBLOCK) != 0;
  const bool fits = mode == event_mode::auto_reset ? semaphore && !nonblocking : nonblocking;
  if (!is_eventfd || !fits) {
    throw std::system_error(EINVAL, std::system_category(),
                            !is_eventfd ? "uring::event::adopt: not an eventfd"
                            : mode == event_mode::auto_reset
                                ? "uring::event::adopt: auto_reset needs a blocking EFD_SEMAPHORE eventfd"
                                : "uring::event::adopt: manual_reset needs a non-blocking eventfd");
  }
  return event(fd, mode);
}

event& event::operator=(event&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    mode_ = o.mode_;
  }
  return *this;
}

event::~event() {
  if (fd_ >= 0) ::close(fd_);
}

void event::notify(std::uint64_t n) {
  if (mode_ == event_mode::manual_reset) n = 1;
  if (n == 0) return;
  for (;;) {
    if (::write(fd_, &n, sizeof n) == sizeof n) return;
    // A full manual_reset gate is already open.
    if (errno == EAGAIN && mode_ == event_mode::manual_reset) return;
    if (errno != EINTR) throw std::system_error(errno, std::system_category(), "uring::event::notify");
  }
}

void event::reset() {
  if (mode_ != event_mode::manual_reset)
    throw std::logic_error("uring::event::reset: only a manual_reset event can be reset");
  std::uint64_t v;
  while (::read(fd_, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

event::wait_awaitable event::wait() const noexcept {
  if (mode_ == event_mode::auto_reset) {
    return {"event::wait", {.code = detail::op_code::read, .fd = fd_, .len = sizeof(std::uint64_t)}, {}};
  }
  return {"event::wait", {.code = detail::op_code::poll, .fd = fd_, .op_flags = POLLIN}, {}};
}

int executor::notify_fd() {
  impl& im = *impl_;
  im.check_owner("executor::notify_fd");
  if (im.foreign_fd >= 0) return im.foreign_fd;
  if (!im.backend)
    throw std::logic_error("executor::notify_fd: the executor's ring failed earlier and was closed");
  if (im.eventfd_id != 0) im.slot_busy("executor::notify_fd");
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "executor::notify_fd: eventfd");
  int r = im.backend->register_eventfd(fd, false);
  int watch = r < 0 ? r : im.backend->foreign_watch_fd(fd);
  if (watch < 0) {
    if (r == 0) im.backend->unregister_eventfd();
    ::close(fd);
    throw std::system_error(-watch, std::system_category(), "executor::notify_fd: registering its eventfd");
  }
  im.eventfd_id = ++im.last_eventfd_id;
  im.eventfd_fd = fd;
  im.foreign_fd = watch;
  im.notify_fd.store(fd, std::memory_order_release);
  impl::signal(fd);  // work may be pending already: the loop's first poll() finds it
  return watch;
}

void executor::impl::slot_busy(const char* what) const {
  std::string holder = eventfd_fd == notify_fd.load(std::memory_order_relaxed)
                           ? "notify_fd() (fd " + std::to_string(eventfd_fd) + ")"
                           : "a registration of eventfd " + std::to_string(eventfd_fd);
  throw std::system_error(EBUSY, std::system_category(),
                          std::string(what) + ": the ring's one eventfd slot is held by " + holder);
}

namespace detail {

std::uint64_t executor_core::eventfd_register(executor& ex, int fd, eventfd_options opts) {
  auto& im = *ex.impl_;
  auto what = [fd] { return "register_eventfd(fd " + std::to_string(fd) + ")"; };  // built only on failure
  if (!im.backend) throw std::logic_error(what() + ": the executor's ring failed earlier and was closed");
  if (im.eventfd_id != 0) im.slot_busy(what().c_str());
  if (int r = im.backend->register_eventfd(fd, opts.async_only); r < 0) {
    const char* why = r == -EBADF ? ": not an open file descriptor" : r == -EINVAL ? ": not an eventfd" : "";
    throw std::system_error(-r, std::system_category(), what() + why);
  }
  im.eventfd_id = ++im.last_eventfd_id;
  im.eventfd_fd = fd;
  return im.eventfd_id;
}

void executor_core::eventfd_unregister(executor& ex, std::uint64_t id) {
  auto& im = *ex.impl_;
  if (id == 0 || id != im.eventfd_id || !im.backend) return;  // already gone, or the slot changed hands
  im.eventfd_id = 0;
  im.eventfd_fd = -1;
  if (int r = im.backend->unregister_eventfd(); r < 0 && r != -ENXIO) {
    throw std::system_error(-r, std::system_category(), "unregister_eventfd");
  }
}

void executor_core::eventfd_enable(executor& ex, std::uint64_t id, bool on) {
  auto& im = *ex.impl_;
  if (id == 0 || id != im.eventfd_id || !im.backend) {
    throw std::system_error(ENXIO, std::system_category(), "eventfd_registration::enable: not registered");
  }
  if (int r = im.backend->enable_eventfd(on); r < 0) {
    throw std::system_error(-r, std::system_category(),
                            "eventfd_registration::enable (io_uring_cq_eventfd_toggle)");
  }
}

}  // namespace detail

}  // namespace uring
