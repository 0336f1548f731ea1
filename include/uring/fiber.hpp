/// @file
/// uring/fiber.hpp — stackful fibers that share an executor with coroutines (library uring::fiber).
///
/// Provides: uring::fiber_options, uring::fiber_handle<T>, uring::spawn_fiber, uring::fiber_stacks_in_use,
/// uring::this_fiber::{await, sleep_for, yield, join, in_fiber}.
/// Threads: spawn_fiber from any thread (as uring::spawn). this_fiber::* only from code running on a fiber
/// (std::logic_error elsewhere). A handle may be joined once, from a coroutine on any executor
/// (`co_await h.join()`) or from another fiber (`this_fiber::join(h)`); done() and destruction from anywhere.
///
/// A fiber is ordinary blocking-style code on a stack of its own:
///
///   auto h = uring::spawn_fiber(exec, [fd] {
///     char buf[512];
///     std::size_t n = uring::this_fiber::await(uring::read(fd, buf));   // suspends this fiber only
///     return n;
///   });
///   std::size_t n = co_await h.join();                                   // from a coroutine
///
/// `this_fiber::await(a)` takes any awaitable of the library (every operation, resume_on, submit_to, tasks,
/// channel sends and receives, mutex and semaphore waits, joins) and returns what `co_await a` would, or
/// throws what it would. Only the fiber waits: the executor runs its coroutines and other fibers meanwhile.
/// An awaitable that is ready at once (await_ready) costs no switch.
///
/// How it runs: each fiber is driven by a small coroutine spawned on the executor. Resuming that driver
/// switches onto the fiber's stack; an await switches back to the driver, which `co_await`s the awaitable
/// on the fiber's behalf (it lives on the fiber's stack meanwhile) and switches back in when it completes.
/// So fibers and coroutines share one ready queue and one ring and interleave fairly, on every backend,
/// and any awaitable works with no special support. Operations awaited in a fiber follow
/// fiber_options::stop_token, as a task's follow the task's.
///
/// Migration: `this_fiber::await(uring::resume_on(other))` moves the fiber to `other`'s thread (its stack is
/// only memory); its later awaits run on `other`'s ring. As for a coroutine, the fiber stays owned by the
/// executor it was spawned on; executors a fiber travels between must stop together (executor_group).
/// Code on a fiber must not keep a thread_local's address, or a thread's identity, across such an await.
///
/// Stacks: fiber_options::stack_size usable bytes (default 128 KiB) with a PROT_NONE guard page below, from
/// a process-wide pool, so an overflow faults at once instead of overwriting memory. Frames larger than a
/// page can jump the guard page: keep big buffers off fiber stacks. Pages are committed only when touched.
///
/// Results: the fiber function's return value or exception comes back through join(). Dropping a handle
/// without joining detaches the fiber: if a detached fiber later ends with an exception, that exception
/// shuts its executor down and is rethrown from executor::run(), as for uring::spawn (an exception already
/// stored when the handle is dropped is dropped with it).
///
/// Shutdown: stopping (or destroying) an executor unwinds each fiber that is suspended on it: an exception
/// of an internal type (not a std::exception) is thrown from the fiber's pending await, so its destructors
/// run, and its stack returns to the pool. Code on a fiber that catches (...) must rethrow, as with thread
/// cancellation; if it swallows the unwind, the next await throws it again. A join waiting for a fiber
/// that was unwound throws std::system_error(ECANCELED).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"
#include "uring/task.hpp"
#include "uring/time.hpp"

