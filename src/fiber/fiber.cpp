// fiber/fiber.cpp — the driver coroutine behind each fiber, the stack switches and their sanitizer notes.
//
// Boost.Context on Debian uses the fcontext backend, which tells neither ASan nor TSan that the stack
// changed. Every switch is therefore ours (the driver resuming the fiber, the fiber parking, the fiber
// ending) and each is annotated: ASan's start/finish_switch_fiber pair keeps its idea of the current
// stack right (it needs it to unpoison a stack an exception unwinds), TSan's fiber API gives each fiber a
// context of its own with a happens-before edge at every switch. Shutdown unwinds a fiber by resuming it
// with our own exception rather than through boost::context::fiber's destructor, whose switch is not ours.
#include "uring/fiber.hpp"

#include <boost/context/fiber.hpp>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "fiber/stack_pool.hpp"
#include "uring/spawn.hpp"

#include "sanitizers.hpp"
#ifdef URING_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef URING_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace uring::detail {

namespace {
thread_local fiber_context* t_fiber = nullptr;
// Sets the running fiber, returns the previous one (one call: the switch path is hot).
[[gnu::noinline]] fiber_context* exchange_current_fiber(fiber_context* f) noexcept {
  return std::exchange(t_fiber, f);
}
}  // namespace

fiber_context* current_fiber() noexcept { return t_fiber; }

void not_in_fiber(const char* what) {
  throw std::logic_error(std::string(what) + ": not called from a fiber (in a coroutine, use co_await)");
}

// One fiber: its Boost.Context fiber, the state its function reports to, and the bookkeeping of the
// switches. Lives in its driver's coroutine frame, so it never moves.
class fiber_context {
 public:
  fiber_context(fiber_state& state, std::size_t stack_size) : state_(state), stack_size_(stack_size) {}
  fiber_context(const fiber_context&) = delete;
  fiber_context& operator=(const fiber_context&) = delete;

  // Destroyed with its driver: after the function ended, or at executor shutdown with the fiber still
  // suspended (or never started). A suspended fiber is unwound first so that its destructors run.
  ~fiber_context() {
    unwinding_ = true;
    // The pending await throws fiber_unwind; the fiber ends and its stack goes back to the pool. A fiber
    // that swallows it gets it again from its next await.
    while (started_ && !finished_) switch_in();
#ifdef URING_TSAN
    if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  }

  // Driver side: runs the fiber until it parks or ends. Inlined into the driver: after a stack switch
  // every return mispredicts until the call depth the other side left behind is used up (the return
  // stack buffer holds the other stack's addresses), so each frame less on either side of a switch saves
  // one misprediction per switch.
  [[gnu::always_inline]] void switch_in() {
    if (!started_) start();
    fiber_context* outer = exchange_current_fiber(this);
#ifdef URING_ASAN
    __sanitizer_start_switch_fiber(&driver_fake_stack_, stack_bottom_, stack_usable_);
#endif
#ifdef URING_TSAN
    // Right before the switching call, so that its entry and the exit of the call it returns from are
    // both counted on the fiber's context (TSan keeps a shadow call stack per context).
    driver_tsan_ = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
    fiber_ = std::move(fiber_).resume();
#ifdef URING_TSAN
    // An ending fiber cannot switch back itself (Boost's last switch is not ours): do it here.
    if (finished_) __tsan_switch_to_fiber(driver_tsan_, 0);
#endif
#ifdef URING_ASAN
    __sanitizer_finish_switch_fiber(driver_fake_stack_, nullptr, nullptr);
#endif
    exchange_current_fiber(outer);
  }

  // Fiber side: hands `p` to the driver and waits until it completed.
  [[gnu::always_inline]] void park(parked_await& p) {
    pending_ = &p;
    leave(false);
    driver_ = std::move(driver_).resume();
    arrive();
    pending_ = nullptr;
    if (unwinding_) throw fiber_unwind{};
    if (suspend_error_) std::rethrow_exception(std::exchange(suspend_error_, nullptr));
  }

