// ops/process_ops.cpp — waitid, as the native ring prepares it (by hand: liburing 2.3 has no helper) and
// as the emulation runs it: a pidfd is readable in epoll once its process has exited, then waitid(2) with
// WNOHANG takes the exit. ops/op_table.hpp says which fields it reads.
#include <liburing.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ops/op_table.hpp"
#include "ops/syscall.hpp"
#include "setup/liburing_compat.hpp"

namespace uring::detail {

static_assert(kop::waitid == kOpWaitid);

namespace {

// As the request's aux: the emulation opened the pidfd the request now names, and closes it at the end.
constexpr std::uint64_t kOwnsPidfd = 1;

siginfo_t* info_of(const io_request& r) noexcept { return static_cast<siginfo_t*>(r.addr); }

// One waitid(2) that never blocks, into `out` (zeroed first, so that "nothing yet" leaves si_pid 0).
int waitid_now(const io_request& r, siginfo_t* out) {
  std::memset(out, 0, sizeof *out);
  return retry_eintr([&] {
    return ::waitid(static_cast<idtype_t>(r.len), static_cast<id_t>(r.fd), out,
                    static_cast<int>(r.op_flags) | WNOHANG);
  });
}

}  // namespace

void prep_waitid(io_uring_sqe* sqe, const io_request& r) noexcept {
  // id in fd, idtype in len, the siginfo in addr2 (which shares the offset's word), options in
  // file_index; waitid_flags (the op-flags word) stays 0, as the kernel requires.
  io_uring_prep_rw(kop::waitid, sqe, r.fd, nullptr, r.len, reinterpret_cast<std::uint64_t>(r.addr));
  sqe->file_index = r.op_flags;
}

int emulate_waitid(io_request& r, emu_try&) {
  siginfo_t local;
  siginfo_t* out = info_of(r) != nullptr ? info_of(r) : &local;
  const int rc = waitid_now(r, out);
  if (rc < 0) return rc;
  // Nothing to report yet: wait for the pidfd to turn readable (a WNOHANG try never comes here).
  return out->si_pid != 0 ? 0 : -EAGAIN;
}

int emulated_waitid_target(io_request& r) {
  const auto idtype = static_cast<idtype_t>(r.len);
  const int options = static_cast<int>(r.op_flags);
  siginfo_t local;
  // One try, never a wait: done here, since the id need not be an fd the backend may look up.
  if ((options & WNOHANG) != 0) return waitid_now(r, info_of(r) != nullptr ? info_of(r) : &local);
  if (idtype == P_PIDFD && (options & WEXITED) != 0) return kWaitOnPidfd;
  if (idtype == P_PID && (options & WEXITED) != 0) {
    const auto pid = static_cast<pid_t>(r.fd);
    if (pid <= 0) return -EINVAL;  // as waitid(2) says
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u));
    // Out of fds or memory says so; otherwise there is no process by that pid (ESRCH), or it is a thread
    // that leads none (ENOENT, EINVAL): not our child either way.
    if (pidfd < 0) return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : -ECHILD;
    r.fd = pidfd;
    r.len = P_PIDFD;
    r.aux = kOwnsPidfd;
    return kWaitOnPidfd;
  }
  // Any child, a process group, or a stop: no fd tells of it. What is there already is reported (or
  // ECHILD without children); a wait that would block is refused rather than left to spin.
  const int rc = waitid_now(r, &local);
  if (rc < 0) return rc;
  if (local.si_pid == 0) return -EOPNOTSUPP;
  if (info_of(r) != nullptr) *info_of(r) = local;
  return 0;
}

void emulated_waitid_done(io_request& r) noexcept {
  if (r.aux != kOwnsPidfd) return;
  ::close(r.fd);
  r.aux = 0;
  r.fd = -1;
}

}  // namespace uring::detail
