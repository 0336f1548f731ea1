// executor.cpp — the run loop, spawned-frame ownership and the shutdown that keeps frames safe.
#include "uring/executor.hpp"
#include "uring/executor_handle.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "message_hub.hpp"
#include "net/zc_shutdown.hpp"
#include "uring/detail/remote.hpp"
#include "uring/error.hpp"
#include "uring/kernel_features.hpp"
#include "uring/spawn.hpp"

namespace uring {

namespace detail {
namespace {
thread_local executor* t_running = nullptr;

// A hand-off through the kernel is invisible to ThreadSanitizer: tell it what the CQE orders.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define URING_TSAN 1
#endif
#endif
#ifdef URING_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
void annotate_release(void* p) { __tsan_release(p); }
void annotate_acquire(void* p) { __tsan_acquire(p); }
#else
void annotate_release(void*) {}
void annotate_acquire(void*) {}
#endif
}  // namespace

executor* running_executor() noexcept { return t_running; }
}  // namespace detail

struct executor::impl {
  explicit impl(detail::op_queue& q) : queue(q) {}

  detail::op_queue& queue;  // lives in the executor itself, for the inline submit path
  executor* self = nullptr;
  std::thread::id owner = std::this_thread::get_id();
  executor_stats stats;
  executor_plan plan;
  std::unique_ptr<detail::backend> backend;
  std::vector<std::coroutine_handle<>> ready;
  std::vector<std::coroutine_handle<>> resuming;  // the turn's batch; kept to reuse its capacity
  detail::spawn_node spawned;                     // sentinel of the circular list of live spawned frames
  std::exception_ptr failure;                     // first exception that escaped a spawned task
  bool running = false;
  std::size_t resumed = 0;  // coroutines resumed from the ready list, for poll()'s answer
  std::atomic<bool> stop_requested{false};

  // Cross-thread hand-off: a poster pushes to `remote` and writes `wake_fd` only when it found the queue
  // empty (the owner drains it whole every turn, so one write per burst is enough). The owner keeps a
  // read on `wake_fd` in flight through its own backend whenever it may sleep, so that write ends the
  // sleep; a write that comes while the owner is busy just leaves the counter up for its next sleep.
  // No fence on the owner's hot path: the eventfd itself orders the two sides.
  detail::remote_queue remote;
  int wake_fd = -1;
  struct wake_op : detail::operation {
    impl* owner = nullptr;
  } wake_read;
  std::uint64_t wake_value = 0;
  bool wake_armed = false;

  void arm_wake() {
    if (wake_armed) return;
    wake_read.complete = &on_wake;
    wake_read.owner = this;
    wake_read.request = {.code = detail::op_code::read, .fd = wake_fd, .len = sizeof wake_value, .addr = &wake_value};
    queue.push(wake_read);
    wake_armed = true;
  }

  static void on_wake(detail::operation* op) noexcept {
    static_cast<wake_op*>(op)->owner->wake_armed = false;  // re-armed the next time the loop is about to sleep
  }

  void run_remote() noexcept {
    for (detail::remote_node* n = remote.take_all(); n != nullptr;) {
      detail::remote_node* next = n->next;  // run() may let the poster free the node
      if (queue.closed && n->discard != nullptr) {
        n->discard(n);
      } else {
        n->run(n);
      }
      n = next;
    }
  }

  // A CQE that carries a hand-off rather than an operation's completion.
  void on_message_cqe(const detail::completion& c) noexcept {
    auto* node = reinterpret_cast<detail::remote_node*>(c.user_data & ~detail::kTagMask);
    const std::uint64_t tag = c.user_data & detail::kTagMask;
    if (tag == detail::kDoorbellTag) {
      ++stats.doorbells;  // the mailbox is drained every turn: waking up was the point
    } else if (tag == detail::kMessageTag) {
      ++stats.messages_received;
      detail::annotate_acquire(node);
      node->res = c.res;
      if (queue.closed && node->discard != nullptr) {
        node->discard(node);
      } else {
        node->run(node);
      }
    } else if (tag == detail::kRawSendFailedTag) {
      hub->on_failed(static_cast<std::uint32_t>(c.user_data >> 3));
    } else if (c.res < 0 && node->target != nullptr) {
      // Our MSG_RING failed (the target's ring refused it): never lose it, take the mailbox road.
      if (!detail::executor_access::try_post(*node->target, *node) && node->discard != nullptr) node->discard(node);
    }
  }

  bool msg_ring_ok = false;  // native and planned for MSG_RING: hand-offs to other such executors use it
  bool raw_ring_ok = false;  // ... and the kernel passes CQE flags: raw messages go by MSG_RING too
  int ring_fd = -1;          // the backend's ring_fd(), read once: senders use it per message
  std::unique_ptr<detail::message_hub> hub;

  void on_raw_cqe(const detail::completion& c) noexcept {
    hub->deliver(c.flags >> 16, message{c.res, c.user_data});
  }