  [[nodiscard]] bool finished() const noexcept { return finished_; }
  [[nodiscard]] parked_await& pending() const noexcept { return *pending_; }
  void set_suspend_error(std::exception_ptr e) noexcept { suspend_error_ = std::move(e); }

 private:
  void start() {
#ifdef URING_TSAN
    // Construction runs the start of Boost's entry function on the new stack and comes back: count it
    // on the fiber's context too.
    tsan_fiber_ = __tsan_create_fiber(0);
    void* here = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
    try {
      fiber_ =
          boost::context::fiber(std::allocator_arg, recording_stack{stack_size_, this},
                                [this](boost::context::fiber&& driver) { return run(std::move(driver)); });
    } catch (...) {
#ifdef URING_TSAN
      __tsan_switch_to_fiber(here, 0);
#endif
      throw;
    }
#ifdef URING_TSAN
    __tsan_switch_to_fiber(here, 0);
#endif
    started_ = true;
  }

  // The fiber's whole life, on its own stack.
  boost::context::fiber run(boost::context::fiber&& driver) {
    driver_ = std::move(driver);
    arrive();
    if (!unwinding_) {
      try {
        state_.invoke();
      } catch (const fiber_unwind&) {
        // Unwound: it ends without a result (the driver's state_owner tells the joiner).
      }
    }
    finished_ = true;
    leave(true);
    return std::move(driver_);  // Boost switches to the driver, then frees this stack from there
  }

  // Fiber side, just after a switch in / just before a switch out.
  void arrive() noexcept {
#ifdef URING_ASAN
    __sanitizer_finish_switch_fiber(fiber_fake_stack_, &driver_stack_bottom_, &driver_stack_size_);
#endif
  }
  void leave(bool for_good) noexcept {
#ifdef URING_ASAN
    // A null save slot tells ASan this stack is done with (its fake frames may go).
    __sanitizer_start_switch_fiber(for_good ? nullptr : &fiber_fake_stack_, driver_stack_bottom_,
                                   driver_stack_size_);
#endif
#ifdef URING_TSAN
    if (!for_good) __tsan_switch_to_fiber(driver_tsan_, 0);  // for good: the driver does it (switch_in)
#endif
    (void)for_good;
  }

  // pooled_stack, telling the context where the stack lies (for the ASan notes).
  struct recording_stack {
    std::size_t size;
    fiber_context* self;
    boost::context::stack_context allocate() {
      auto sctx = pooled_stack(size).allocate();
      self->stack_bottom_ = stack_usable_bottom(sctx);
      self->stack_usable_ =
          static_cast<std::size_t>(static_cast<char*>(sctx.sp) - static_cast<char*>(self->stack_bottom_));
      return sctx;
    }
    void deallocate(boost::context::stack_context& sctx) noexcept { pooled_stack(size).deallocate(sctx); }
  };

  fiber_state& state_;
  std::size_t stack_size_;
  boost::context::fiber fiber_;   // driver side: the suspended fiber
  boost::context::fiber driver_;  // fiber side: the suspended driver
  parked_await* pending_ = nullptr;
  std::exception_ptr suspend_error_;
  bool started_ = false;
  bool finished_ = false;
  bool unwinding_ = false;
  void* stack_bottom_ = nullptr;
  std::size_t stack_usable_ = 0;
  [[maybe_unused]] void* driver_fake_stack_ = nullptr;
  [[maybe_unused]] void* fiber_fake_stack_ = nullptr;
  [[maybe_unused]] const void* driver_stack_bottom_ = nullptr;
  [[maybe_unused]] std::size_t driver_stack_size_ = 0;
  [[maybe_unused]] void* tsan_fiber_ = nullptr;
  [[maybe_unused]] void* driver_tsan_ = nullptr;
};

void park(fiber_context& f, parked_await& p) { f.park(p); }

