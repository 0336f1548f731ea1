/// @file
/// uring/process.hpp — child processes: waitid on the ring, and uring::process (posix_spawn, a pidfd, pipes
/// to the child's stdin, stdout and stderr, its exit awaited by a coroutine).
///
/// Provides: uring::waitid, uring::exit_status, uring::stdio, uring::process_options, uring::process,
/// uring::write_all, uring::read_all.
/// Threads: await them from a coroutine running on an executor. A process object is used from one thread
/// at a time; its wait runs on the executor that awaits it.
///
/// waitid(idtype, id, info, options) is waitid(2) as an operation (IORING_OP_WAITID, kernel 6.7; older
/// kernels fail it EINVAL): awaiting it yields nothing or throws std::system_error ("waitid: No child
/// processes"), `.nothrow()` yields a uring::io_result, and with_timeout / with_stop_token apply. `info`
/// is borrowed (it must outlive the co_await) and may be null. The emulation waits for a pidfd to turn
/// readable and then asks waitid(2) with WNOHANG: P_PIDFD and P_PID wait for an exit (WEXITED); a wait
/// that would block for anything a pidfd cannot tell of (P_ALL, P_PGID, stops without WEXITED) fails
/// EOPNOTSUPP there, after reporting what is already waitable (docs/process.md).
///
/// A process is spawned at once on the calling thread (posix_spawn: the child shares our memory until its
/// exec, so none of our pages is copied) and followed through a pidfd, so that kill() and wait() can
/// never reach another process that reused its pid. The child starts with the default signal
/// dispositions, no blocked signals, and only fds 0, 1 and 2 (every other fd is closed in it).
/// Destroying a process whose child has not been awaited kills it (SIGKILL) and reaps it, blocking for the
/// moment the kernel takes to end it: no zombie is left behind and no child outlives its owner.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "uring/buffer.hpp"
#include "uring/detail/io_awaitable.hpp"
#include "uring/owned_fd.hpp"
#include "uring/task.hpp"

namespace uring {

/// Waits for a change of state of the child(ren) `idtype` and `id` name, as waitid(2): P_PIDFD (id a
/// pidfd), P_PID (a pid), P_PGID or P_ALL; `options` WEXITED, WSTOPPED, WCONTINUED, with WNOHANG (nothing
/// there: completes at once, info->si_pid 0) and WNOWAIT (leave the child waitable). Fills `*info`.
inline detail::io_awaitable<void> waitid(idtype_t idtype, id_t id, siginfo_t* info, int options) noexcept {
  return {"waitid",
          {.code = detail::op_code::waitid,
           .fd = static_cast<std::int32_t>(id),
           .len = static_cast<std::uint32_t>(idtype),
           .op_flags = static_cast<std::uint32_t>(options),
           .addr = info}};
}

/// How a child ended.
struct exit_status {
  bool signaled = false;     ///< killed by a signal (`code` is the signal), else it exited (`code` its code)
  bool core_dumped = false;  ///< killed, leaving a core dump
  int code = 0;              ///< the exit code, or the signal that killed it