  // Posts from other threads that must not be lost: refused, with an error for the poster, once the
  // executor no longer drains its inbox (it is being destroyed, or its group has shut it down).
  std::mutex post_mutex;
  bool refusing_posts = false;

  std::atomic<bool> refusing_messages{false};  // refusing_posts, read without the lock by raw senders

  void refuse_posts() {
    std::lock_guard lock(post_mutex);
    refusing_posts = true;
    refusing_messages.store(true, std::memory_order_release);
  }

  // Hands the turn's operations to the backend; sleeps in it only if nothing else can make progress.
  void submit_and_maybe_sleep() {
    bool may_sleep = ready.empty() && remote.empty() && !stop_requested.load(std::memory_order_relaxed);
    if (may_sleep && busy_poll.count() > 0 && spin_until_work()) may_sleep = false;
    if (!may_sleep) {
      backend->submit(queue.take_all(), false);
      return;
    }
    arm_wake();
    sleeping.store(true, std::memory_order_relaxed);
    backend->submit(queue.take_all(), true);
    sleeping.store(false, std::memory_order_relaxed);
  }
  // While the owner waits in the kernel for work: a hint for wakers (executor_access::asleep).
  std::atomic<bool> sleeping{false};

  // executor_options::busy_poll. What the turn started goes to the kernel first (the peer may be spinning
  // for it), then the loop watches its CQ, its mailbox and stop() until the window ends. True: work came.
  std::chrono::microseconds busy_poll{0};
  unsigned direct_files = 0;  // executor_options::direct_files (immutable: other threads read it)
  bool spin_until_work() {
    backend->submit(queue.take_all(), false);
    const auto deadline = std::chrono::steady_clock::now() + busy_poll;
    for (unsigned i = 1;; ++i) {
      if (backend->poll_completions() || !remote.empty() || stop_requested.load(std::memory_order_relaxed)) {
        ++stats.busy_poll_hits;
        return true;
      }
      if (i % 64 == 0) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        // A peer this thread waits for may be runnable on this very core (more threads than cores):
        // let it run. Returns at once when nothing else is runnable here.
        std::this_thread::yield();
      }
      __builtin_ia32_pause();
    }
  }

  // The doorbell: a CQE posted on our ring by IORING_REGISTER_SEND_MSG_RING, from any thread. Measured
  // (bench outside_post_wake): it wakes a sleeping owner ~1.4x sooner than the eventfd, whose write
  // completes our read through a poll wake-up and task work. The eventfd read stays armed for posters
  // the kernel refuses and for rings without SEND_MSG_RING.
  int doorbell_fd = -1;

  void wake() noexcept {
    if (doorbell_fd < 0 || detail::send_msg_ring_from_anywhere(doorbell_fd, detail::kDoorbellTag) != 0) signal(wake_fd);
    if (int n = notify_fd.load(std::memory_order_acquire); n >= 0) signal(n);  // a foreign loop may drive us
  }

  static void signal(int fd) noexcept {
    std::uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }

  // The ring's one eventfd slot: who holds it (0: nobody), for EBUSY messages and stale unregisters.
  std::uint64_t eventfd_id = 0;
  std::uint64_t last_eventfd_id = 0;
  int eventfd_fd = -1;
  // notify_fd(): our own eventfd in the slot (written by posters too), and the fd the foreign loop
  // watches (the same fd natively, the emulation's epoll fd otherwise). -1 until asked for.
  std::atomic<int> notify_fd{-1};
  int foreign_fd = -1;

  [[noreturn]] void slot_busy(const char* what) const {
    std::string holder = eventfd_fd == notify_fd.load(std::memory_order_relaxed)
                             ? "notify_fd() (fd " + std::to_string(eventfd_fd) + ")"
                             : "a registration of eventfd " + std::to_string(eventfd_fd);
    throw std::system_error(EBUSY, std::system_category(),
                            std::string(what) + ": the ring's one eventfd slot is held by " + holder);
  }

  void check_owner(const char* what) const {
    if (std::this_thread::get_id() != owner) {
      throw std::logic_error(std::string(what) + ": called off the executor's owner thread");
    }
  }

  void run_ready() {
    if (ready.empty()) return;
    resumed += ready.size();
    resuming.swap(ready);
    for (auto h : resuming) h.resume();
    resuming.clear();
  }

  // A native ring's CQ, read here directly (the backend's reap() serves where it has parked completions,
  // where the kernel holds more than the ring shows, and on the emulated backend).
  detail::cq_view cq;