namespace {

// The driver's side of one await: suspends on the awaiter that lives on the fiber's stack.
struct park_awaiter {
  fiber_context& f;
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(parked_await::driver_handle h) {
    parked_await& p = f.pending();
    return p.suspend(p.awaiter, h);
  }
  void await_resume() const noexcept {}
};

// The driver's hold on the fiber's state. A parameter, so that it is destroyed with the driver's frame
// even if the driver never started (its executor went away first): an unfinished fiber's joiner is then
// told (ECANCELED) instead of waiting for ever.
struct state_owner {
  std::shared_ptr<fiber_state> state;
  explicit state_owner(std::shared_ptr<fiber_state> s) noexcept : state(std::move(s)) {}
  state_owner(state_owner&&) noexcept = default;
  state_owner& operator=(state_owner&&) = delete;
  ~state_owner() {
    if (state) state->abandon();  // nothing if it finished
  }
};

task<void> drive(state_owner owner, std::size_t stack_size) {
  fiber_context f(*owner.state, stack_size);
  for (;;) {
    f.switch_in();
    if (f.finished()) break;
    try {
      co_await park_awaiter{f};
    } catch (...) {
      f.set_suspend_error(std::current_exception());  // the fiber's await throws it
    }
  }
  // A detached fiber's exception fails the executor, as a spawned task's does.
  if (std::exception_ptr e = owner.state->finish()) std::rethrow_exception(e);
}

}  // namespace

void start_fiber(executor& ex, std::shared_ptr<fiber_state> state, const fiber_options& opts) {
  task<void> t = drive(state_owner(std::move(state)), opts.stack_size);
  if (opts.stop_token.stop_possible()) {
    auto h = t.release();
    h.promise().set_stop_token(opts.stop_token);
    t = task<void>(h);
  }
  uring::spawn(ex, std::move(t));
}

// fiber_state: the hand-over between a fiber's driver and its handle.

std::exception_ptr fiber_state::finish() noexcept {
  std::lock_guard lock(mutex_);
  done_ = true;
  // Nobody will see the error when the handle is gone and no join is waiting (a join awaited before the
  // handle was dropped still gets it).
  const bool unseen = detached_ && waiter_ == nullptr;
  wake_locked(false);
  return unseen ? std::exchange(error_, nullptr) : nullptr;
}

void fiber_state::abandon() noexcept {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  error_ = std::make_exception_ptr(std::system_error(
      ECANCELED, std::system_category(), "uring::fiber: its executor shut down before the fiber ended"));
  wake_locked(true);
}

// Under the mutex, so that a joining frame being destroyed (which unparks under it) never sees a half
// delivered wake-up, and never gets one after it returned.
// `shutting_down`: called while this thread's executor shuts down, whose ring submits nothing more: a
// joiner elsewhere is told through its mailbox, not by a MSG_RING from this ring.
void fiber_state::wake_locked(bool shutting_down) noexcept {
  waiter* w = std::exchange(waiter_, nullptr);
  if (w == nullptr) return;
  // Refused: that executor shuts down and frees the joiner's frame itself.
  if (shutting_down) {
    (void)executor_access::try_post(*w->home, *w);
  } else if (running_executor() == w->home) {
    executor_access::schedule(*w->home, w->handle);
  } else {
    (void)executor_access::send(*w->home, *w);
  }
}

void fiber_state::detach() noexcept {
  std::lock_guard lock(mutex_);
  detached_ = true;
}

bool fiber_state::done() const noexcept {
  std::lock_guard lock(mutex_);
  return done_;
}

bool fiber_state::park_joiner(waiter& w) {
  std::lock_guard lock(mutex_);
  if (done_) return false;
  if (waiter_ != nullptr)
    throw std::logic_error("uring::fiber_handle::join: the fiber is already being joined");
  waiter_ = &w;
  return true;
}

void fiber_state::unpark_joiner(waiter& w) noexcept {
  std::lock_guard lock(mutex_);
  if (waiter_ == &w) waiter_ = nullptr;
}

void fiber_state::check_result() {
  std::lock_guard lock(mutex_);
  if (taken_) throw std::logic_error("uring::fiber_handle::join: the fiber was already joined");
  taken_ = true;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace uring::detail
