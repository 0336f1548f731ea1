// executor/turn.cpp — the loop: run(), poll() for foreign loops, and one turn of it (run what was posted
// and what is ready, submit everything the turn started in one enter, sleep or spin only when idle, reap).
#include <chrono>
#include <stdexcept>
#include <thread>

#include "executor/executor_state.hpp"

namespace uring {

// Hands the turn's operations to the backend; sleeps in it only if nothing else can make progress.
template <bool Plain>
[[gnu::always_inline]] inline void executor::impl::submit_and_maybe_sleep() {
  bool may_sleep = ready.empty() && remote.empty() && !stop_requested.load(std::memory_order_relaxed);
  if constexpr (!Plain) {
    if (may_sleep && busy_poll.count() > 0 && spin_until_work()) may_sleep = false;
  }
  if (!may_sleep) {
    submit(false);
    return;
  }
  arm_wake();
  sleeping.store(true, std::memory_order_seq_cst);
  if (!remote.empty_ordered()) {  // posted before the flag went up, without a wake-up: run it first
    sleeping.store(false, std::memory_order_relaxed);
    submit(false);
    return;
  }
  if (!Plain && keeping_histograms) [[unlikely]] {
    const std::uint32_t asleep_from = fine_now_us();
    submit(true);
    histograms.asleep_us.record(fine_now_us() - asleep_from);
  } else {
    // Not timed by default: a loop that submits and waits at every turn (each batch completes in the
    // enter) would pay two clock reads per turn, 5% of a NOP's instructions at 32 per enter.
    submit(true);
  }
  sleeping.store(false, std::memory_order_relaxed);
}

bool executor::impl::spin_until_work() {
  submit(false);
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

detail::operation* executor::impl::take_turn() {
  detail::operation* first = queue.take_all();
  for (detail::operation** link = &first; *link != nullptr;) {
    detail::operation* op = *link;
    if (detail::completes_early(op->state)) [[unlikely]] {
      *link = op->next;
      early.push_back(op);
      continue;
    }
    ++stats.ops[static_cast<std::size_t>(op->request.code)];
    link = &op->next;
  }
  return first;
}

template <bool Plain>
[[gnu::always_inline]] inline void executor::impl::run_ready() {
  if (ready.empty()) return;
  resumed += ready.size();
  resuming.swap(ready);
  if constexpr (Plain) {
    for (auto h : resuming) h.resume();
    resuming.clear();
  } else if (keeping_histograms) [[unlikely]] {
    const std::uint32_t from = fine_now_us();
    resume_batch();
    histograms.user_us.record(fine_now_us() - from);
  } else {
    resume_batch();
  }
}

void executor::impl::resume_batch() {
  if (watch_stalls) [[unlikely]] {
    for (auto h : resuming) {
      note_resumed(h);
      h.resume();
    }
    resuming.clear();
    return;
  }
  for (auto h : resuming) h.resume();
  resuming.clear();
}

void executor::run() {
  struct reopen {
    executor& ex;
    ~reopen() { detail::executor_access::reopen_posts(ex); }
  } guard{*this};
  run_until_done(nullptr);
}

std::size_t executor::poll() {
  impl& im = *impl_;
  im.check_owner("executor::poll");
  if (im.running || detail::running_executor() != nullptr)
    throw std::logic_error("executor::poll: the loop is already running");
  if (!im.backend)
    throw std::logic_error("executor::poll: the executor's ring failed earlier and was closed");
  detail::set_running_executor(this);
  struct reset {
    ~reset() { detail::set_running_executor(nullptr); }
  } guard;
  std::size_t before = im.stats.cqes + im.resumed;
  im.queue.now_ms = detail::coarse_now_ms();
  im.start_turn_clock();
  im.run_remote();
  im.run_ready();
  const int notify = im.notify_fd.load(std::memory_order_relaxed);
  if (notify >= 0) {
    std::uint64_t v;
    (void)!::read(notify, &v, sizeof v);  // cleared first: whatever comes after this sets it again
  }
  im.run_remote();
  im.run_ready();
  im.keep_watchdog_armed();
  im.submit(false);
  const std::uint64_t reaped = im.stats.cqes;
  im.reap_and_complete();
  im.run_ready();
  // What the resumed coroutines started goes to the kernel now, not at the next poll, which might never
  // come: operations, and the messages and cancels that the backend queued directly.
  im.submit(false);
  if (im.failure) {
    im.shutdown();
    detail::executor_access::reopen_posts(*this);  // poll has no frame of its own to wait for
    std::rethrow_exception(std::exchange(im.failure, nullptr));
  }
  // Work left for the next turn keeps the fd readable: coroutines made ready, posts. With DEFER_TASKRUN the
  // kernel signals only when its deferred list goes from empty to non-empty (and may leave part of a long
  // list for a later enter), so after reaping anything look once more rather than strand the rest.
  if (notify >= 0 &&
      (!im.ready.empty() || !im.remote.empty() || !im.early.empty() ||
       (im.stats.cqes != reaped && any(im.backend->active_flags() & ring_flags::defer_taskrun)))) {
    impl::signal(notify);
  }
  return im.stats.cqes + im.resumed - before;
}

template <bool Plain>
bool executor::impl::loop(std::coroutine_handle<> root) {
  for (;;) {
    if constexpr (!Plain) {
      start_turn_clock();
      if (watch_stalls) turns.store(turns.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // Tested here, not in the calls: most turns of a busy loop have neither, and a call each would cost
    // more than the test.
    if (!remote.empty()) run_remote();
    if (!ready.empty()) run_ready<Plain>();
    if (failure) {
      shutdown();
      std::rethrow_exception(std::exchange(failure, nullptr));
    }
    if (root && root.done()) {
      // Messages the task sent (MSG_RING SQEs) leave now, not whenever the loop runs next.
      backend->flush();
      return true;
    }
    if (stop_requested.load(std::memory_order_relaxed) && stop_requested.exchange(false)) {
      shutdown();
      return false;
    }
    if constexpr (!Plain) keep_watchdog_armed();
    submit_and_maybe_sleep<Plain>();
    // Read after the wait, which may have lasted minutes: what the reaped completions start is stamped
    // with now. The next turn's posts and ready coroutines use it too: only their run lies between.
    queue.now_ms = detail::coarse_now_ms();
    if constexpr (Plain) {
      reap_all();
    } else {
      start_turn_clock();
      reap_and_complete();
    }
  }
}

bool executor::run_until_done(std::coroutine_handle<> root) {
  impl& im = *impl_;
  im.check_owner("executor::run");
  if (im.running) throw std::logic_error("executor::run: not re-entrant");
  if (detail::running_executor() != nullptr)
    throw std::logic_error("executor::run: another executor is running on this thread");
  if (!im.backend) throw std::logic_error("executor::run: the executor's ring failed earlier and was closed");

  struct running_scope {
    impl& im;
    executor* self;
    running_scope(impl& i, executor* s) : im(i), self(s) {
      im.running = true;
      if (im.watch_stalls) im.looping.store(true, std::memory_order_relaxed);
      detail::set_running_executor(self);
    }
    ~running_scope() {
      if (im.watch_stalls) im.looping.store(false, std::memory_order_relaxed);
      im.running = false;
      detail::set_running_executor(nullptr);
    }
  } scope(im, this);

  if (root) im.ready.push_back(root);
  im.queue.now_ms = detail::coarse_now_ms();
  try {
    return im.plain_loop() ? im.loop<true>(root) : im.loop<false>(root);
  } catch (...) {
    // The loop itself failed (the ring refused an enter): make frames safe before the caller frees them.
    if (queue_.inflight > 0 || im.spawned.next != &im.spawned) im.shutdown();
    throw;
  }
}

}  // namespace uring