namespace uring {

/// How spawn_fiber makes a fiber: its stack and the stop token its operations follow. Threads: a plain value.
struct fiber_options {
  /// 128 KiB.
  static constexpr std::size_t kDefaultStackSize = 128 * 1024;
  /// Usable stack bytes, rounded up to whole pages; one guard page more is mapped below them.
  std::size_t stack_size = kDefaultStackSize;
  /// Operations awaited on the fiber are cancelled (ECANCELED) when this is stopped.
  std::stop_token stop_token{};
};

/// Fiber stacks handed out and not yet returned, process-wide (diagnostics: it goes back to where it was
/// once every fiber has ended or been unwound).
[[nodiscard]] std::size_t fiber_stacks_in_use() noexcept;

template <class T>
class fiber_handle;

namespace detail {

/// Thrown from a suspended fiber's await to unwind its stack when its executor shuts down.
struct fiber_unwind {};

class fiber_context;

/// The fiber running on this thread, or null. Out of line for the reason running_executor() is.
[[gnu::noinline]] fiber_context* current_fiber() noexcept;
[[noreturn]] void not_in_fiber(const char* what);

/// One await of a fiber: the awaiter (on the fiber's stack) and how to suspend the driver on it.
struct parked_await {
  using driver_handle = std::coroutine_handle<task_promise<void>>;
  void* awaiter;
  std::coroutine_handle<> (*suspend)(void* awaiter, driver_handle driver);
};

/// Switches from the fiber to its driver, which awaits `p`; returns on the fiber once that completed.
/// Throws what the awaiter's await_suspend threw, or fiber_unwind when the executor shuts down.
void park(fiber_context& f, parked_await& p);

template <class Aw>
std::coroutine_handle<> suspend_on(void* awaiter, parked_await::driver_handle driver) {
  Aw& aw = *static_cast<Aw*>(awaiter);
  using R = decltype(aw.await_suspend(driver));
  if constexpr (std::is_void_v<R>) {
    aw.await_suspend(driver);
    return std::noop_coroutine();
  } else if constexpr (std::is_same_v<R, bool>) {
    if (aw.await_suspend(driver)) return std::noop_coroutine();
    return driver;  // not suspended after all: the driver goes on at once and switches back in
  } else {
    return aw.await_suspend(driver);
  }
}

template <class A>
concept has_member_co_await = requires(A&& a) {
  static_cast<A&&>(a).operator co_await();
};

template <class Aw>
decltype(auto) await_on(fiber_context& f, Aw& aw) {
  if (!aw.await_ready()) {
    parked_await p{&aw, &suspend_on<Aw>};
    park(f, p);
  }
  return aw.await_resume();
}

/// this_fiber::await, naming `what` in the error it throws outside a fiber.
template <class A>
decltype(auto) await_as(const char* what, A&& a) {
  fiber_context* f = current_fiber();
  if (f == nullptr) not_in_fiber(what);
  if constexpr (has_member_co_await<A>) {
    auto aw = std::forward<A>(a).operator co_await();
    return await_on(*f, aw);
  } else {
    return await_on(*f, a);
  }
}

/// What a finished fiber leaves for its joiner, shared by the handle and the fiber's driver.
class fiber_state {
 public:
  fiber_state() = default;
  fiber_state(const fiber_state&) = delete;
  fiber_state& operator=(const fiber_state&) = delete;
  virtual ~fiber_state() = default;

  /// On the fiber: runs the function, keeps its value or exception (never lets one out but fiber_unwind).
  virtual void invoke() = 0;

  /// A coroutine waiting in join(); its node is posted to the joiner's executor when the fiber ends.
  struct waiter : remote_node {
    std::coroutine_handle<> handle;
    executor* home = nullptr;
  };

  /// Driver side, once the function returned: wakes the joiner. Returns the exception a detached fiber
  /// must report (its handle is gone), else null.
  std::exception_ptr finish() noexcept;
  /// Driver side: the fiber was unwound (or never ran) before its function returned.
  void abandon() noexcept;
  /// Handle side.
  void detach() noexcept;
  [[nodiscard]] bool done() const noexcept;
  /// Join: false (and `w` parked) if the fiber has not ended yet; throws if a join already waits.
  bool park_joiner(waiter& w);
  void unpark_joiner(waiter& w) noexcept;  ///< the joining frame is destroyed while it waits
  /// The stored exception is rethrown; a second join is a std::logic_error.
  void check_result();

 protected:
  std::exception_ptr error_;

 private:
  void wake_locked(bool shutting_down) noexcept;

  mutable std::mutex mutex_;
  waiter* waiter_ = nullptr;
  bool done_ = false;
  bool detached_ = false;
  bool taken_ = false;
};

/// The fiber's value of type T (nothing for void), next to its exception.
template <class T>
class fiber_result : public fiber_state {
  static_assert(!std::is_reference_v<T>, "uring::spawn_fiber: a fiber returns a value, not a reference");

 public:
  T take() {
    check_result();
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }

 protected:
  template <class F>
  void run_body(F& fn) {
    if constexpr (std::is_void_v<T>) {
      fn();
    } else {
      value_.emplace(fn());
    }
  }

 private:
  [[no_unique_address]] std::conditional_t<std::is_void_v<T>, std::monostate, std::optional<T>> value_;
};

template <class T, class F>
class fiber_body final : public fiber_result<T> {
 public:
  explicit fiber_body(F fn) : fn_(std::move(fn)) {}

  void invoke() override {
    try {
      this->run_body(*fn_);
    } catch (const fiber_unwind&) {
      fn_.reset();
      throw;
    } catch (...) {
      this->error_ = std::current_exception();
    }
    fn_.reset();  // its captures go when the fiber ends, on the fiber
  }

 private:
  std::optional<F> fn_;
};

/// Spawns the driver of `state` on `ex` (out of line: it is where Boost.Context is used).
void start_fiber(executor& ex, std::shared_ptr<fiber_state> state, const fiber_options& opts);

/// Resumes the awaiting driver on the next turn of its executor: lets every other ready coroutine and
/// fiber run first.
struct yield_awaitable {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    executor_access::schedule(executor_access::current("uring::this_fiber::yield"), h);
  }
  void await_resume() const noexcept {}
};

}  // namespace detail

