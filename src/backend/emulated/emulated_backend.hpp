// backend/emulated/emulated_backend.hpp — the backend contract without io_uring: for kernels that lack it,
// for seccomp profiles that block it (Docker's default), and for tests that force it.
//
// Provides: detail::emulated_backend (made by make_emulated_backend, backend/backend.hpp).
// Threads: its owner thread only, as a ring.
//
// Operations are attempted at submission with non-blocking syscalls (RWF_NOWAIT, MSG_DONTWAIT, so the
// caller's fd flags are not touched; only accept and connect, which have no such per-call flag, switch a
// blocking socket to non-blocking for the duration of the call). A multishot accept accepts everything
// waiting, posting each connection flagged kCqeMore, and waits on. One that would block waits for readiness
// in epoll and is retried when its fd is ready. Regular files cannot be waited for with epoll (EPERM), so
// their I/O completes synchronously at submission, as io-wq would complete it later — the documented
// difference (docs/emulation.md). Deadlines (timeouts, linked timeouts) sit in a heap and bound the epoll
// wait. Completions are queued in the order they happen and reaped like CQEs.
//
// emulated_backend.cpp holds the contract, the dispatch of each operation and the completion queue;
// emulated_readiness.cpp the waiting: operations parked on fds, the epoll wait and the deadlines.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "backend/emulated/buffer_table.hpp"
#include "backend/emulated/direct_table.hpp"
#include "backend/emulated/eventfd_slot.hpp"
#include "backend/emulated/futex_registry.hpp"
#include "backend/emulated/waiter_list.hpp"
#include "ops/op_table.hpp"

namespace uring::detail {

class emulated_backend final : public backend {
 public:
  emulated_backend(const executor_options& opts, executor_stats& stats);
  ~emulated_backend() override;
  emulated_backend(const emulated_backend&) = delete;
  emulated_backend& operator=(const emulated_backend&) = delete;

  void submit(operation* first, bool wait) override;
  std::size_t reap(completion* out, std::size_t max) override;

  void flush() override {}  // nothing is ever queued here
  void flush_if_alone() override {}

  bool poll_completions() override;
  void cancel(operation& target) override;
  void cancel_all() override;

  // The eventfd slot, as the kernel keeps it (eventfd_slot.hpp).
  int register_eventfd(int fd, bool async_only) override { return eventfd_.register_fd(fd, async_only); }
  int unregister_eventfd() override { return eventfd_.unregister_fd(); }
  int enable_eventfd(bool on) override { return eventfd_.enable(on); }
  // Nothing here progresses in the background: the foreign loop watches our epoll fd, which holds what
  // we wait for, the executor's eventfd (posts from other threads, completions) and a timerfd kept at
  // the earliest deadline.
  int foreign_watch_fd(int notify) override;

  int empty_slot(unsigned index) override { return close_direct(static_cast<int>(index)); }
  // The table of registered buffers, as the kernel keeps it (buffer_table.hpp).
  int enable_napi(napi_settings s) override { return set_epoll_busy_poll(epoll_fd_, s); }
  int register_buffers(const iovec* iovs, const std::uint64_t* tags, unsigned n) override {
    return buffers_.register_buffers(iovs, tags, n);
  }
  int update_buffers(unsigned offset, const iovec* iovs, const std::uint64_t* tags, unsigned n) override {
    return buffers_.update(offset, iovs, tags, n, [this](std::uint64_t tag) { post_tag(tag); });
  }
  int unregister_buffers() override {
    return buffers_.unregister([this](std::uint64_t tag) { post_tag(tag); });
  }
  bool registered_ring() const noexcept override { return false; }
  ring_flags active_flags() const noexcept override { return ring_flags::none; }
  ring_flags dropped_flags() const noexcept override { return ring_flags::none; }

 private:
  // Lists linked through the operations themselves (waiter_list.hpp): a parked fd costs this and its
  // hash-map node, whatever waits on it.
  struct fd_state {
    waiter_list readers;  // FIFO, as the kernel serves waiters of one file
    waiter_list writers;
    waiter_list pollers;
    std::uint32_t events = 0;  // what epoll watches for this fd now (0: nothing, or a one-shot that fired)
    bool in_epoll = false;     // registered, perhaps disarmed: re-armed by MOD, not ADD
    bool level = false;        // level-triggered (a multishot accept waits on); else one-shot
    [[nodiscard]] bool idle() const noexcept { return readers.empty() && writers.empty() && pollers.empty(); }
  };
  // A deadline: a timeout operation's expiry, or a linked timeout that cancels its operation.
  struct timer {
    std::int64_t deadline_ns;
    operation* op;
    std::uint64_t wait_id;  // the wait it belongs to; a timer whose wait has ended is stale
    bool linked = false;    // the op's linked timeout, not a timeout op's own time
    bool operator>(const timer& o) const { return deadline_ns > o.deadline_ns; }
  };

