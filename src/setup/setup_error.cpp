#include "setup/setup_error.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace uring::detail {

namespace {
// -1 when the sysctl is absent (kernels before 6.6).
int io_uring_disabled_sysctl() {
  std::ifstream in("/proc/sys/kernel/io_uring_disabled");
  int value = -1;
  if (in) in >> value;
  return value;
}
}  // namespace

std::string explain_setup_error(int err) {
  std::string head =
      std::string("io_uring_setup: ") + strerrorname_np(err) + " (" + std::strerror(err) + ") — ";
  switch (err) {
    case ENOSYS:
      return head +
             "the kernel has no io_uring (older than 5.1 or built without CONFIG_IO_URING), or a seccomp "
             "filter blocks it, as Docker's default profile does";
    case EPERM:
      switch (io_uring_disabled_sysctl()) {
        case 2:
          return head + "io_uring is disabled by sysctl kernel.io_uring_disabled=2";
        case 1:
          return head +
                 "sysctl kernel.io_uring_disabled=1 allows io_uring only to CAP_SYS_ADMIN or members of "
                 "kernel.io_uring_group";
        default:
          return head + "denied by a seccomp filter or a security module";
      }
    case ENOMEM:
      // Kernels 5.12 to 6.12 charged rings to the memory cgroup; earlier ones, and 6.13+ (rings in
      // "regions"), charge RLIMIT_MEMLOCK for a process without CAP_IPC_LOCK. Rings are freed
      // asynchronously, so rings closed a moment ago may still count.
      return head +
             "not enough locked memory for the ring: RLIMIT_MEMLOCK counts ring memory for a process without "
             "CAP_IPC_LOCK (kernels before 5.12, and 6.13+): raise it with `ulimit -l` or ask for fewer "
             "entries";
    case EINVAL:
      return head + "the kernel refused the ring's parameters (a setup flag or size newer than it knows)";
    case EMFILE:
    case ENFILE:
      return head + "out of file descriptors";
    default:
      return head + "unexpected error";
  }
}

std::string explain_call_error(const char* call, int err) {
  std::string head = std::string(call) + ": " + strerrorname_np(err) + " (" + std::strerror(err) + ")";
  switch (err) {
    case EPERM:
    case EACCES:
      return head + " — denied by a seccomp filter, a security module or the ring's restrictions";
    case ENOMEM:
      return head +
             " — locked memory (RLIMIT_MEMLOCK, `ulimit -l`) is used up for a process without CAP_IPC_LOCK; "
             "rings "
             "closed a moment ago count until the kernel has freed them";
    case EINVAL:
    case EBADF:
      return head + " — not known to this kernel";
    case EBUSY:
      return head + " — already in use (for registered ring fds: this thread's 16 slots are taken)";
    default:
      return head;
  }
}

}  // namespace uring::detail
