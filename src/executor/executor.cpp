// executor/executor.cpp — an executor's construction and destruction, its accessors, and the hooks the
// library's awaitables call (executor_access) and its net layer asks of it (executor_core).
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "executor/executor_state.hpp"
#include "uring/error.hpp"
#include "uring/executor_handle.hpp"
#include "uring/kernel_features.hpp"
#include "uring/message.hpp"

namespace uring {

namespace detail {
namespace {
thread_local executor* t_running = nullptr;
}  // namespace

executor* running_executor() noexcept { return t_running; }
void set_running_executor(executor* ex) noexcept { t_running = ex; }
}  // namespace detail

executor::executor() : executor(options{}) {}

executor::executor(const options& opts) : impl_(std::make_unique<impl>(queue_, ready_)) {
  impl_->spawned.prev = impl_->spawned.next = &impl_->spawned;
  impl_->self = this;
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (impl_->wake_fd < 0) throw std::system_error(errno, std::system_category(), "executor: eventfd");
  try {
    set_up(opts);
  } catch (...) {
    ::close(impl_->wake_fd);  // no destructor runs for an executor whose constructor throws
    throw;
  }
}

void executor::set_up(const options& opts) {
  const plan_overrides overrides = plan_overrides::from_environment();
  impl_->plan = make_plan(probed_kernel(), opts, overrides);
  queue_.refused = opts.allowed_ops.refused();
  impl_->busy_poll = opts.busy_poll;
  impl_->direct_files = opts.direct_files;
  impl_->stuck_after = opts.stuck_after;
  if (opts.histograms) {
    impl_->keeping_histograms = impl_->observing = true;
    impl_->histograms.latency_us.resize(detail::kOpCodeCount);
  }
  impl_->on_stuck = opts.on_stuck;
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
      emulated.notes.push_back(std::string("backend: emulated, because the ring could not be set up: ") +
                               e.what());
      if (opts.napi_busy_poll.count() > 0) emulated.notes.push_back("napi: off after that fallback");
      impl_->plan = std::move(emulated);
    }
  }
  if (!impl_->backend) impl_->backend = detail::make_emulated_backend(opts, impl_->stats);
  if (impl_->plan.napi) {
    const auto us =
        std::min<std::int64_t>(opts.napi_busy_poll.count(), std::numeric_limits<std::uint32_t>::max());
    const detail::napi_settings napi{static_cast<std::uint32_t>(us), opts.napi_prefer_busy_poll};
    if (int r = impl_->backend->enable_napi(napi); r < 0)
      throw std::system_error(-r, std::system_category(), "executor: NAPI busy polling (napi_busy_poll)");
  }
  impl_->ring = impl_->backend->native();
  if (impl_->ring != nullptr) {
    impl_->ring->offer_inline_sq(queue_);
    impl_->ring->offer_inline_cq(impl_->cq);
  }
  queue_.started = impl_->stats.ops.data();  // the inline path counts what it starts
  queue_.update_inline_codes();
  impl_->msg_ring_ok = impl_->plan.backend == backend_kind::native && impl_->plan.msg_ring;
  impl_->raw_ring_ok = impl_->msg_ring_ok && probed_kernel().msg_ring_flags_pass;
  impl_->ring_fd = impl_->ring != nullptr ? impl_->ring->ring_fd() : -1;
  if (impl_->msg_ring_ok && impl_->plan.send_msg_ring) impl_->doorbell_fd = impl_->ring_fd;
  impl_->hub = std::make_unique<detail::message_hub>(
      *this, impl_->stats, opts.message_window,
      detail::raw_route{&queue_, impl_->raw_ring_ok, impl_->ring_fd, &impl_->refusing_messages});
  if (opts.stall_after.count() > 0) {  // last: nothing may throw after the monitor holds this executor
    detail::watch_stalls(
        {impl_.get(), &impl_->turns, &impl_->looping, &impl_->sleeping, &impl_->last_resumed},
        opts.stall_after, opts.on_stall);
    impl_->watch_stalls = impl_->observing = true;
  }
}