  // Completes every available completion. During shutdown the completions are only counted: nothing is
  // resumed, because the frames are about to be destroyed.
  void reap_and_complete() {
    constexpr unsigned kBatch = 64;
    detail::completion batch[kBatch];
    if (cq.cqes != nullptr) [[likely]] {
      while (cq.backlog->empty()) {
        const unsigned kflags = cq.flags();
        if (cq.empty()) {
          if (!(kflags & cq.more_flags)) return;
          break;  // overflowed or deferred completions: the backend's reap brings them in (and counts)
        }
        if (kflags & cq.overflow_flag) ++stats.cq_overflows;  // once per reap that sees it, as the backend
        const unsigned n = cq.take(batch, kBatch, prefetch_target);
        dispatch_batch(batch, n);
        if (n < kBatch) return;  // what came meanwhile waits for the next turn, as it would anyway
      }
    }
    for (;;) {
      const auto n = static_cast<unsigned>(backend->reap(batch, kBatch));
      for (unsigned i = 0; i < n; ++i) prefetch_target(batch[i]);
      dispatch_batch(batch, n);
      if (n < kBatch) return;
    }
  }

  // The kernel's work between two turns evicts most coroutine frames from L1: the batch's operations
  // (which sit in those frames) are fetched as the batch is copied, before the first one is resumed. A
  // raw message's user_data is the user's 64 bits, not an address: prefetching it cost the receiver a
  // page walk per message (~44% of its reap loop in the stream bench), so it is skipped.
  static void prefetch_target(const detail::completion& c) noexcept {
    if (!(c.flags & detail::kRawMessageFlag)) __builtin_prefetch(reinterpret_cast<const void*>(c.user_data & ~detail::kTagMask));
  }

  // During shutdown every completion takes dispatch_special, decided once per batch: nothing a completion
  // runs closes the queue (quiesce runs at the loop's level), and release_frames, which a posted node may
  // run, leaves it as it found it.
  [[gnu::always_inline]] void dispatch_batch(const detail::completion* batch, unsigned n) {
    stats.cqes += n;
    detail::op_queue& q = queue;
    if (q.closed) [[unlikely]] return dispatch_closed(batch, n);
    for (unsigned i = 0; i < n; ++i) dispatch(q, batch[i]);
  }
  [[gnu::noinline]] void dispatch_closed(const detail::completion* batch, unsigned n) {
    for (unsigned i = 0; i < n; ++i) dispatch_special(batch[i]);
  }

  // One completion of a running executor: an operation's final one (the common case, told apart in one
  // test), or a message, one of our own requests (tagged) or a multishot operation's.
  void dispatch(detail::op_queue& q, const detail::completion& c) {
    // res and flags as one word: one test of the flags, one store into the operation.
    const std::uint64_t res_and_flags = c.res_and_flags();
    constexpr std::uint64_t kNotFinal = std::uint64_t{detail::kRawMessageFlag | detail::kCqeMore} << 32;
    if ((c.user_data & detail::kTagMask) != 0 || (res_and_flags & kNotFinal) != 0) [[unlikely]] {
      if (c.flags & detail::kRawMessageFlag) return on_raw_cqe(c);  // a stream's every CQE: no call between
      return dispatch_special(c);
    }
    --q.inflight;
    reinterpret_cast<detail::operation*>(c.user_data)->finish(res_and_flags);
  }

  [[gnu::noinline]] void dispatch_special(detail::completion c) {
    if (c.flags & detail::kRawMessageFlag) return on_raw_cqe(c);
    if (c.user_data == detail::kOwnRequest) return;  // our own fire-and-forget request
    if (c.user_data & detail::kTagMask) return on_message_cqe(c);
    auto* op = reinterpret_cast<detail::operation*>(c.user_data);
    if (c.flags & detail::kCqeMore) return complete_multishot(*op, c);  // not final: still in flight
    --queue.inflight;
    if (queue.closed) {
      op->state = detail::op_state::idle;  // drained: its frame may now be freed
      if (op->multishot) complete_multishot(*op, c);
      return;
    }
    op->finish(c.res_and_flags());
  }

  // Every completion of a multishot operation reaches its complete fn, even during shutdown (see
  // operation::multishot): what it delivers must not leak, and an abandoned one frees itself.
  static void complete_multishot(detail::operation& op, const detail::completion& c) noexcept {
    op.store_result(c.res_and_flags());
    op.complete(&op);
  }

  // Shutting down: quiesce(), then release_frames(). A member of an executor_group (it has the group's
  // stopping flag, for try_post_home) defers the second step until every member has quiesced, because a
  // coroutine may be suspended on one executor's ring while its frame belongs to another's spawned list.
  const std::atomic<bool>* group_stopping = nullptr;
  bool frames_pending = false;
  // A group member that has quiesced for good: after its frames are freed, nodes that still reach its
  // mailbox or CQ point into freed frames, so nothing may read them again (the destructor only closes).
  bool quiesced_final = false;

  void shutdown() noexcept {
    if (group_stopping != nullptr) {
      refuse_posts();  // before the last drain, so that no accepted post is left behind it
      hub->close();
      quiesce();
      hub->settle();
      quiesced_final = true;
      frames_pending = true;
    } else {
      quiesce();
      release_frames();
    }
  }