  // One non-blocking try at an operation that waits for readiness: -EAGAIN means "wait in epoll".
  static int attempt(io_request& r) {
    emu_try t;
    return op_info(r.code).emulated(r, t);
  }

  // ---- emulated_backend.cpp: starting operations, posting completions ----

  // `in_worker`: the kernel would have completed it in an io-wq worker (see run_sync).
  void post(operation& op, int res, std::uint32_t flags = 0, bool in_worker = false);
  // A registered buffer's tag, as the kernel posts it once the buffer is no longer used.
  void post_tag(std::uint64_t tag) {
    done_.push_back(completion{tag, 0, 0});
    eventfd_.note_post(false);
  }
  void start(operation& op);
  // The operations the emulation serves from its own state.
  void start_own(operation& op);
  void start_rw(operation& op);
  // A multishot accept: every connection waiting now completes at once (flagged kCqeMore), then the
  // operation waits for more in epoll. Only an error (or a cancel) ends it.
  void start_multishot(operation& op);
  // Accepts until the backlog is empty (false: the operation goes on) or an error ends it (true, posted).
  bool accept_all(operation& op);
  // IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL: every waiting operation on `fd` completes -ECANCELED.
  int cancel_fd(int fd);
  // A futex wait: listed in the process-wide registry until a wake takes it (futex_registry.hpp).
  void start_futex_wait(operation& op);
  // Completes the futex waits other threads (or this one) have woken.
  void take_woken_futexes();
  // Takes a waiting operation back before it completes otherwise (cancel, timeout): false if it cannot
  // be, a futex wait already woken, whose completion is in the inbox.
  bool withdraw(operation& op);

  // ---- emulated_readiness.cpp: waiting on fds and deadlines ----

  // Keeps the timerfd of a foreign loop at the earliest live deadline (disarmed when there is none).
  void arm_foreign_timer();
  static waiter_list& list_for(fd_state& st, op_code code);
  // Records that `op` waits, arming its linked timeout if it has one. Returns the wait's id.
  std::uint64_t park(operation& op);
  // Queues `op` until its fd is ready. False when epoll cannot watch the fd.
  bool park_on_fd(operation& op, waiter_list& list);
  // Forgets that `op` waits (it is about to complete).
  void unpark(operation& op);
  // Makes epoll watch what an fd's waiters need. An fd nobody waits on stays registered, disarmed, so
  // that its next wait re-arms it with one epoll_ctl; it is forgotten once it closes.
  void settle(std::unordered_map<int, fd_state>::iterator it);
  // The fd's entry goes; if it is the file of a closed direct slot, the file goes now.
  void forget(std::unordered_map<int, fd_state>::iterator it);
  // The fd number is closed, or newly opened, by an operation here: what was known of it (an entry
  // nobody waits on, registered for an earlier file) goes.
  void forget_number(int fd);
  // Empties a direct slot. Operations waiting on its file keep it, as in the kernel: it is closed once the
  // last of them is done (forget).
  int close_direct(int index);
  // False if the fd cannot be watched.
  bool update_interest(int fd, fd_state& st);
  void wait_for_events(bool block);
  // Retries the waiters of one direction in order until one would block again.
  void retry(waiter_list& list);
  void wake_pollers(waiter_list& list, std::uint32_t events);
  // A foreign loop's timerfd fired (expire_timers does the work), or the executor's eventfd was signalled.
  void drain_foreign_fd(int fd);
  void drop_stale_timers();
  bool live(const timer& t) const;
  void expire_timers();

  executor_stats& stats_;
  int epoll_fd_ = -1;
  std::deque<completion> done_;
  std::unordered_map<int, fd_state> fds_;
  std::unordered_map<operation*, std::uint64_t> waiting_;  // parked operations and their wait ids
  emulated_direct_table direct_;
  emulated_buffer_table buffers_;
  const op_set refused_;  // the allowlist as a restricted ring's kernel enforces it
  std::uint64_t last_wait_id_ = 0;
  std::priority_queue<timer, std::vector<timer>, std::greater<>> timers_;
  emulated_eventfd_slot eventfd_;
  // Driven by a foreign loop: the executor's eventfd and a timerfd sit in our epoll set.
  int notify_fd_ = -1;
  int timer_fd_ = -1;
  unsigned polls_ = 0;                        // poll_completions calls, to look for events on every 32nd
  unsigned peeks_ = 0;                        // turns that completed something, to look on every 32nd
  std::int64_t armed_deadline_ = 0;           // what timer_fd_ is set to (0: disarmed)
  std::unique_ptr<futex_inbox> futex_inbox_;  // made with the first futex wait; its fd sits in our epoll set
};

}  // namespace uring::detail
