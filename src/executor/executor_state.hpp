// executor/executor_state.hpp — everything an executor holds, in one place, and what each of the
// executor's files does with it.
//
// Provides: executor::impl (the executor's state), detail::executor_core (the library's own hooks into
// an executor, for src/ only), detail::annotate_release / annotate_acquire.
// Threads: an executor's state belongs to its owner thread, except the members marked as read or written
// by other threads (posting, waking, the refusal flags).
//
// The executor's concerns, one file each beside this one:
//   executor.cpp     construction, destruction, accessors, the hooks header templates call
//   turn.cpp         the loop: run, poll, one turn (submit, maybe sleep or spin), resuming ready coroutines
//   completions.cpp  reaping the CQ and dispatching each completion (operations, messages, multishot)
//   wakeup.cpp       posts from other threads, the remote queue, waking a sleeping owner
//   shutdown.cpp     cancelling and draining every operation before frames are freed; group shutdown
//   eventfd.cpp      the ring's one eventfd slot: registrations, notify_fd() for foreign loops
//   histograms.cpp   the loop's and the operations' histograms (executor::histograms)
// Messages between executors (the MSG_RING and mailbox roads) are in messaging/routes.cpp.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "messaging/message_hub.hpp"
#include "sanitizers.hpp"
#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/executor_histograms.hpp"
#include "uring/inflight.hpp"
#include "uring/spawn.hpp"

namespace uring {

struct executor::impl {
  impl(detail::op_queue& q, std::vector<std::coroutine_handle<>>& r) : queue(q), ready(r) {}

  // --- Identity and the ring.
  executor* self = nullptr;  // the executor this is the state of
  std::thread::id owner = std::this_thread::get_id();
  executor_plan plan;
  executor_stats stats;
  detail::op_queue& queue;  // lives in the executor itself, for the inline submit path
  std::unique_ptr<detail::backend> backend;
  detail::native_ring* ring = nullptr;  // the backend's native capabilities, or null (emulated)
  // A native ring's CQ, read here directly (the backend's reap() serves where it has parked completions,
  // where the kernel holds more than the ring shows, and on the emulated backend).
  detail::cq_view cq;
  std::chrono::microseconds busy_poll{0};  // executor_options::busy_poll
  unsigned direct_files = 0;  // executor_options::direct_files (immutable: other threads read it)

  // --- The loop (turn.cpp).
  std::vector<std::coroutine_handle<>>& ready;    // lives in the executor itself, for the inline schedule
  std::vector<std::coroutine_handle<>> resuming;  // the turn's batch; kept to reuse its capacity
  std::vector<detail::operation*> early;          // operations that complete without the backend
  std::vector<detail::operation*> early_batch;    // the ones being completed; kept to reuse its capacity
  bool running = false;
  std::size_t resumed = 0;  // coroutines resumed from the ready list, for poll()'s answer
  std::atomic<bool> stop_requested{false};
  // While the owner waits in the kernel for work, or is about to. Posts wake the owner only then
  // (wake_if_sleeping); the owner raises it before it looks at its mailbox a last time (both sides
  // sequentially consistent), so a post either sees it or is seen. Also a hint for executor_access::asleep.
  std::atomic<bool> sleeping{false};

  // --- The stuck-operation watchdog (watchdog.cpp): a timer of the executor's own, re-armed by the loop
  // whenever it is idle, that reports the operations in flight for longer than stuck_after.
  struct watchdog_op : detail::operation {
    impl* owner = nullptr;
  } watchdog_tick;
  detail::timespec64 watchdog_period{};
  std::chrono::milliseconds stuck_after{0};
  std::function<void(const inflight_op&)> on_stuck;
  void arm_watchdog() noexcept;
  // Once per turn: the watchdog's timer is re-armed whenever it is on and has expired.
  void keep_watchdog_armed() noexcept {
    if (stuck_after.count() > 0 && watchdog_tick.state == detail::op_state::idle) arm_watchdog();
  }
  static void on_watchdog_tick(detail::operation* op) noexcept;
  void report_stuck() noexcept;

