/// @file
/// uring/executor.hpp — the event loop: one ring, one thread.
///
/// Provides: uring::executor, uring::executor_stats.
/// Threads: an executor is bound to the thread that constructs it. run(), stop() and destruction happen on
/// that thread (a std::logic_error otherwise); it is neither copyable nor movable.
///
/// Each turn of the loop resumes the coroutines that are ready, then hands every operation they queued to
/// the kernel in ONE io_uring_enter (waiting for a completion only when nothing else is ready), then reaps
/// all completions and resumes their coroutines. On the native backend the ring fd is registered at
/// construction (io_uring_register_ring_fd), so every enter carries IORING_ENTER_REGISTERED_RING; if the
/// thread's registered-ring slots are used up the executor uses the plain fd and counts the fallback.
///
/// Lifetime: run(t) returns when t finishes. Work spawned onto the executor that is still pending then stays
/// suspended and continues on the next run(). stop(), an exception escaping a spawned task, or the
/// destructor shut the executor down: every in-flight operation is cancelled and its completion drained
/// *before* any coroutine frame is freed, so the kernel never writes into freed memory. A zero-copy send
/// ignores the cancel (its notification comes once the peer has read the data): after 1 s the shutdown
/// resets the connections of such sends (their queued data is dropped and the notifications follow), and
/// if after another second nothing but such sends is left, it closes its ring without them (the kernel
/// keeps their pages pinned; no completion can reach the frames any more; the executor cannot run again).
/// So a shutdown takes at most about 2 s more than its cancelled operations, except for kernel work that
/// cannot be interrupted (a regular-file read in an io-wq worker), which it waits for: that may still
/// write into a frame. (The graces are timeouts on the ring: with an op allowlist that refuses timeouts
/// the shutdown waits for every notification.)
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "uring/detail/remote.hpp"

#include "uring/detail/op_queue.hpp"
#include "uring/executor_histograms.hpp"
#include "uring/executor_options.hpp"
#include "uring/task.hpp"

namespace uring {

/// Counters an application may read between turns (from the owner thread). Operations are counted by
/// op_kind (uring/op_allowlist.hpp), the same list the backends implement.
struct executor_stats {
  std::uint64_t enters = 0;  ///< io_uring_enter calls (submit, wait, or both)
  /// of those, the ones that waited for a completion (nothing else to run)
  std::uint64_t waits = 0;
  std::uint64_t sqes = 0;             ///< operations handed to the kernel
  std::uint64_t cqes = 0;             ///< completions reaped
  std::uint64_t sq_full_flushes = 0;  ///< early submits: the SQ was full, or held 64 raw messages
  std::uint64_t cq_backlogged = 0;    ///< completions parked while the kernel reported a busy CQ
  /// reaps that found completions kept aside by the kernel (CQ full, NODROP)
  std::uint64_t cq_overflows = 0;
  std::uint64_t registered_ring_fallbacks = 0;  ///< ring fd could not be registered (slots used up)
  std::uint64_t cancels = 0;                    ///< cancel requests sent for operations in flight
  std::uint64_t messages_sent_by_ring = 0;      ///< hand-offs sent to other executors with MSG_RING
  std::uint64_t messages_received = 0;          ///< MSG_RING hand-offs received from other executors
  std::uint64_t busy_poll_hits = 0;  ///< idle turns that found work while busy polling instead of sleeping
  /// mailbox wake-ups that came as a CQE (IORING_REGISTER_SEND_MSG_RING)
  std::uint64_t doorbells = 0;
  std::uint64_t raw_messages_sent = 0;      ///< uring::send messages sent (either road)
  std::uint64_t raw_messages_received = 0;  ///< uring::send messages that reached this inbox
  std::uint64_t messages_failed = 0;        ///< raw messages the kernel refused after their send completed
  /// emulated backend: epoll_ctl calls, arming or disarming the fds operations wait on (none natively)
  std::uint64_t interest_changes = 0;
  /// Operations started, by kind; reads include the executor's own wake-up reads (one per sleep).
  std::array<std::uint64_t, detail::kOpCodeCount> ops{};

