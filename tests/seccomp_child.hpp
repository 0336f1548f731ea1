// seccomp_child.hpp — run test code in a forked child, optionally with one system call blocked by seccomp:
// io_uring_setup, the way an old kernel, Docker's default profile or kernel.io_uring_disabled would block
// it, or io_uring_register, as a sandbox that allows rings but no registrations would.
//
// Provides (namespace uring::test):
//   child_result run_in_child(body)                        fork, run body() in the child, collect the result
//   child_result run_with_syscall_blocked(nr, err, body)   the same, with system call `nr` failing with `err`
//   child_result run_with_io_uring_blocked(err, body)      ... with io_uring_setup failing with `err`
//   int block_syscall(nr, err)                             install such a filter in the calling process
//   int exec_program(argv)                                 execv for use inside a body (returns only on
//   failure)
// Threads: call from a test's main thread, while no other thread of the test runs.
//
// The body runs in the child and its int becomes the child's exit status. It must report through its exit
// status and its output, never through gtest assertions: a gtest failure in the child is lost with the
// child. The child never returns into gtest — it always ends in _exit, which also skips atexit handlers
// (LeakSanitizer's check among them) and static destructors that belong to the parent.
//
// Caveat: a forked child inherits the parent's memory, including probed_kernel()'s cached answer. If
// anything in the test process has already probed (constructing an executor does), the child sees the
// parent's verdict, not its own. Tests of code that goes through probed_kernel() should exec a fresh
// program inside the body (exec_program), which the filter survives.
#pragma once

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace uring::test {

// Exit statuses the helper itself gives the child.
inline constexpr int kChildThrew = 125;         // the body threw; the output ends with the exception's text
inline constexpr int kChildFilterFailed = 126;  // the seccomp filter could not be installed
inline constexpr int kChildExecFailed = 127;    // exec_program could not start the program

struct child_result {
  bool exited = false;  // the child ended by _exit; exit_code is its status
  int exit_code = -1;
  int signal = 0;          // otherwise the signal that ended it
  bool timed_out = false;  // it outlived the limit and was killed with SIGKILL
  std::string output;      // everything it wrote to stdout and stderr, interleaved as written

  // "exited with 3" / "killed by signal 9 (timed out)", then the output: for assertion messages.
  [[nodiscard]] std::string describe() const {
    std::string s =
        exited ? "exited with " + std::to_string(exit_code) : "killed by signal " + std::to_string(signal);
    if (timed_out) s += " (timed out)";
    return s + "; output:\n" + output;
  }
};

namespace detail {

[[noreturn]] inline void run_child_body(int out_fd, const std::function<int()>& body) {
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(out_fd, STDERR_FILENO);
  ::close(out_fd);
  int code = kChildThrew;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uncaught exception: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "uncaught exception of unknown type\n");
  }
  std::fflush(nullptr);
  ::_exit(code);
}

// Reads the child's output until it closes its end or the deadline passes; false on the deadline.
inline bool read_until_eof(int fd, std::string& out, std::chrono::steady_clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    if (ready < 0) return true;  // cannot wait any more; waitpid still tells how the child ended
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace detail

// Forks, runs `body` in the child with its stdout and stderr captured, and waits for it; a child still
// running after `limit` is killed. Throws std::system_error when the pipe or the fork fails.
inline child_result run_in_child(const std::function<int()>& body,
                                 std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "pipe2");
  // Anything buffered now would otherwise be written twice: once by us, once by the child.
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::system_error(err, std::system_category(), "fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    detail::run_child_body(fds[1], body);
  }
  ::close(fds[1]);
  child_result result;
  result.timed_out = !detail::read_until_eof(fds[0], result.output, std::chrono::steady_clock::now() + limit);
  ::close(fds[0]);
  if (result.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

// Installs, in the calling thread (and what it forks or execs later), a seccomp filter that makes system
// call `nr` (__NR_*) fail with `err` and allows every other one. Irreversible: call it in a child.
// Returns 0, or the errno of the prctl/seccomp call that failed.
inline int block_syscall(long nr, int err) {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "block_syscall: add this architecture's AUDIT_ARCH_* value"
#endif
  sock_filter filter[] = {
      // A system call number means something only for its own architecture (a 32-bit int 0x80 call uses
      // another table), so a call from any other architecture ends the process rather than slip through.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  // Without CAP_SYS_ADMIN, the kernel takes a filter only from a process that can gain no privileges.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return errno;
  return 0;
}

// run_in_child with system call `nr` failing with `err` for the whole of `body`.
inline child_result run_with_syscall_blocked(long nr, int err, const std::function<int()>& body,
                                             std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  return run_in_child(
      [&]() -> int {
        if (int failed = block_syscall(nr, err)) {
          std::fprintf(stderr, "installing the seccomp filter failed: %s\n", std::strerror(failed));
          return kChildFilterFailed;
        }
        return body();
      },
      limit);
}

// run_in_child with io_uring_setup failing with `err` (ENOSYS: no io_uring, as under Docker's default
// profile; EPERM: io_uring refused) for the whole of `body`.
inline child_result run_with_io_uring_blocked(int err, const std::function<int()>& body,
                                              std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  return run_with_syscall_blocked(__NR_io_uring_setup, err, body, limit);
}

// For a body: replaces the child with `argv[0]` run with `argv` (the environment is inherited, so a body
// may setenv first). Returns kChildExecFailed, with the reason printed, only when the exec fails.
inline int exec_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "execv %s: %s\n", args[0], std::strerror(errno));
  return kChildExecFailed;
}

}  // namespace uring::test