  // --- Histograms (histograms.cpp), with executor_options::histograms (`keeping_histograms`): the loop's
  // figures per submit, reap, sleep and turn, and the operations' latencies (stamped by op_queue::enlist with
  // the turn's fine clock, op_queue::now_us) and the time the turn's coroutines ran.
  executor_histograms histograms;
  bool keeping_histograms = false;
  bool observing = false;          // keeping_histograms || watch_stalls: one test per final completion
  std::uint32_t reap_us = 0;       // the fine clock as the batch being dispatched was reaped
  std::uint64_t counted_sqes = 0;  // stats.sqes when sqes_per_submit last looked
  static std::uint32_t fine_now_us() noexcept;
  void start_turn_clock() noexcept {  // as each turn starts and after its wait
    if (keeping_histograms) [[unlikely]]
      queue.now_us = fine_now_us();
  }
  void note_sqes() noexcept {  // after a submit
    if (stats.sqes == counted_sqes) return;
    histograms.sqes_per_submit.record(stats.sqes - counted_sqes);
    counted_sqes = stats.sqes;
  }
  void note_final(const detail::operation& op) noexcept;  // a final completion, when observing
  void note_hop(const detail::remote_node& n, std::uint32_t now) noexcept {  // when keeping histograms
    if (n.sent_us != 0) histograms.hop_us.record(now - n.sent_us);
  }

  // --- The stall watchdog (stall_monitor.cpp): the loop's heartbeat, read by the monitor thread. Only
  // written when watch_stalls is set.
  bool watch_stalls = false;
  std::atomic<std::uint64_t> turns{0};
  std::atomic<bool> looping{false};                // run() is active
  std::atomic<const void*> last_resumed{nullptr};  // the resume function of the coroutine resumed last
  void note_resumed(std::coroutine_handle<> h) noexcept {
    // A coroutine frame starts with its resume function's address (the Itanium C++ ABI, clang and g++).
    last_resumed.store(*static_cast<void* const*>(h.address()), std::memory_order_relaxed);
  }

  // --- Frames this executor owns, and the first exception that escaped one.
  detail::spawn_node spawned;  // sentinel of the circular list of live spawned frames
  std::exception_ptr failure;

  // --- Posts from other threads (wakeup.cpp). A poster pushes to `remote` and writes `wake_fd` only when
  // it found the queue empty (the owner drains it whole every turn, so one write per burst is enough).
  // The owner keeps a read on `wake_fd` in flight through its own backend whenever it may sleep, so that
  // write ends the sleep; a write that comes while the owner is busy just leaves the counter up for its
  // next sleep. No fence on the owner's hot path: the eventfd itself orders the two sides.
  detail::remote_queue remote;
  int wake_fd = -1;
  struct wake_op : detail::operation {
    impl* owner = nullptr;
  } wake_read;
  std::uint64_t wake_value = 0;
  bool wake_armed = false;
  // The doorbell: a CQE posted on our ring by IORING_REGISTER_SEND_MSG_RING, from any thread. It wakes a
  // sleeping owner sooner than the eventfd, whose write completes our read through a poll wake-up and
  // task work (bench/README.md, "Posts from a thread without an executor"). The eventfd read stays armed
  // for posters the kernel refuses and for rings without SEND_MSG_RING.
  int doorbell_fd = -1;
  // Posts that must not be lost are refused, with an error for the poster, once the executor no longer
  // drains its inbox (it is being destroyed, or its group has shut it down).
  std::mutex post_mutex;
  bool refusing_posts = false;
  std::atomic<bool> refusing_messages{false};  // refusing_posts, read without the lock by raw senders

  // --- The registered buffers (fixed_buffers.cpp): the live set, told of each tag the kernel posts.
  void (*buffer_released)(void* set, std::uint64_t id) noexcept = nullptr;
  void* buffer_set = nullptr;

  // --- Messages between executors (messaging/).
  bool msg_ring_ok = false;  // native and planned for MSG_RING: hand-offs to other such executors use it
  bool raw_ring_ok = false;  // ... and the kernel passes CQE flags: raw messages go by MSG_RING too
  int ring_fd = -1;          // the ring's fd, read once: senders use it per message
  std::unique_ptr<detail::message_hub> hub;

  // --- The ring's one eventfd slot (eventfd.cpp): who holds it (0: nobody), for EBUSY messages and stale
  // unregisters. notify_fd(): our own eventfd in the slot (written by posters too), and the fd the foreign
  // loop watches (the same fd natively, the emulation's epoll fd otherwise). -1 until asked for.
  std::uint64_t eventfd_id = 0;
  std::uint64_t last_eventfd_id = 0;
  int eventfd_fd = -1;
  std::atomic<int> notify_fd{-1};
  int foreign_fd = -1;