  /// Operations of kind `k` started so far (ops[k]).
  [[nodiscard]] std::uint64_t started(op_kind k) const noexcept { return ops[static_cast<std::size_t>(k)]; }
};

class executor;
class executor_handle;
struct inflight_op;
class eventfd_registration;
struct message;
namespace detail {
class message_hub;
template <class F>
class owner_call;
struct register_eventfd_fn;
}  // namespace detail

/// How a registered eventfd is signalled (executor::register_eventfd).
struct eventfd_options {
  /// Only completions that finished asynchronously signal it (IORING_REGISTER_EVENTFD_ASYNC): those the
  /// kernel handed to an io-wq worker (fsync, statx, blocking file I/O, IOSQE_ASYNC), not those that
  /// completed inline or on readiness (nop, timers, pipe and socket I/O). Minimum kernel 5.6.
  bool async_only = false;
};

namespace detail {
struct spawn_node;
struct remote_node;
struct executor_access;
struct executor_core;
}  // namespace detail
struct executor_plan;
namespace detail {
/// A posted function threw: the running executor fails as for a spawned task (or, in a destructor's final
/// drain, the error is printed).
void report_posted_failure(std::exception_ptr e) noexcept;
/// The executor whose run() is active on this thread. Deliberately out of line: clang 14 may keep a
/// thread_local's address across a coroutine's suspension point, so a coroutine that resumed on another
/// thread (resume_on) would read the old thread's variable. A call computes it afresh every time.
[[gnu::noinline]] executor* running_executor() noexcept;
}  // namespace detail

/// The event loop: one ring, one thread. Each turn resumes the coroutines that are ready, submits what
/// they queued in one io_uring_enter and resumes the coroutines whose operations completed; the file's
/// comment describes the turn, the lifetime and the shutdown.
///
/// Threads: bound to the thread that constructs it (the owner thread); run() and destruction happen on
/// that thread (a std::logic_error otherwise). stop(), post() and handle() may be called from any thread.
/// Neither copyable nor movable.
class executor {
 public:
  /// The options an executor is constructed with (uring/executor_options.hpp).
  using options = executor_options;

  ///@{
  /// An executor with the default options, or with `opts`, on the calling thread. Throws
  /// std::system_error when no ring can be set up (a native backend the kernel refuses gives the kernel's
  /// reason).
  executor();
  explicit executor(const options& opts);
  ///@}
  /// Shuts down: cancels every operation in flight and drains its completion before any coroutine frame
  /// is freed (the file's comment has the graces for zero-copy sends). Owner thread.
  ~executor();
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  /// Runs the loop until `t` finishes and returns its result (or rethrows its exception). If stop() is
  /// called first, the executor shuts down; run then returns for task<void> and throws
  /// std::system_error(ECANCELED) for any other T. An exception escaping a spawned task also shuts the
  /// executor down and is rethrown here. Not re-entrant.
  template <class T>
  T run(task<T> t);

  /// Runs the loop until stop(): for executors that serve spawned work and messages. Not re-entrant.
  void run();

  /// One non-blocking turn: resumes what is ready, submits, reaps what has completed. For driving an
  /// executor from a foreign event loop (see notify_fd). Returns the number of coroutines resumed and
  /// completions reaped. Owner thread only, never while run() is active.
  std::size_t poll();

  /// For a foreign event loop (epoll, GLib, Qt, libuv): an fd that becomes readable whenever this
  /// executor has work; the loop watches it for reading and calls poll() when it is readable, and poll()
  /// clears it (the loop need not read it). poll() leaves it readable while work remains, so the loop
  /// calls poll() again before it sleeps. Takes the ring's eventfd slot (a later register_eventfd fails
  /// with EBUSY; EBUSY here if a registration holds it). Owner thread only; returns the same fd on every
  /// call; the executor owns and closes it. On the emulated backend the fd is its epoll fd, which also
  /// covers the readiness and timers it waits for.
  int notify_fd();

