// process/process.cpp — uring::process: a child started by posix_spawn, followed through its pidfd,
// awaited with waitid on the ring (process_wait.hpp), killed and reaped by its owner at the latest.
#include "uring/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "process/process_wait.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/executor.hpp"
#include "uring/io.hpp"
#include "uring/kernel_features.hpp"
#include "uring/plan.hpp"

extern char** environ;

namespace uring {

namespace detail {

namespace {

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)); }
int pidfd_send_signal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0u));
}

// waitid(2) with WNOHANG on a pidfd whose child has exited (or is about to: retried on an empty answer
// until the exit is there, which a readable pidfd promises).
siginfo_t reap_now(int pidfd) {
  siginfo_t info{};
  if (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) != 0)
    throw_errno(errno, "waitid");
  return info;
}

}  // namespace

task<siginfo_t> wait_by_waitid(int pidfd) {
  siginfo_t info{};
  co_await uring::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED);
  co_return info;
}

task<siginfo_t> wait_by_poll(int pidfd) {
  for (;;) {
    co_await uring::poll(pidfd, POLLIN);
    siginfo_t info = reap_now(pidfd);
    if (info.si_pid != 0) co_return info;
  }
}

bool ring_waits_for_children() {
  executor* ex = running_executor();
  if (ex == nullptr) executor_access::no_executor("waitid");
  return ex->plan().backend == backend_kind::emulated || probed_kernel().supports(kOpWaitid);
}

}  // namespace detail

namespace {

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct spawn_setup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  spawn_setup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~spawn_setup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;
};

[[noreturn]] void spawn_failed(int err, const std::string& program) {
  throw std::system_error(err, std::system_category(), "spawn " + program);
}

// An fd moved above 2 (close-on-exec kept), so that putting the child's ends on 0, 1 and 2 never
// overwrites another of them.
owned_fd above_stdio(int fd, const std::string& program) {
  owned_fd owned(fd);
  if (fd > 2) return owned;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) spawn_failed(errno, program);
  return owned_fd(moved);
}

// One of the child's stdin, stdout, stderr (`target`) set up as `how` says: for a pipe, our end goes to
// `ours` and the child's end is returned (to close once the child has its copy).
owned_fd plan_stdio(spawn_setup& s, stdio how, int target, owned_fd& ours, const std::string& program) {
  if (how == stdio::null) {
    const int flags = target == STDIN_FILENO ? O_RDONLY : O_WRONLY;
    if (int rc = posix_spawn_file_actions_addopen(&s.actions, target, "/dev/null", flags, 0); rc != 0)
      spawn_failed(rc, program);
    return {};
  }
  if (how != stdio::pipe) return {};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) spawn_failed(errno, program);
  owned_fd read_end = above_stdio(fds[0], program);
  owned_fd write_end = above_stdio(fds[1], program);
  owned_fd theirs = target == STDIN_FILENO ? std::move(read_end) : std::move(write_end);
  ours = target == STDIN_FILENO ? std::move(write_end) : std::move(read_end);
  if (int rc = posix_spawn_file_actions_adddup2(&s.actions, theirs.get(), target); rc != 0)
    spawn_failed(rc, program);
  return theirs;
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

exit_status exit_status::from(const siginfo_t& info) noexcept {
  exit_status s;
  s.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  s.core_dumped = info.si_code == CLD_DUMPED;
  s.code = info.si_status;
  return s;
}

std::string to_string(const exit_status& s) {
  if (!s.signaled) return "exited with code " + std::to_string(s.code);
  const char* abbrev = ::sigabbrev_np(s.code);
  std::string out = "killed by signal " + std::to_string(s.code);
  if (abbrev != nullptr) out += std::string(" (SIG") + abbrev + ")";
  if (s.core_dumped) out += ", core dumped";
  return out;
}

process process::spawn(std::initializer_list<std::string> argv) {
  process_options o;
  o.argv = argv;
  return spawn(o);
}

process process::spawn(const process_options& o) {
  if (o.argv.empty()) throw std::invalid_argument("uring::process::spawn: argv is empty");
  const std::string& program = o.argv[0];
  process p;
  spawn_setup s;
  const owned_fd child_in = plan_stdio(s, o.in, STDIN_FILENO, p.in_, program);
  const owned_fd child_out = plan_stdio(s, o.out, STDOUT_FILENO, p.out_, program);
  const owned_fd child_err = plan_stdio(s, o.err, STDERR_FILENO, p.err_, program);
  // Only 0, 1 and 2 reach the child, whatever else the process holds without close-on-exec.
  if (int rc = posix_spawn_file_actions_addclosefrom_np(&s.actions, 3); rc != 0) spawn_failed(rc, program);
  if (!o.cwd.empty()) {
    if (int rc = posix_spawn_file_actions_addchdir_np(&s.actions, o.cwd.c_str()); rc != 0)
      spawn_failed(rc, program);
  }
  // Default dispositions and no blocked signal: a server's ignored SIGPIPE or an executor thread's
  // mask would otherwise carry over exec.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&s.attr, &all);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args = c_strings(o.argv);
  std::vector<char*> env = o.env ? c_strings(*o.env) : std::vector<char*>{};
  char* const* envp = o.env ? env.data() : environ;
  pid_t pid = -1;
  const bool search = program.find('/') == std::string::npos;
  const int rc = search ? ::posix_spawnp(&pid, program.c_str(), &s.actions, &s.attr, args.data(), envp)
                        : ::posix_spawn(&pid, program.c_str(), &s.actions, &s.attr, args.data(), envp);
  if (rc != 0) spawn_failed(rc, program);
  p.pid_ = pid;
  // The child is ours and not yet reaped, so its pid cannot have been reused: the pidfd is its own.
  const int pidfd = detail::pidfd_open(pid);
  if (pidfd < 0) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    spawn_failed(err, program + ": pidfd_open");
  }
  p.pidfd_.reset(pidfd);
  return p;
}

process::process(process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      pidfd_(std::move(o.pidfd_)),
      in_(std::move(o.in_)),
      out_(std::move(o.out_)),
      err_(std::move(o.err_)),
      status_(std::move(o.status_)) {}

process& process::operator=(process&& o) noexcept {
  if (this != &o) {
    finish();
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::move(o.pidfd_);
    in_ = std::move(o.in_);
    out_ = std::move(o.out_);
    err_ = std::move(o.err_);
    status_ = std::move(o.status_);
  }
  return *this;
}

process::~process() { finish(); }

void process::finish() noexcept {
  in_.reset();
  out_.reset();
  err_.reset();
  if (!pidfd_) return;
  detail::pidfd_send_signal(pidfd_.get(), SIGKILL);
  siginfo_t info{};
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 && errno == EINTR) {
  }
  pidfd_.reset();
}

task<exit_status> process::wait() {
  if (status_) co_return *status_;
  if (!pidfd_) throw std::logic_error("uring::process::wait: no child (moved from)");
  const siginfo_t info = detail::ring_waits_for_children() ? co_await detail::wait_by_waitid(pidfd_.get())
                                                           : co_await detail::wait_by_poll(pidfd_.get());
  status_ = exit_status::from(info);
  pidfd_.reset();
  co_return *status_;
}

bool process::kill(int sig) {
  if (!pidfd_) return false;
  if (detail::pidfd_send_signal(pidfd_.get(), sig) != 0) {
    if (errno == ESRCH) return true;  // exited, not yet reaped: nothing more to end
    throw_errno(errno, "kill");
  }
  return true;
}

}  // namespace uring