  // --- Shutting down (shutdown.cpp): quiesce(), then release_frames(). A member of an executor_group (it
  // has the group's stopping flag, for try_post_home) defers the second step until every member has
  // quiesced, because a coroutine may be suspended on one executor's ring while its frame belongs to
  // another's spawned list.
  const std::atomic<bool>* group_stopping = nullptr;
  bool frames_pending = false;
  // A group member that has quiesced for good: after its frames are freed, nodes that still reach its
  // mailbox or CQ point into freed frames, so nothing may read them again (the destructor only closes).
  bool quiesced_final = false;

  void check_owner(const char* what) const {
    if (std::this_thread::get_id() != owner) {
      throw std::logic_error(std::string(what) + ": called off the executor's owner thread");
    }
  }

  // turn.cpp. run_until_done's turns. Plain: the executor keeps no histograms, watches no stalls, arms no
  // watchdog and never busy-polls (plain_loop(), the default), so the loop's tests for them compile away.
  template <bool Plain>
  bool loop(std::coroutine_handle<> root);
  [[nodiscard]] bool plain_loop() const noexcept {
    return !observing && busy_poll.count() == 0 && stuck_after.count() == 0;
  }
  // Hands the turn's operations to the backend; sleeps in it only if nothing else can make progress.
  template <bool Plain>
  void submit_and_maybe_sleep();
  // The turn's queued operations for the backend, less those that complete without it (cancelled before
  // their turn, refused by the allowlist: they wait in `early`); counts each one handed over.
  detail::operation* take_turn();
  // backend->submit of the turn's operations; waits (if asked) only when nothing completed early.
  void submit(bool wait) {
    detail::operation* const list = take_turn();  // first: it fills `early`, which decides the wait
    backend->submit(list, wait && early.empty());
    if (keeping_histograms) [[unlikely]]
      note_sqes();
  }
  // busy_poll: what the turn started goes to the kernel first (the peer may be spinning for it), then the
  // loop watches its CQ, its mailbox and stop() until the window ends. True: work came.
  bool spin_until_work();
  template <bool Plain = false>
  void run_ready();
  void resume_batch();  // run_ready's resumptions of `resuming`

  // completions.cpp. Completes every available completion. During shutdown the completions are only
  // counted: nothing is resumed, because the frames are about to be destroyed.
  void reap_and_complete() {  // inline: the loop calls it every turn
    if (!keeping_histograms) [[likely]]
      return reap_all();
    const std::uint64_t before = stats.cqes;
    reap_all();
    if (stats.cqes != before) histograms.cqes_per_reap.record(stats.cqes - before);
  }
  void reap_all();  // reap_and_complete, less the count of what it reaped
  // Completes the operations that never reached the backend, as their CQEs would.
  void complete_early();
  void dispatch_batch(const detail::completion* batch, unsigned n);
  void dispatch_closed(const detail::completion* batch, unsigned n);
  void dispatch(detail::op_queue& q, const detail::completion& c);
  void dispatch_special(detail::completion c);
  void on_message_cqe(const detail::completion& c) noexcept;  // a CQE that carries a hand-off
  void on_raw_cqe(const detail::completion& c) noexcept;      // a raw message
  // Every completion of a multishot operation reaches its complete fn, even during shutdown (see
  // operation::multishot): what it delivers must not leak, and an abandoned one frees itself.
  static void complete_multishot(detail::operation& op, const detail::completion& c) noexcept {
    op.store_result(c.res_and_flags());
    op.complete(&op);
  }

  // wakeup.cpp.
  void arm_wake();
  static void on_wake(detail::operation* op) noexcept;
  void run_remote() noexcept;
  void refuse_posts();
  void wake() noexcept;              // the doorbell or the eventfd, and a foreign loop's notify fd
  void wake_if_sleeping() noexcept;  // the same, the ring's wake only while `sleeping`
  static void signal(int fd) noexcept {
    std::uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }

  // shutdown.cpp.
  void shutdown() noexcept;
  // Cancels and drains every in-flight operation and runs (or discards) what was posted. After it, no
  // completion can refer to a frame, so frames may be freed.
  void quiesce() noexcept;
  // Waits for the cancelled operations' completions, in bounded time where the kernel allows it.
  void drain_cancelled();
  // Closes the ring: the kernel cancels and reaps what it holds, and no completion reaches us any more.
  void close_ring() noexcept;
  void release_frames() noexcept;
  static void unlink(detail::spawn_node& node) noexcept {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = nullptr;
  }