  // Cancels and drains every in-flight operation and runs (or discards) what was posted. After it, no
  // completion can refer to a frame, so frames may be freed.
  void quiesce() noexcept {
    queue.set_closed(true);
    hub->quiesce();
    // Operations awaited this turn never reached the kernel: forget them.
    for (detail::operation* op = queue.take_all(); op != nullptr;) {
      detail::operation* next = op->next;  // a multishot operation may free itself
      --queue.inflight;
      op->state = detail::op_state::idle;
      if (op->multishot) complete_multishot(*op, detail::completion{0, -ECANCELED, 0});
      op = next;
    }
    try {
      if (backend) backend->flush();  // messages already sent must leave before the ring closes
      if (queue.inflight > 0) {
        backend->cancel_all();
        drain_cancelled();
      }
      // Hand-offs that reached the CQ (or, with DEFER_TASKRUN, the kernel's task list) without being in
      // flight here: posts from threads without an executor own their function, so none may be left.
      // The kernel runs at most 20 deferred items per enter (IO_LOCAL_TW_DEFAULT_MAX): enter until dry.
      for (std::uint64_t seen = ~std::uint64_t{0}; msg_ring_ok && backend && seen != stats.cqes;) {
        seen = stats.cqes;
        backend->submit(nullptr, false);
        reap_and_complete();
      }
    } catch (const std::exception& e) {
      // The ring no longer answers: closing it makes the kernel cancel and reap everything it holds.
      std::fprintf(stderr, "uring: executor shutdown could not drain its ring (%s); closing it\n", e.what());
      close_ring();
    }
    wake_armed = false;
    run_remote();  // posted work is owner-thread work; none of it may outlive the frames it refers to
  }

  void close_ring() noexcept {
    doorbell_fd = -1;
    queue.sqes = nullptr;  // no inline path into a closed ring
    queue.update_inline_codes();
    cq = {};
    backend.reset();
    queue.inflight = 0;
  }

  // Waits for the cancelled operations' completions, in bounded time where the kernel allows it. Most
  // come at once; a zero-copy send's notification ignores the cancel (it comes when the peer has read
  // the data). After kShutdownGrace the connections of such sends are reset, which frees their pages;
  // if after another grace nothing but such sends is left (a connection closed meanwhile), the ring is
  // closed: the kernel ends them alone, keeping their pages pinned, and no completion can reach our
  // memory any more. Anything else still in flight is waited for, as it may still write into a frame.
  void drain_cancelled() {
    static constexpr auto kShutdownGrace = std::chrono::seconds(1);
    detail::timespec64 at{};
    struct grace_timer : detail::operation {
    } timer;
    auto deadline = std::chrono::steady_clock::time_point::min();
    // False once a timer ended before its time (an op allowlist refused it): then wait as long as it takes.
    bool timed = true;
    for (int graces = 0;;) {
      const bool timing = timer.state != detail::op_state::idle;
      if (queue.inflight == (timing ? 1u : 0u)) break;
      if (!timing && timed && std::chrono::steady_clock::now() < deadline) timed = false;
      if (!timing && timed) {
        if (graces == 1) detail::reset_zero_copy_sends(*self);
        if (graces >= 2 && detail::zero_copy_sends_waiting(*self) == queue.inflight) {
          std::fprintf(stderr, "uring: executor shutdown closes its ring without %zu zero-copy notifications\n",
                       queue.inflight);
          close_ring();
          detail::orphan_zero_copy_sends(*self);
          return;
        }
        ++graces;
        deadline = std::chrono::steady_clock::now() + kShutdownGrace;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
        at = {ns / 1'000'000'000, ns % 1'000'000'000};
        timer.request = {.code = detail::op_code::timeout, .op_flags = detail::kTimeoutAbsolute, .addr = &at};
        queue.push(timer);
      }
      backend->submit(queue.take_all(), true);
      reap_and_complete();
    }
    if (timer.state == detail::op_state::idle) return;
    backend->cancel(timer);
    while (timer.state != detail::op_state::idle) {
      backend->submit(nullptr, true);
      reap_and_complete();
    }
  }

  void release_frames() noexcept {
    queue.set_closed(true);
    while (spawned.next != &spawned) {
      detail::spawn_node* node = spawned.next;
      unlink(*node);
      node->frame.destroy();
    }
    ready.clear();
    hub->forget_waiters();
    frames_pending = false;
    queue.set_closed(backend == nullptr);  // a closed ring stays closed
  }

  static void unlink(detail::spawn_node& node) noexcept {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = nullptr;
  }
};