  /// Registers the eventfd `fd` in the ring's one eventfd slot, from a coroutine on any executor (the
  /// registration itself runs on this executor's thread, as IORING_SETUP_SINGLE_ISSUER requires, and the
  /// awaiting coroutine continues on its own executor). The kernel then signals `fd` when completions are
  /// posted on this ring. The result unregisters on destruction (on this executor's thread) and must not
  /// outlive the executor. Throws std::system_error: EBUSY (the slot is taken: the message names the
  /// holder), EBADF (negative or closed fd), EINVAL (not an eventfd). Kernel 5.18+ registers without
  /// quiescing the ring (microseconds); older kernels stall the ring for milliseconds. Awaited on this
  /// executor it registers at once, allocating nothing. Declared here, usable with <uring/eventfd.hpp>.
  detail::owner_call<detail::register_eventfd_fn> register_eventfd(int fd, eventfd_options opts = {});

  /// Runs `fn()` on this executor's thread, soon (the next turn of its loop). Any thread may call it, also
  /// one with no executor. Never blocks. An exception escaping fn shuts the executor down and is rethrown
  /// from run(), as for a spawned task. Throws std::system_error(ESHUTDOWN) if the executor no longer
  /// accepts work (it is being destroyed, its executor_group has stopped, or a stopped run() is freeing its
  /// frames: it takes posts again once run() has returned): nothing is lost silently.
  template <class F>
  void post(F&& fn);

  /// A name for this executor that stays safe to use after it is gone (posts and messages through it then
  /// fail with ESHUTDOWN). Any thread. Declared here, usable with <uring/executor_handle.hpp>.
  [[nodiscard]] executor_handle handle() const noexcept;

  /// Asks the loop to shut down at the end of its current turn, or the next run() to shut down at once.
  /// Any thread may call it (it wakes a sleeping loop); the executor must outlive the call.
  void stop() noexcept;

  /// The executor whose run() is active on this thread, or nullptr.
  static executor* current() noexcept { return detail::running_executor(); }

  /// The counters (executor_stats), read between turns. Owner thread.
  [[nodiscard]] const executor_stats& stats() const noexcept;
  /// A copy of the executor's histograms (uring/executor_histograms.hpp), kept with
  /// executor_options::histograms (empty otherwise). Owner thread (std::logic_error elsewhere: submit_to
  /// the executor to read them from another one).
  [[nodiscard]] executor_histograms histograms() const;
  /// Operations awaited on this executor whose final completion has not been reaped yet: queued for the
  /// next enter, or held by the kernel (the emulation). The executor's own wake-up read is not counted,
  /// so this is 0 whenever every awaited operation (and multishot one) has finished. Owner thread.
  [[nodiscard]] std::size_t operations_in_flight() const noexcept;
  /// A snapshot of the operations in flight (uring/inflight.hpp), taken on the owner thread: at once when
  /// called there, else posted to the running loop and waited for, at most `limit` (std::system_error
  /// ETIMEDOUT: the loop did not take it in time, e.g. it is blocked or not running; ESHUTDOWN: it no
  /// longer accepts work). Any thread. Declared here, usable with <uring/inflight.hpp>.
  [[nodiscard]] std::vector<inflight_op> inflight(
      std::chrono::milliseconds limit = std::chrono::seconds(5)) const;
  /// What the executor runs on and why: backend, setup flags, fallbacks with their reasons.
  [[nodiscard]] const executor_plan& plan() const noexcept;
  /// True when the ring fd is registered, i.e. every enter uses IORING_ENTER_REGISTERED_RING.
  [[nodiscard]] bool registered_ring() const noexcept;
  ///@{
  /// The setup flags the ring actually has, and those the kernel refused (dropped one by one).
  [[nodiscard]] ring_flags active_flags() const noexcept;
  [[nodiscard]] ring_flags dropped_flags() const noexcept;
  ///@}