executor::~executor() {
  if (std::this_thread::get_id() != impl_->owner) {
    std::fprintf(stderr, "uring: an executor must be destroyed on the thread that created it\n");
    std::abort();
  }
  if (impl_->watch_stalls) detail::unwatch_stalls(impl_.get());
  impl_->refuse_posts();
  impl_->hub->close();
  // The frames destroyed here belong to this executor: code in their destructors (a send, a post) runs
  // as on it, and its hand-offs take the mailbox because the ring is closing.
  executor* const outer = std::exchange(detail::t_running, this);
  if (!impl_->quiesced_final) impl_->quiesce();
  impl_->hub->settle();
  impl_->release_frames();
  queue_.live.release();
  detail::t_running = outer;
  impl_->doorbell_fd = -1;
  impl_->cq = {};  // nothing may read the ring after this
  queue_.sqes = nullptr;
  queue_.update_inline_codes();
  impl_->ring = nullptr;
  impl_->backend.reset();  // the ring's exit drops its eventfd registration
  ::close(impl_->wake_fd);
  if (int n = impl_->notify_fd.load(std::memory_order_relaxed); n >= 0) ::close(n);
  // Last: a handle's post or send that found us in the registry holds its lock while it looks at us,
  // so leaving waits for it, and none can start once the members below are being destroyed.
  impl_->hub->leave_registry();
}

executor_handle executor::handle() const noexcept { return executor_handle(impl_->hub->id()); }

const executor_stats& executor::stats() const noexcept { return impl_->stats; }

std::size_t executor::operations_in_flight() const noexcept {
  return queue_.inflight - (impl_->wake_armed ? 1 : 0) -
         (impl_->watchdog_tick.state != detail::op_state::idle ? 1 : 0);
}

const executor_plan& executor::plan() const noexcept { return impl_->plan; }

bool executor::registered_ring() const noexcept {
  return impl_->backend && impl_->backend->registered_ring();
}

ring_flags executor::active_flags() const noexcept {
  return impl_->backend ? impl_->backend->active_flags() : ring_flags::none;
}

ring_flags executor::dropped_flags() const noexcept {
  return impl_->backend ? impl_->backend->dropped_flags() : ring_flags::none;
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
  if (err == EACCES && ex != nullptr && ex->queue_.refused.contains(code)) {
    std::string what = name;
    what += what == to_string(code) ? ": not" : std::string(": op_kind::") + to_string(code) + " is not";
    what += " in this executor's op allowlist (executor_options::allowed_ops)";
    throw std::system_error(EACCES, std::system_category(), what);
  }
  throw_errno(err, name);
}

void executor_access::refuse_while_closed() {
  throw std::logic_error(
      "uring: an operation was started while its executor shuts down (or after its ring failed)");
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
  op.cancel_sent = true;
  if (op.state == op_state::queued) {
    op.state = op_state::cancelled_early;  // never reaches the kernel; completes -ECANCELED at the turn's end
  } else if (op.state == op_state::submitted && ex.impl_->backend) {
    ex.impl_->backend->cancel(op);
  }
}

void executor_access::flush(executor& ex) {
  if (ex.impl_->backend) ex.impl_->backend->flush();
}

int executor_core::register_buf_ring(executor& ex, void* ring, unsigned entries, std::uint16_t group,
                                     std::uint16_t flags) {
  if (!ex.impl_->plan.buf_ring || ex.impl_->ring == nullptr) return -EOPNOTSUPP;
  return ex.impl_->ring->register_buf_ring(ring, entries, group, flags);
}

int executor_core::unregister_buf_ring(executor& ex, std::uint16_t group) {
  if (ex.impl_->ring == nullptr) return 0;  // the ring is gone, and its buffer rings with it
  return ex.impl_->ring->unregister_buf_ring(group);
}

void executor_core::empty_slot(executor& ex, unsigned index) noexcept {
  if (accepting(ex) && ex.impl_->backend) (void)ex.impl_->backend->empty_slot(index);
}

// Here rather than in messaging/: the thread's executor and its hub are read in place, so that a send is
// one call (uring::send's await_ready), not four.
int try_send_message(executor& target, const message& m) noexcept {
  executor* from = t_running;
  if (from == nullptr) [[unlikely]]
    return EPERM;
  return executor_core::hub(*from).try_send(target, m);
}

}  // namespace detail

}  // namespace uring