const char* to_string(op_kind k) noexcept {
  switch (k) {
    case op_kind::nop: return "nop";
    case op_kind::read: return "read";
    case op_kind::write: return "write";
    case op_kind::timeout: return "timeout";
    case op_kind::poll: return "poll";
    case op_kind::openat: return "openat";
    case op_kind::close: return "close";
    case op_kind::statx: return "statx";
    case op_kind::fsync: return "fsync";
    case op_kind::accept: return "accept";
    case op_kind::accept_multishot: return "accept_multishot";
    case op_kind::connect: return "connect";
    case op_kind::recv: return "recv";
    case op_kind::send: return "send";
    case op_kind::recvmsg: return "recvmsg";
    case op_kind::sendmsg: return "sendmsg";
    case op_kind::shutdown: return "shutdown";
    case op_kind::cancel_fd: return "cancel_fd";
    case op_kind::recv_multishot: return "recv_multishot";
    case op_kind::send_zc: return "send_zc";
    case op_kind::splice: return "splice";
    case op_kind::install_direct: return "install_direct";
    case op_kind::plain_fd: return "plain_fd";
    case op_kind::send_direct: return "send_direct";
    case op_kind::accept_direct: return "accept_direct";
    case op_kind::accept_multishot_direct: return "accept_multishot_direct";
  }
  return "?";
}

executor::executor() : executor(options{}) {}

executor::executor(const options& opts) : impl_(std::make_unique<impl>(queue_)) {
  impl_->spawned.prev = impl_->spawned.next = &impl_->spawned;
  impl_->self = this;
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (impl_->wake_fd < 0) throw std::system_error(errno, std::system_category(), "executor: eventfd");
  const plan_overrides overrides = plan_overrides::from_environment();
  impl_->plan = make_plan(probed_kernel(), opts, overrides);
  queue_.refused = opts.allowed_ops.refused_bits();
  impl_->busy_poll = opts.busy_poll;
  impl_->direct_files = opts.direct_files;
  if (impl_->plan.backend == backend_kind::native) {
    try {
      impl_->backend = detail::make_native_backend(opts, impl_->plan, impl_->stats);
    } catch (const std::system_error& e) {
      // The probe's small rings worked but this one did not (a small RLIMIT_MEMLOCK, which counts rings
      // that were closed a moment ago until the kernel has freed them): where the backend was left to
      // us, the emulation takes over, and the plan says why. A demanded native backend fails instead.
      if (opts.backend != backend_kind::automatic || overrides.backend != backend_kind::automatic) throw;
      executor_plan emulated;
      emulated.backend = backend_kind::emulated;
      emulated.notes = std::move(impl_->plan.notes);
      emulated.notes.push_back(std::string("backend: emulated, because the ring could not be set up: ") + e.what());
      impl_->plan = std::move(emulated);
    }
  }
  if (!impl_->backend) impl_->backend = detail::make_emulated_backend(opts, impl_->stats);
  impl_->backend->offer_inline_sq(queue_);
  impl_->backend->offer_inline_cq(impl_->cq);
  queue_.update_inline_codes();
  impl_->msg_ring_ok = impl_->plan.backend == backend_kind::native && impl_->plan.msg_ring;
  impl_->raw_ring_ok = impl_->msg_ring_ok && probed_kernel().msg_ring_flags_pass;
  impl_->ring_fd = impl_->backend->ring_fd();
  if (impl_->msg_ring_ok && impl_->plan.send_msg_ring) impl_->doorbell_fd = impl_->ring_fd;
  impl_->hub = std::make_unique<detail::message_hub>(
      *this, impl_->stats, opts.message_window,
      detail::raw_route{&queue_, impl_->raw_ring_ok, impl_->ring_fd, &impl_->refusing_messages});
}

executor::~executor() {
  if (std::this_thread::get_id() != impl_->owner) {
    std::fprintf(stderr, "uring: an executor must be destroyed on the thread that created it\n");
    std::abort();
  }
  impl_->refuse_posts();
  impl_->hub->close();
  // The frames destroyed here belong to this executor: code in their destructors (a send, a post) runs
  // as on it, and its hand-offs take the mailbox because the ring is closing.
  executor* const outer = std::exchange(detail::t_running, this);
  if (!impl_->quiesced_final) impl_->quiesce();
  impl_->hub->settle();
  impl_->release_frames();
  detail::t_running = outer;
  impl_->doorbell_fd = -1;
  impl_->cq = {};  // nothing may read the ring after this
  queue_.sqes = nullptr;
  queue_.update_inline_codes();
  impl_->backend.reset();  // the ring's exit drops its eventfd registration
  ::close(impl_->wake_fd);
  if (int n = impl_->notify_fd.load(std::memory_order_relaxed); n >= 0) ::close(n);
  // Last: a handle's post or send that found us in the registry holds its lock while it looks at us,
  // so leaving waits for it, and none can start once the members below are being destroyed.
  impl_->hub->leave_registry();
}

executor_handle executor::handle() const noexcept { return executor_handle(impl_->hub->id()); }

void executor::stop() noexcept {
  impl_->stop_requested.store(true, std::memory_order_seq_cst);
  impl_->wake();  // rare enough to wake unconditionally
}

