/// @file
/// uring/task_scope.hpp — structured concurrency: tasks spawned into a scope end before the scope does.
///
/// Provides: uring::task_scope.
/// Threads: spawn into it from any thread (onto any executor); co_await join() from a coroutine on any
/// executor, or join_blocking() from a plain thread; request_stop() from anywhere.
///
/// Every member runs with the scope's stop token: request_stop() cancels the operations of all of them
/// (they typically end with ECANCELED, which the scope does not count as a failure once it was stopped).
/// The first member to fail stops the others, and join() rethrows its exception once every member has
/// ended. Members may spawn more members until then; once a joined scope's members have all ended,
/// spawning into it is a std::logic_error. A member whose executor shuts down before it ends (or refuses
/// it: spawn then also throws) counts as failed (ESHUTDOWN).
/// Destroying a scope that was not joined stops its members; on a plain thread it then waits for them
/// (their executors must be running, as in an executor_group: a member queued on an executor whose run()
/// has not started would be waited for until that executor is destroyed by another thread).
/// On an executor's thread it cannot wait (the members may need that very thread): they end on their own,
/// their frames owned by their executors as any spawned task's, so co_await join() there first.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <utility>

#include "uring/detail/join_point.hpp"
#include "uring/spawn.hpp"
#include "uring/task.hpp"
#include "uring/task_adapters.hpp"

namespace uring {

namespace detail {

struct scope_state {
  std::stop_source stop;
  std::atomic<std::size_t> count{1};  ///< live members, plus one for the scope until it is joined
  std::atomic<bool> closed{false};
  std::mutex mutex;  ///< guards error
  std::exception_ptr error;
  join_point done;

  void enter() {
    std::size_t n = count.load(std::memory_order_acquire);
    do {
      if (n == 0) throw std::logic_error("uring::task_scope::spawn: the scope has ended (joined)");
    } while (!count.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
  }
  void leave() noexcept {
    if (count.fetch_sub(1, std::memory_order_acq_rel) == 1) done.signal();
  }
  void close() noexcept {
    if (!closed.exchange(true, std::memory_order_acq_rel)) leave();
  }
  void fail(std::exception_ptr e) noexcept {
    {
      std::lock_guard lock(mutex);
      if (error) return;
      error = std::move(e);
    }
    stop.request_stop();
  }
  void rethrow() {
    std::lock_guard lock(mutex);
    if (error) std::rethrow_exception(error);
  }
};

/// One member's place in the scope, held in the member's frame as a parameter: it leaves the scope however
/// the frame ends (normally, or destroyed by an executor that shut down, started or not).
class scope_ticket {
 public:
  explicit scope_ticket(std::shared_ptr<scope_state> s) : scope_(std::move(s)) { scope_->enter(); }
  scope_ticket(scope_ticket&& o) noexcept : scope_(std::move(o.scope_)), ended_(o.ended_) {}
  scope_ticket& operator=(scope_ticket&&) = delete;
  ~scope_ticket() {
    if (!scope_) return;
    if (!ended_)
      scope_->fail(std::make_exception_ptr(
          std::system_error(ESHUTDOWN, std::system_category(),
                            "uring::task_scope: a member's executor shut down before it ended")));
    scope_->leave();
  }
  scope_state& scope() const noexcept { return *scope_; }
  void end() noexcept { ended_ = true; }

 private:
  std::shared_ptr<scope_state> scope_;
  bool ended_ = false;
};

/// A member's frame is the spawned frame itself, which the executor owns as any spawned task's: no
/// join_handle and no second frame per member (a server's connection is a member, so this is per
/// connection). So the frame keeps only the task and the ticket across the await: no reference to the
/// scope, no token.
template <class T>
spawned scope_member(task<T> t, scope_ticket ticket) {
  t = with_stop_token(std::move(t), ticket.scope().stop.get_token());
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    // A cancel the scope's stop caused is the stop's doing, not a failure of its own.
    scope_state& s = ticket.scope();
    if (e.code().value() != ECANCELED || !s.stop.stop_requested()) s.fail(std::current_exception());
  } catch (...) {
    ticket.scope().fail(std::current_exception());
  }
  ticket.end();
}

}  // namespace detail

/// Structured concurrency: tasks spawned into a scope end before the scope does. Every member runs with the
/// scope's stop token; the first member to fail stops the others, and join() rethrows its exception once
/// every member has ended (the file's comment has the rules for spawning late and for destruction).
///
/// Threads: spawn into it from any thread (onto any executor); co_await join() from a coroutine on any
/// executor, or join_blocking() from a plain thread; request_stop() from anywhere.
class task_scope {
 public:
  /// An empty scope.
  task_scope() : state_(std::make_shared<detail::scope_state>()) {}
  task_scope(const task_scope&) = delete;
  task_scope& operator=(const task_scope&) = delete;
  /// A scope that was not joined stops its members; on a plain thread it then waits for them, on an
  /// executor's thread it cannot (they end on their own: co_await join() there first).
  ~task_scope() {
    if (state_->closed.load(std::memory_order_acquire)) return;
    state_->stop.request_stop();
    state_->close();
    if (detail::running_executor() == nullptr) state_->done.wait_blocking("uring::task_scope");
  }

  /// Starts `t` as a member on the executor running on this thread.
  template <class T>
  void spawn(task<T> t) {
    executor& ex = detail::executor_access::current("uring::task_scope::spawn");
    detail::start_here(ex, detail::scope_member(std::move(t), detail::scope_ticket(state_)));
  }
  /// Starts `t` as a member on `target` (an executor& or executor_handle), from any thread. ESHUTDOWN as
  /// uring::spawn if the target no longer accepts work.
  template <class Target, class T>
  void spawn(Target&& target, task<T> t) {
    detail::start_on(std::forward<Target>(target),
                     detail::scope_member(std::move(t), detail::scope_ticket(state_)));
  }
  /// The callable form: `fn` and `args` live in the member's frame (see uring/spawn.hpp).
  template <class Target, class F, class... Args>
  requires std::invocable<F&, Args&...>
  void spawn(Target&& target, F fn, Args... args) {
    spawn(std::forward<Target>(target), detail::call_in_frame(std::move(fn), std::move(args)...));
  }

  /// Stops every member: their pending operations are cancelled.
  void request_stop() noexcept { state_->stop.request_stop(); }
  /// The scope's stop token, which every member runs with.
  [[nodiscard]] std::stop_token stop_token() const noexcept { return state_->stop.get_token(); }
  /// Members that have not ended yet (a snapshot).
  [[nodiscard]] std::size_t size() const noexcept {
    const std::size_t n = state_->count.load(std::memory_order_acquire);
    return state_->closed.load(std::memory_order_acquire) ? n : n - 1;
  }

  /// Closes the scope and waits for every member to end; rethrows the first member's exception.
  [[nodiscard]] task<void> join() {
    auto s = state_;  // the scope object may go once the caller resumes
    s->close();
    co_await s->done.wait("uring::task_scope::join");
    s->rethrow();
  }
  /// The same from a thread that runs no executor (std::logic_error on an executor's thread).
  void join_blocking() {
    state_->close();
    state_->done.wait_blocking("uring::task_scope::join_blocking");
    state_->rethrow();
  }

 private:
  std::shared_ptr<detail::scope_state> state_;
};

}  // namespace uring