/// The result of spawn_fiber: join it to get the fiber's value or exception.
///
/// Threads: a handle may be joined once, from a coroutine on any executor (`co_await h.join()`) or from
/// another fiber (`this_fiber::join(h)`); done() and destruction from anywhere.
template <class T>
class [[nodiscard]] fiber_handle {
 public:
  /// What join() returns: awaited, it yields the fiber's value or rethrows its exception.
  class [[nodiscard]] join_awaitable : private detail::fiber_state::waiter {
   public:
    /// For join(): the join of the fiber whose result `s` holds; std::logic_error for an empty handle.
    explicit join_awaitable(std::shared_ptr<detail::fiber_result<T>> s) : state_(std::move(s)) {
      if (!state_) throw std::logic_error("uring::fiber_handle::join: empty handle (moved from or detached)");
      run = [](detail::remote_node* n) noexcept { static_cast<join_awaitable*>(n)->handle.resume(); };
      discard = [](detail::remote_node*) noexcept {};  // a shutting-down executor frees the frame itself
    }
    join_awaitable(const join_awaitable&) = delete;
    join_awaitable& operator=(const join_awaitable&) = delete;
    ~join_awaitable() {
      if (parked_) state_->unpark_joiner(*this);
    }

    ///@{
    /// The awaiter protocol, called by `co_await`. await_suspend throws std::logic_error when no executor
    /// runs on this thread.
    bool await_ready() const noexcept { return state_->done(); }
    bool await_suspend(std::coroutine_handle<> caller) {
      handle = caller;
      home = &detail::executor_access::current("uring::fiber_handle::join");
      parked_ = state_->park_joiner(*this);
      return parked_;
    }
    T await_resume() {
      parked_ = false;
      return state_->take();
    }
    ///@}

   private:
    std::shared_ptr<detail::fiber_result<T>> state_;
    bool parked_ = false;
  };

  /// An empty handle.
  fiber_handle() noexcept = default;
  ///@{
  /// Moves the handle; `o` is left empty (an assigned-to handle first detaches its own fiber).
  fiber_handle(fiber_handle&&) noexcept = default;
  fiber_handle& operator=(fiber_handle&& o) noexcept {
    if (this != &o) {
      detach();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ///@}
  fiber_handle(const fiber_handle&) = delete;
  fiber_handle& operator=(const fiber_handle&) = delete;
  /// Detaches the fiber, if the handle still holds it.
  ~fiber_handle() { detach(); }

  /// `co_await h.join()` from a coroutine, `this_fiber::join(h)` from a fiber: the fiber's value, or its
  /// exception rethrown; std::system_error(ECANCELED) if its executor shut down before it ended; a
  /// std::logic_error for a second join.
  join_awaitable join() const { return join_awaitable(state_); }

  /// True once the fiber has ended (returned, thrown, or been unwound).
  [[nodiscard]] bool done() const noexcept { return state_ && state_->done(); }
  /// True while the handle holds a fiber (not default-made, moved from or detached).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

  /// Lets the fiber run on without a handle (see "Results" above).
  void detach() noexcept {
    if (state_) {
      state_->detach();
      state_.reset();
    }
  }

  /// For spawn_fiber: the handle of the fiber whose result `s` will hold.
  explicit fiber_handle(std::shared_ptr<detail::fiber_result<T>> s) noexcept : state_(std::move(s)) {}

 private:
  std::shared_ptr<detail::fiber_result<T>> state_;
};

/// Starts `fn()` on a new fiber on `ex`, from any thread (it starts on a later turn of ex's loop). Returns
/// its handle. Throws std::system_error(ESHUTDOWN) if `ex` no longer accepts work, and std::system_error
/// if no stack can be mapped.
template <class F>
auto spawn_fiber(executor& ex, F&& fn, const fiber_options& opts = {}) {
  using T = std::invoke_result_t<std::decay_t<F>&>;
  auto state = std::make_shared<detail::fiber_body<T, std::decay_t<F>>>(std::forward<F>(fn));
  detail::start_fiber(ex, state, opts);
  return fiber_handle<T>(std::move(state));
}

namespace this_fiber {

/// True when the calling code runs on a fiber.
[[nodiscard]] inline bool in_fiber() noexcept { return detail::current_fiber() != nullptr; }

/// Suspends the calling fiber until `a` completes and returns its result, or throws its exception, as
/// `co_await a` would in a coroutine. `a` may be an rvalue (an operation) or an lvalue (it must then stay
/// valid until the call returns). std::logic_error outside a fiber.
template <class A>
decltype(auto) await(A&& a) {
  return detail::await_as("uring::this_fiber::await", std::forward<A>(a));
}

/// Suspends the calling fiber for `d` (an io_uring timeout, as uring::sleep_for).
template <class Rep, class Period>
void sleep_for(std::chrono::duration<Rep, Period> d) {
  detail::await_as("uring::this_fiber::sleep_for", uring::sleep_for(d));
}

/// Lets every other ready coroutine and fiber of the executor run, then continues.
inline void yield() { detail::await_as("uring::this_fiber::yield", detail::yield_awaitable{}); }

/// Waits for another fiber to end: its value, or its exception rethrown.
template <class T>
T join(const fiber_handle<T>& h) {
  return detail::await_as("uring::this_fiber::join", h.join());
}

}  // namespace this_fiber

}  // namespace uring