void executor::run() { run_until_done(nullptr); }

std::size_t executor::poll() {
  impl& im = *impl_;
  im.check_owner("executor::poll");
  if (im.running || detail::t_running != nullptr) throw std::logic_error("executor::poll: the loop is already running");
  if (!im.backend) throw std::logic_error("executor::poll: the executor's ring failed earlier and was closed");
  detail::t_running = this;
  struct reset {
    ~reset() { detail::t_running = nullptr; }
  } guard;
  std::size_t before = im.stats.cqes + im.resumed;
  im.run_remote();
  im.run_ready();
  const int notify = im.notify_fd.load(std::memory_order_relaxed);
  if (notify >= 0) {
    std::uint64_t v;
    (void)!::read(notify, &v, sizeof v);  // cleared first: whatever comes after this sets it again
  }
  im.run_remote();
  im.run_ready();
  im.backend->submit(queue_.take_all(), false);
  const std::uint64_t reaped = im.stats.cqes;
  im.reap_and_complete();
  im.run_ready();
  // What the resumed coroutines started goes to the kernel now, not at the next poll, which might never
  // come: operations, and the messages and cancels that the backend queued directly.
  im.backend->submit(queue_.take_all(), false);
  if (im.failure) {
    im.shutdown();
    std::rethrow_exception(std::exchange(im.failure, nullptr));
  }
  // Work left for the next turn keeps the fd readable: coroutines made ready, posts. With DEFER_TASKRUN the kernel signals only when its deferred list goes
  // from empty to non-empty (and may leave part of a long list for a later enter), so after reaping
  // anything look once more rather than strand the rest.
  if (notify >= 0 && (!im.ready.empty() || !im.remote.empty() ||
                      (im.stats.cqes != reaped && any(im.backend->active_flags() & ring_flags::defer_taskrun)))) {
    impl::signal(notify);
  }
  return im.stats.cqes + im.resumed - before;
}

