// executor.cpp — the run loop, spawned-frame ownership and the shutdown that keeps frames safe.
#include "uring/executor.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "uring/spawn.hpp"

namespace uring {

struct executor::impl {
  explicit impl(detail::op_queue& q) : queue(q) {}

  detail::op_queue& queue;  // lives in the executor itself, for the inline submit path
  std::thread::id owner = std::this_thread::get_id();
  executor_stats stats;
  executor_plan plan;
  std::unique_ptr<detail::backend> backend;
  std::vector<std::coroutine_handle<>> ready;
  std::vector<std::coroutine_handle<>> resuming;  // the turn's batch; kept to reuse its capacity
  detail::spawn_node spawned;                     // sentinel of the circular list of live spawned frames
  std::exception_ptr failure;                     // first exception that escaped a spawned task
  bool running = false;
  bool stop_requested = false;

  void check_owner(const char* what) const {
    if (std::this_thread::get_id() != owner) {
      throw std::logic_error(std::string(what) + ": called off the executor's owner thread");
    }
  }

  void run_ready() {
    if (ready.empty()) return;
    resuming.swap(ready);
    for (auto h : resuming) h.resume();
    resuming.clear();
  }

  // Completes every available completion. During shutdown the completions are only counted: nothing is
  // resumed, because the frames are about to be destroyed.
  void reap_and_complete() {
    constexpr std::size_t kBatch = 64;
    detail::completion batch[kBatch];
    for (;;) {
      std::size_t n = backend->reap(batch, kBatch);
      stats.cqes += n;
      // The kernel's work between two turns evicts most coroutine frames from L1: fetch the whole
      // batch's operations (which sit in those frames) before resuming the first one.
      for (std::size_t i = 0; i < n; ++i) __builtin_prefetch(reinterpret_cast<const void*>(batch[i].user_data));
      for (std::size_t i = 0; i < n; ++i) {
        if (batch[i].user_data == 0) continue;  // our own fire-and-forget request
        --queue.inflight;
        if (queue.closed) continue;
        reinterpret_cast<detail::operation*>(batch[i].user_data)->finish(batch[i].res, batch[i].flags);
      }
      if (n < kBatch) return;
    }
  }

  // Cancels and drains every in-flight operation, then destroys the spawned frames. After it, no
  // completion can refer to a frame, so frames may be freed.
  void shutdown() noexcept {
    queue.closed = true;
    // Operations awaited this turn never reached the kernel: forget them.
    for (detail::operation* op = queue.take_all(); op != nullptr; op = op->next) --queue.inflight;
    try {
      if (queue.inflight > 0) {
        backend->cancel_all();
        while (queue.inflight > 0) {
          backend->submit(nullptr, true);
          reap_and_complete();
        }
      }
    } catch (const std::exception& e) {
      // The ring no longer answers: closing it makes the kernel cancel and reap everything it holds.
      std::fprintf(stderr, "uring: executor shutdown could not drain its ring (%s); closing it\n", e.what());
      backend.reset();
      queue.inflight = 0;
    }
    while (spawned.next != &spawned) {
      detail::spawn_node* node = spawned.next;
      unlink(*node);
      node->frame.destroy();
    }
    ready.clear();
    queue.closed = backend == nullptr;  // a closed ring stays closed
  }

  static void unlink(detail::spawn_node& node) noexcept {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = nullptr;
  }
};

executor::executor() : executor(options{}) {}

executor::executor(const options& opts) : impl_(std::make_unique<impl>(queue_)) {
  impl_->spawned.prev = impl_->spawned.next = &impl_->spawned;
  impl_->plan = make_plan(probed_kernel(), opts, plan_overrides::from_environment());
  impl_->backend = impl_->plan.backend == backend_kind::native
                       ? detail::make_native_backend(opts, impl_->plan, impl_->stats)
                       : detail::make_emulated_backend(opts, impl_->stats);
}

executor::~executor() {
  if (std::this_thread::get_id() != impl_->owner) {
    std::fprintf(stderr, "uring: an executor must be destroyed on the thread that created it\n");
    std::abort();
  }
  impl_->shutdown();
}

void executor::stop() noexcept { impl_->stop_requested = true; }

const executor_stats& executor::stats() const noexcept { return impl_->stats; }

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

  im.stop_requested = false;
  im.ready.push_back(root);
  try {
    for (;;) {
      im.run_ready();
      if (im.failure) {
        im.shutdown();
        std::rethrow_exception(std::exchange(im.failure, nullptr));
      }
      if (root.done()) return true;
      if (im.stop_requested) {
        im.shutdown();
        return false;
      }
      im.backend->submit(queue_.take_all(), im.ready.empty());
      im.reap_and_complete();
    }
  } catch (...) {
    // The loop itself failed (the ring refused an enter): make frames safe before the caller frees them.
    if (queue_.inflight > 0 || im.spawned.next != &im.spawned) im.shutdown();
    throw;
  }
}

namespace detail {

void executor_access::no_executor(const char* what) {
  throw std::logic_error(std::string(what) + ": no executor is running on this thread");
}

void executor_access::refuse_while_closed() {
  throw std::logic_error("uring: an operation was started while its executor shuts down (or after its ring failed)");
}

void executor_access::schedule(executor& ex, std::coroutine_handle<> h) { ex.impl_->ready.push_back(h); }

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

}  // namespace detail

}  // namespace uring