 private:
  friend struct detail::executor_access;
  friend struct detail::executor_core;  ///< the library's own hooks (src/executor/executor_state.hpp)
  struct impl;

  /// The constructor's work past the wake-up eventfd, which it closes if this throws.
  void set_up(const options& opts);

  /// Drives the loop until `root` is done (never, for a null root); returns false when the executor was
  /// stopped first.
  bool run_until_done(std::coroutine_handle<> root);

  detail::op_queue queue_;
  std::vector<std::coroutine_handle<>> ready_;  // coroutines to resume next turn (impl::ready)
  std::unique_ptr<impl> impl_;
};

namespace detail {
/// The hooks the library's header templates (awaitables, spawn, channels) need into an executor: not
/// for applications.
struct executor_access {
  /// The executor running on this thread; throws std::logic_error naming `what` if there is none.
  static executor& current(const char* what) {
    executor* ex = running_executor();
    if (ex == nullptr) [[unlikely]]
      no_executor(what);
    return *ex;
  }
  /// Queues `op` for the turn's enter, which hands all of them to the backend at once.
  /// One not in the executor's allowlist is queued too, but as refused: it completes with -EACCES at the
  /// turn's end without reaching the kernel, through the same path as any completion.
  static void submit(executor& ex, operation& op) {
    if (ex.queue_.closed) [[unlikely]]
      refuse_while_closed();
    enqueue(ex.queue_, op);
  }
  /// The hot path of submit, for an operation with nothing linked to it (no linked timeout): a nop, read
  /// or write goes straight into the ring's SQ where the backend offers that (op_queue::start_inline).
  /// False: the caller submits it. One that a stop token can stop goes there too: a stop before the
  /// turn's enter withdraws it (withdraw), so it never runs.
  [[gnu::always_inline]] static bool start_inline(executor& ex, operation& op) noexcept {
    return ex.queue_.start_inline(op);
  }
  /// Where start_inline put the operation it took last: the position withdraw needs.
  static unsigned last_inline_position(const executor& ex) noexcept {
    return ex.queue_.last_inline_position();
  }
  /// Stops an operation that start_inline wrote at SQ position `at` before the kernel was shown it: it
  /// completes -ECANCELED at the turn's end without having run. False: the kernel may have it (cancel).
  static bool withdraw(executor& ex, operation& op, unsigned at) noexcept {
    if (!ex.queue_.withdraw(op, at, kWithdrawnTag)) return false;
    op.cancel_sent = true;
    return true;
  }
  /// Whether the allowlist refuses `code`, and whether the executor takes no more operations: a chain
  /// asks before it starts any of its steps.
  static bool refuses(const executor& ex, op_code code) noexcept { return ex.queue_.refused.contains(code); }
  static bool closed(const executor& ex) noexcept { return ex.queue_.closed; }
  /// Hands what the SQ holds to the kernel now: cancels made while completions are being delivered,
  /// which must reach the kernel before the operations' memory can be reused.
  static void flush(executor& ex);
  static void enqueue(op_queue& q, operation& op) noexcept {
    if (!q.listed(op)) q.enlist(op);
    q.push(op);
    if (q.refused.contains(op.request.code)) [[unlikely]]
      op.state = op_state::refused;
  }
  /// Throws std::system_error(err) for the operation `name` of kind `code`; an EACCES for a kind the
  /// running executor's allowlist refuses says so, instead of a bare "Permission denied".
  [[noreturn]] static void throw_op_error(int err, const char* name, op_code code);
  [[noreturn]] static void no_executor(const char* what);
  [[noreturn]] static void refuse_while_closed();
  /// Resumes `h` on a later turn of ex's loop (owner thread only).
  static void schedule(executor& ex, std::coroutine_handle<> h) { ex.ready_.push_back(h); }
  /// Spawned frames are owned by the executor until they finish, so that shutdown can free them safely.
  static void adopt(executor& ex, spawn_node& node);
  static void release(executor& ex, spawn_node& node) noexcept;
  static void fail(executor& ex, std::exception_ptr e) noexcept;
  /// Owner thread: asks for `op` to complete early with -ECANCELED (if it has not completed yet).
  static void cancel(executor& ex, operation& op);
  /// From any thread: runs `node` on ex's thread soon, waking its loop if it sleeps.
  static void post_remote(executor& ex, remote_node& node) noexcept;
  /// Owner thread: runs every posted node now.
  static void drain_remote(executor& ex) noexcept;
  /// From any thread: like post_remote, but for work that must not be lost; false (nothing posted) once
  /// the executor no longer accepts posts.
  static bool try_post(executor& ex, remote_node& node) noexcept;
  /// A lone executor refuses posts from its stop's shutdown until the stopped run's frames are all freed
  /// (executor::run's task last); this takes posts again, so that it can be run again.
  static void reopen_posts(executor& ex) noexcept;
  /// try_post, keeping the node's sent_us (send's mailbox road).
  static bool post_node(executor& ex, remote_node& node) noexcept;
  /// From a coroutine or code running on an executor (or any thread): hands `node` to `to`, through the
  /// kernel (IORING_OP_MSG_RING from this thread's ring, no syscall of its own) where both executors are
  /// native and planned for it, else through `to`'s mailbox. False if `to` no longer accepts work.
  static bool send(executor& to, remote_node& node) noexcept;
  /// Hands the message just sent to the kernel now, one enter, instead of with the turn's next enter: for
  /// a wake-up that should overlap work still to do. Only where it is all the ring has queued.
  static void flush_send() noexcept;
  /// Whether ex's thread waits in the kernel for work now (not busy, not busy-polling). A hint, stale as
  /// soon as it is read: for choosing to push a wake-up out early, never for correctness.
  static bool asleep(const executor& ex) noexcept;
  /// As try_post, for a hop that a shutting-down target dropped and sends back to the coroutine's home:
  /// also refused once home's executor_group is stopping, so that the ESHUTDOWN is not bounced into a
  /// sibling that stops too (the group frees the frame, as for any coroutine caught by the stop).
  static bool try_post_home(executor& home, remote_node& node) noexcept;
  /// True once the executor_group `ex` belongs to has begun to stop (false for an executor on its own).
  static bool group_stopping(const executor& ex) noexcept;
  /// True when `ex` belongs to an executor_group (whose thread runs its loop until the group stops).
  static bool in_group(const executor& ex) noexcept;
};
}  // namespace detail

namespace detail {
/// The node behind executor::post: owns the function, runs it once on the target's thread.
template <class F>
struct posted_fn final : remote_node {
  explicit posted_fn(F f) : fn(std::move(f)) {
    run = [](remote_node* n) noexcept {
      auto* self = static_cast<posted_fn*>(n);
      try {
        self->fn();
      } catch (...) {
        report_posted_failure(std::current_exception());
      }
      delete self;
    };
  }
  F fn;
};
}  // namespace detail

template <class F>
void executor::post(F&& fn) {
  auto* node = new detail::posted_fn<std::decay_t<F>>(std::forward<F>(fn));
  if (!detail::executor_access::try_post(*this, *node)) {
    delete node;
    throw std::system_error(ESHUTDOWN, std::system_category(),
                            "executor::post: the executor no longer accepts work");
  }
}

template <class T>
T executor::run(task<T> t) {
  if (!t.valid()) throw std::logic_error("executor::run: empty task");
  auto handle = t.release();
  struct frame_guard {
    std::coroutine_handle<typename task<T>::promise_type> h;
    executor& ex;
    ~frame_guard() {
      h.destroy();
      detail::executor_access::reopen_posts(ex);
    }
  } guard{handle, *this};
  if (!run_until_done(handle)) {
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      throw std::system_error(std::make_error_code(std::errc::operation_canceled),
                              "executor::run: stopped before the task finished");
    }
  }
  return handle.promise().result();
}

}  // namespace uring