  // eventfd.cpp.
  [[noreturn]] void slot_busy(const char* what) const;
};

namespace detail {

// Sets the executor running on this thread (executor.cpp keeps it; running_executor() reads it).
void set_running_executor(executor* ex) noexcept;

// The library's own hooks into an executor (src/ only; header templates use executor_access).
// executor/stall_monitor.cpp: what the process's monitor thread samples of one executor's loop (see
// executor::impl's heartbeat), from the executor's construction until its destruction begins.
struct loop_heartbeat {
  const void* key;
  const std::atomic<std::uint64_t>* turns;
  const std::atomic<bool>* looping;
  const std::atomic<bool>* sleeping;
  const std::atomic<const void*>* last_resumed;
};
void watch_stalls(const loop_heartbeat& beat, std::chrono::milliseconds after,
                  std::function<void(const stall_report&)> report);
void unwatch_stalls(const void* key) noexcept;

// executor/inflight.cpp: how a listed operation shows in a snapshot, `now` being coarse_now_ms().
inflight_op describe(const operation& op, std::uint32_t now);

struct executor_core {
  static executor::impl& state(executor& ex) noexcept { return *ex.impl_; }
  static const executor::impl& state(const executor& ex) noexcept { return *ex.impl_; }

  // messaging/routes.cpp. The ring fd to MSG_RING `node` to `to` from `from`, -1 for the mailbox road,
  // -ESHUTDOWN when `to` refuses posts; sets node.target.
  static int ring_route(executor* from, executor& to, remote_node& node) noexcept;
  // send_direct: the target's ring fd for IORING_MSG_SEND_FD, -1 for the mailbox road, -ENXIO when the
  // target has no table of direct descriptors.
  static int direct_route(executor& to, remote_node& node) noexcept;
  static message_hub& hub(executor& ex) noexcept { return *ex.impl_->hub; }
  // A raw message through the target's mailbox: false if it was refused.
  static bool post_raw(executor& from, executor& to, const message& m) noexcept;
  // Submits what the native SQ holds until it has a free entry (messages written in place).
  static void make_sq_room(executor& ex) noexcept { ex.impl_->ring->make_sq_room(); }
  static bool accepts_posts(executor& ex) noexcept {
    return !ex.impl_->refusing_messages.load(std::memory_order_acquire);
  }

  // executor.cpp: what the net layer asks of its executor. accepting: false while the executor shuts
  // down (submit would refuse), for code that starts operations from a completion or a destructor.
  static bool accepting(const executor& ex) noexcept { return !ex.queue_.closed; }
  static unsigned direct_files(const executor& ex) noexcept { return ex.impl_->direct_files; }
  static void empty_slot(executor& ex, unsigned index) noexcept;
  static int register_buf_ring(executor& ex, void* ring, unsigned entries, std::uint16_t group,
                               std::uint16_t flags);
  static int unregister_buf_ring(executor& ex, std::uint16_t group);
  static bool zero_copy_send(const executor& ex) noexcept { return ex.impl_->plan.send_zc; }
  static bool recv_bundle(const executor& ex) noexcept { return ex.impl_->plan.recv_bundle; }
  static bool recv_incremental(const executor& ex) noexcept { return ex.impl_->plan.recv_incremental; }
  static bool send_bundle(const executor& ex) noexcept { return ex.impl_->plan.send_bundle; }

  // fixed_buffers.cpp: the ring's table of registered buffers (backend::register_buffers), and the set
  // told of its tags (null fn: none).
  static int register_buffers(executor& ex, const iovec* iovs, const std::uint64_t* tags, unsigned n);
  static int update_buffers(executor& ex, unsigned offset, const iovec* iovs, const std::uint64_t* tags,
                            unsigned n);
  static int unregister_buffers(executor& ex);
  static void watch_buffer_tags(executor& ex, void (*fn)(void*, std::uint64_t) noexcept, void* set) noexcept {
    ex.impl_->buffer_released = fn;
    ex.impl_->buffer_set = set;
  }

  // shutdown.cpp: executor_group's staged shutdown.
  static void defer_frame_release(executor& ex, const std::atomic<bool>& group_stopping) noexcept {
    ex.impl_->group_stopping = &group_stopping;
  }
  static void release_frames(executor& ex) noexcept {
    if (ex.impl_->frames_pending) ex.impl_->release_frames();
  }

  // eventfd.cpp.
  static bool on_owner_thread(const executor& ex) noexcept {
    return std::this_thread::get_id() == ex.impl_->owner;
  }
  static std::uint64_t eventfd_register(executor& ex, int fd, eventfd_options opts);
  static void eventfd_unregister(executor& ex, std::uint64_t id);
  static void eventfd_enable(executor& ex, std::uint64_t id, bool on);
};

}  // namespace detail

}  // namespace uring