  /// True when it exited (was not killed).
  [[nodiscard]] bool exited() const noexcept { return !signaled; }
  /// True when it exited with code 0.
  [[nodiscard]] bool success() const noexcept { return !signaled && code == 0; }
  [[nodiscard]] int exit_code() const noexcept { return signaled ? -1 : code; }  ///< -1 when killed
  [[nodiscard]] int signal() const noexcept { return signaled ? code : 0; }      ///< 0 when it exited
  /// A CLD_EXITED, CLD_KILLED or CLD_DUMPED siginfo, as waitid fills it.
  static exit_status from(const siginfo_t& info) noexcept;
  /// Same way of ending, same code.
  bool operator==(const exit_status&) const noexcept = default;
};

/// "exited with code 7", "killed by signal 9 (SIGKILL)", "killed by signal 11 (SIGSEGV), core dumped".
std::string to_string(const exit_status& s);

/// What a child's stdin, stdout or stderr is.
enum class stdio : std::uint8_t {
  inherit,  ///< ours
  pipe,     ///< a pipe whose other end the process object holds (process::in, out, err)
  null,     ///< /dev/null
};

/// What process::spawn starts: the program, its environment and directory, and its stdio.
/// Threads: a plain value.
struct process_options {
  std::vector<std::string> argv{};  ///< argv[0] is the program: a path, or a name looked up in PATH
  /// The child's environment as "NAME=value" strings; not set: ours.
  std::optional<std::vector<std::string>> env{};
  std::string cwd{};           ///< the child's working directory; empty: ours
  stdio in = stdio::inherit;   ///< the child's stdin
  stdio out = stdio::inherit;  ///< the child's stdout
  stdio err = stdio::inherit;  ///< the child's stderr
};

/// A child process: posix_spawn, a pidfd, pipes to the child's stdin, stdout and stderr, and its exit
/// awaited by a coroutine (wait(): IORING_OP_WAITID where the kernel has it, 6.7+; else a poll of the
/// pidfd). Destroying a process whose child has not been awaited kills it (SIGKILL) and reaps it.
///
/// Threads: await its operations from a coroutine running on an executor. A process object is used from
/// one thread at a time; its wait runs on the executor that awaits it.
class process {
 public:
  /// Starts the child. Throws std::system_error naming the program ("spawn /no/such: No such file or
  /// directory": a program that cannot be run, a working directory that cannot be entered, out of fds or
  /// processes), std::invalid_argument for an empty argv.
  static process spawn(const process_options& options);
  /// spawn({.argv = argv}): process::spawn({"sh", "-c", "exit 7"}).
  static process spawn(std::initializer_list<std::string> argv);

  ///@{
  /// Moves the child, its pidfd and pipes; `o` is left with none (an assigned-to process first kills and
  /// reaps its own child, as the destructor does).
  process(process&& o) noexcept;
  process& operator=(process&& o) noexcept;
  ///@}
  process(const process&) = delete;
  process& operator=(const process&) = delete;
  /// A child not yet reaped is killed (SIGKILL) and reaped, blocking until it is gone.
  ~process();

  /// The child's process id.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// The pidfd (close-on-exec), -1 once the child is reaped.
  [[nodiscard]] int pidfd() const noexcept { return pidfd_.get(); }

  ///@{
  /// Our ends of the pipes (close-on-exec, blocking, as the library's reads and writes want them): write
  /// the child's stdin to in(), read its stdout from out() and stderr from err() with uring::read/write,
  /// write_all and read_all. -1 where the stream is not a pipe.
  [[nodiscard]] int in() const noexcept { return in_.get(); }
  [[nodiscard]] int out() const noexcept { return out_.get(); }
  [[nodiscard]] int err() const noexcept { return err_.get(); }
  ///@}
  /// Closes our end of the stdin pipe: the child reads end of file.
  void close_in() noexcept { in_.reset(); }
  ///@{
  /// The pipe ends, to own elsewhere (the process then has none).
  owned_fd take_in() noexcept { return std::move(in_); }
  owned_fd take_out() noexcept { return std::move(out_); }
  owned_fd take_err() noexcept { return std::move(err_); }
  ///@}

  /// Waits for the child to exit and reaps it (once: later calls yield the same status at once). The
  /// process must outlive the wait. Time it out with with_timeout(p.wait(), d) (uring/task_adapters.hpp):
  /// ETIMEDOUT then, and the child is left running, still ours to kill and wait for. A stop of the
  /// awaiting task cancels the wait the same way (ECANCELED).
  task<exit_status> wait();
  /// The status, once wait() has reaped the child.
  [[nodiscard]] const std::optional<exit_status>& status() const noexcept { return status_; }

  /// Sends `sig` to the child through its pidfd. False if the child has been reaped already (nothing is
  /// sent); throws std::system_error for a signal the kernel refuses ("kill: Invalid argument").
  bool kill(int sig = SIGKILL);

 private:
  process() = default;
  void finish() noexcept;  ///< the destructor's kill and reap

  pid_t pid_ = -1;
  owned_fd pidfd_;
  owned_fd in_;
  owned_fd out_;
  owned_fd err_;
  std::optional<exit_status> status_;
};

/// Writes all of `buf` to `fd` (a pipe: a write may take part of it), write by write. Throws as write.
task<void> write_all(int fd, const_buffer buf);
/// Reads `fd` to its end and yields what it gave. More than `limit` bytes: throws std::system_error(EFBIG)
/// ("read_all: File too large"), having read at most `limit` + 64 KiB.
task<std::string> read_all(int fd, std::size_t limit);

}  // namespace uring