int executor::notify_fd() {
  impl& im = *impl_;
  im.check_owner("executor::notify_fd");
  if (im.foreign_fd >= 0) return im.foreign_fd;
  if (!im.backend) throw std::logic_error("executor::notify_fd: the executor's ring failed earlier and was closed");
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

const executor_stats& executor::stats() const noexcept { return impl_->stats; }

std::size_t executor::operations_in_flight() const noexcept {
  return queue_.inflight - (impl_->wake_armed ? 1 : 0);
}

const executor_plan& executor::plan() const noexcept { return impl_->plan; }

bool executor::registered_ring() const noexcept { return impl_->backend && impl_->backend->registered_ring(); }

ring_flags executor::active_flags() const noexcept {
  return impl_->backend ? impl_->backend->active_flags() : ring_flags::none;
}

ring_flags executor::dropped_flags() const noexcept {
  return impl_->backend ? impl_->backend->dropped_flags() : ring_flags::none;
}

bool executor::run_until_done(std::coroutine_handle<> root) {
  impl& im = *impl_;
  im.check_owner("executor::run");
  if (im.running) throw std::logic_error("executor::run: not re-entrant");
  if (detail::t_running != nullptr) throw std::logic_error("executor::run: another executor is running on this thread");
  if (!im.backend) throw std::logic_error("executor::run: the executor's ring failed earlier and was closed");

  struct running_scope {
    impl& im;
    executor* self;
    running_scope(impl& i, executor* s) : im(i), self(s) {
      im.running = true;
      detail::t_running = self;
    }
    ~running_scope() {
      im.running = false;
      detail::t_running = nullptr;
    }
  } scope(im, this);

  if (root) im.ready.push_back(root);
  try {
    for (;;) {
      im.run_remote();
      im.run_ready();
      if (im.failure) {
        im.shutdown();
        std::rethrow_exception(std::exchange(im.failure, nullptr));
      }
      if (root && root.done()) {
        // Messages the task sent (MSG_RING SQEs) leave now, not whenever the loop runs next.
        im.backend->flush();
        return true;
      }
      if (im.stop_requested.load(std::memory_order_relaxed) && im.stop_requested.exchange(false)) {
        im.shutdown();
        return false;
      }
      im.submit_and_maybe_sleep();
      im.reap_and_complete();
    }
  } catch (...) {
    // The loop itself failed (the ring refused an enter): make frames safe before the caller frees them.
    if (queue_.inflight > 0 || im.spawned.next != &im.spawned) im.shutdown();
    throw;
  }
}

namespace detail {

void report_posted_failure(std::exception_ptr e) noexcept {
  if (executor* ex = t_running) {
    executor_access::fail(*ex, std::move(e));
    return;
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "uring: a posted function threw during executor shutdown: %s\n", x.what());
  } catch (...) {
    std::fprintf(stderr, "uring: a posted function threw during executor shutdown\n");
  }
}

void in_flight_operation_destroyed(const char* name) noexcept {
  std::fprintf(stderr,
               "uring: a '%s' operation was destroyed while still in flight (its coroutine frame was freed "
               "before the completion arrived); aborting\n",
               name);
  std::abort();
}

void executor_access::no_executor(const char* what) {
  throw std::logic_error(std::string(what) + ": no executor is running on this thread");
}

void executor_access::throw_op_error(int err, const char* name, op_code code) {
  executor* ex = running_executor();
  if (err == EACCES && ex != nullptr && ((ex->queue_.refused >> static_cast<unsigned>(code)) & 1u)) {
    std::string what = name;
    what += what == to_string(code) ? ": not" : std::string(": op_kind::") + to_string(code) + " is not";
    what += " in this executor's op allowlist (executor_options::allowed_ops)";
    throw std::system_error(EACCES, std::system_category(), what);
  }
  throw_errno(err, name);
}

void executor_access::refuse_while_closed() {
  throw std::logic_error("uring: an operation was started while its executor shuts down (or after its ring failed)");
}

void executor_access::schedule(executor& ex, std::coroutine_handle<> h) { ex.impl_->ready.push_back(h); }

int executor_access::register_buf_ring(executor& ex, void* ring, unsigned entries, std::uint16_t group) {
  if (!ex.impl_->plan.buf_ring || !ex.impl_->backend) return -EOPNOTSUPP;
  return ex.impl_->backend->register_buf_ring(ring, entries, group);
}

bool executor_access::zero_copy_send(const executor& ex) noexcept { return ex.impl_->plan.send_zc; }

int executor_access::unregister_buf_ring(executor& ex, std::uint16_t group) {
  if (!ex.impl_->backend) return 0;  // the ring is gone, and its buffer rings with it
  return ex.impl_->backend->unregister_buf_ring(group);
}

void executor_access::adopt(executor& ex, spawn_node& node) {
  auto& head = ex.impl_->spawned;
  node.prev = head.prev;
  node.next = &head;
  head.prev->next = &node;
  head.prev = &node;
}

void executor_access::release(executor& ex, spawn_node& node) noexcept {
  (void)ex;
  executor::impl::unlink(node);
}

void executor_access::fail(executor& ex, std::exception_ptr e) noexcept {
  if (!ex.impl_->failure) ex.impl_->failure = std::move(e);
}

void executor_access::cancel(executor& ex, operation& op) {
  if (op.state == op_state::queued) {
    op.state = op_state::cancelled_early;  // never reaches the kernel; completes -ECANCELED at the turn's end
  } else if (op.state == op_state::submitted && ex.impl_->backend) {
    ex.impl_->backend->cancel(op);
  }
}

void executor_access::post_remote(executor& ex, remote_node& node) noexcept {
  auto& im = *ex.impl_;
  if (im.remote.push(node)) im.wake();
}

void executor_access::drain_remote(executor& ex) noexcept { ex.impl_->run_remote(); }

bool executor_access::try_post(executor& ex, remote_node& node) noexcept {
  auto& im = *ex.impl_;
  std::lock_guard lock(im.post_mutex);
  if (im.refusing_posts) return false;
  if (im.remote.push(node)) im.wake();
  return true;
}

int executor_access::ring_route(executor* from, executor& to, remote_node& node) noexcept {
  auto& dest = *to.impl_;
  if (from == nullptr || from == &to || !from->impl_->msg_ring_ok || !dest.msg_ring_ok || !from->impl_->backend ||
      from->impl_->queue.closed) {
    return -1;
  }
  {
    std::lock_guard lock(dest.post_mutex);
    if (dest.refusing_posts) return -ESHUTDOWN;
  }
  // Everything read of the target comes before the release: once the message lands, the target may
  // finish and be destroyed (TSan saw this read race with ~executor when it came after).
  const int dest_fd = dest.ring_fd;
  node.target = &to;
  annotate_release(&node);
  return dest_fd;
}

bool executor_access::send(executor& to, remote_node& node) noexcept {
  executor* from = running_executor();
  const int dest_fd = ring_route(from, to, node);
  if (dest_fd == -ESHUTDOWN) return false;
  if (dest_fd < 0) {
    node.target = &to;
    return try_post(to, node);
  }
  from->impl_->backend->send_message(dest_fd, reinterpret_cast<std::uint64_t>(&node) | kMessageTag,
                                     reinterpret_cast<std::uint64_t>(&node) | kSendFailedTag);
  ++from->impl_->stats.messages_sent_by_ring;
  return true;
}

void executor_access::flush_send() noexcept {
  executor* ex = running_executor();
  if (ex != nullptr && ex->impl_->backend) ex->impl_->backend->flush_if_alone();
}

bool executor_access::asleep(const executor& ex) noexcept { return ex.impl_->sleeping.load(std::memory_order_relaxed); }

unsigned executor_access::direct_files(const executor& ex) noexcept { return ex.impl_->direct_files; }

void executor_access::empty_slot(executor& ex, unsigned index) noexcept {
  if (accepting(ex) && ex.impl_->backend) (void)ex.impl_->backend->empty_slot(index);
}

int executor_access::direct_route(executor& to, remote_node& node) noexcept {
  if (direct_files(to) == 0) return -ENXIO;  // the kernel would say ENFILE, as for a full table
  const int dest_fd = ring_route(running_executor(), to, node);
  return dest_fd >= 0 ? dest_fd : -1;  // the mailbox road reports a refusal (ESHUTDOWN) itself
}

bool executor_access::on_owner_thread(const executor& ex) noexcept {
  return std::this_thread::get_id() == ex.impl_->owner;
}

std::uint64_t executor_access::eventfd_register(executor& ex, int fd, eventfd_options opts) {
  auto& im = *ex.impl_;
  auto what = [fd] { return "register_eventfd(fd " + std::to_string(fd) + ")"; };  // built only on failure
  if (!im.backend) throw std::logic_error(what() + ": the executor's ring failed earlier and was closed");
  if (im.eventfd_id != 0) im.slot_busy(what().c_str());
  if (int r = im.backend->register_eventfd(fd, opts.async_only); r < 0) {
    const char* why = r == -EBADF  ? ": not an open file descriptor"
                      : r == -EINVAL ? ": not an eventfd"
                                     : "";
    throw std::system_error(-r, std::system_category(), what() + why);
  }
  im.eventfd_id = ++im.last_eventfd_id;
  im.eventfd_fd = fd;
  return im.eventfd_id;
}

void executor_access::eventfd_unregister(executor& ex, std::uint64_t id) {
  auto& im = *ex.impl_;
  if (id == 0 || id != im.eventfd_id || !im.backend) return;  // already gone, or the slot changed hands
  im.eventfd_id = 0;
  im.eventfd_fd = -1;
  if (int r = im.backend->unregister_eventfd(); r < 0 && r != -ENXIO) {
    throw std::system_error(-r, std::system_category(), "unregister_eventfd");
  }
}

void executor_access::eventfd_enable(executor& ex, std::uint64_t id, bool on) {
  auto& im = *ex.impl_;
  if (id == 0 || id != im.eventfd_id || !im.backend) {
    throw std::system_error(ENXIO, std::system_category(), "eventfd_registration::enable: not registered");
  }
  if (int r = im.backend->enable_eventfd(on); r < 0) {
    throw std::system_error(-r, std::system_category(), "eventfd_registration::enable (io_uring_cq_eventfd_toggle)");
  }
}

detail::message_hub& executor_access::hub(executor& ex) noexcept { return *ex.impl_->hub; }

// Here rather than in message_hub.cpp: the thread's executor and its hub are read in place, so that a
// send is one call (uring::send's await_ready), not four.
int try_send_message(executor& target, const message& m) noexcept {
  executor* from = t_running;
  if (from == nullptr) [[unlikely]] return EPERM;
  return executor_access::hub(*from).try_send(target, m);
}

bool executor_access::accepts_posts(executor& ex) noexcept {
  return !ex.impl_->refusing_messages.load(std::memory_order_acquire);
}

namespace {
// A raw message through the target's mailbox (no MSG_RING between the two executors).
struct raw_node final : remote_node {
  raw_node(const message& msg, std::uint32_t from) : m(msg), sender(from) {
    run = [](remote_node* n) noexcept {
      auto* self = static_cast<raw_node*>(n);
      executor_access::hub(*self->target).deliver(self->sender, self->m);
      delete self;
    };
    // Accepted before the target stopped: it reaches the inbox even then (delivered, nobody resumed).
    discard = nullptr;
  }
  message m;
  std::uint32_t sender;
};
}  // namespace

bool executor_access::post_raw(executor& from, executor& to, const message& m) noexcept {
  auto* node = new (std::nothrow) raw_node(m, from.impl_->hub->key());
  if (node == nullptr) return false;
  node->target = &to;
  if (!try_post(to, *node)) {
    delete node;
    return false;
  }
  return true;
}

void executor_access::make_sq_room(executor& ex) noexcept { ex.impl_->backend->make_sq_room(); }

void executor_access::defer_frame_release(executor& ex, const std::atomic<bool>& group_stopping) noexcept {
  ex.impl_->group_stopping = &group_stopping;
}

bool executor_access::group_stopping(const executor& ex) noexcept {
  const std::atomic<bool>* stopping = ex.impl_->group_stopping;
  return stopping != nullptr && stopping->load(std::memory_order_acquire);
}

bool executor_access::try_post_home(executor& home, remote_node& node) noexcept {
  return !group_stopping(home) && try_post(home, node);
}

void executor_access::release_frames(executor& ex) noexcept {
  if (ex.impl_->frames_pending) ex.impl_->release_frames();
}

}  // namespace detail

}  // namespace uring
