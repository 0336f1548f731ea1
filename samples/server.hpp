// samples/server.hpp — the thread-per-core TCP server skeleton shared by uring-echo and uring-http (built on
// server_setup.hpp, which uring-kv uses directly).
//
// Provides: sample::server_flags and sample::flag_reader (the common flags --address, --port, --threads,
// --backend, --accept one|reuseport, --recv leased|copy, --drain-timeout and the parsing of numbers),
// sample::worker and sample::input_ends_at_drain (one executor's connections, a uring::task_scope, and
// its drain), and sample::run_server, which binds one SO_REUSEPORT listener per thread, runs an
// executor per thread with a multishot accept loop that spawns handler(stream, worker*, endpoint) (or, with
// --accept one, one listener on the first thread handing connections to every thread in turn), prints
// "<name>: listening on ADDRESS (N threads, BACKEND backend, leased|copy recv)" ("listening on ADDRESS and
// on ADDRESS2 for NAME (..." with a second port), and on SIGTERM/SIGINT (a
// signalfd) drains: stop accepting, let every connection finish within --drain-timeout, end the ones still
// open then (worker::abort), exit status 0 (1 if a worker failed). An executor that cannot start (io_uring
// demanded but unusable) ends the program at once, status 1, with the reason and no "listening" line.
// A failed accept (out of fds) is retried after a backoff and logged at most once a second
// (samples::accept_backoff).
// Threads: run_server is called once, from main. A worker belongs to its executor's thread, except that
// main posts the drain to it; a handler runs on the worker's thread.
#pragma once

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <uring/task_scope.hpp>
#include <uring/uring.hpp>

#include "server_setup.hpp"

namespace sample {

struct server_flags {
  std::string address = "127.0.0.1";
  int port = 7000;
  int threads = 1;
  uring::backend_kind backend = uring::backend_kind::automatic;
  // How connections reach the threads: each its own SO_REUSEPORT listener (the kernel spreads them), or
  // one listener on the first thread, which hands each connection to the threads in turn (a spawn onto
  // the target executor: MSG_RING between native rings, else its mailbox).
  bool accept_one = false;
  // How connections receive: `leased` chunks from one buffer_pool per executor (uring/net/buffer_pool.hpp:
  // an idle connection holds no receive buffer, natively one multishot recv per connection over a
  // provided-buffer ring; without one a poll, then a recv into a pool buffer), or `copy` into a buffer of
  // the connection's own.
  enum class recv_kind { leased, copy } recv = recv_kind::leased;
  uring::net::buffer_pool::options pool{};  // the pool's buffers: each sample picks its own
  // How long a drain waits for connections to finish before it ends the rest (worker::abort).
  std::chrono::milliseconds drain_timeout{5000};
  // executor_options::histograms: the loop's and the operations' histograms, for a metrics page.
  bool histograms = false;
  // A second port on the same address (uring-http's HTTPS), named in the banner by `second_name`; its
  // connections reach the handler as endpoint 1. -1: none.
  int second_port = -1;
  const char* second_name = "";
};

// Walks argv: flag() is the current argument, value() and number() consume the one after it; a missing
// or bad value prints why and calls usage(2).
class flag_reader {
 public:
  flag_reader(const char* program, int argc, char** argv, void (*usage)(int)) noexcept
      : program_(program), argc_(argc), argv_(argv), usage_(usage) {}

  bool next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
    return true;
  }
  [[nodiscard]] const std::string& flag() const noexcept { return flag_; }

  std::string value() {
    if (i_ + 1 >= argc_) {
      std::fprintf(stderr, "%s: %s needs a value\n", program_, flag_.c_str());
      usage_(2);
    }
    return argv_[++i_];
  }

  double number(double lo, double hi) {
    std::string v = value();
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || d < lo || d > hi) {
      std::fprintf(stderr, "%s: %s: '%s' is not a number in [%g, %g]\n", program_, flag_.c_str(), v.c_str(),
                   lo, hi);
      usage_(2);
    }
    return d;
  }

  // Reads the current flag into `f` if it is a common one (or --help); false otherwise.
  bool common(server_flags& f) {
    if (flag_ == "--address") {
      f.address = value();
    } else if (flag_ == "--port") {
      f.port = static_cast<int>(number(0, 65535));
    } else if (flag_ == "--threads") {
      f.threads = static_cast<int>(number(1, 1024));
    } else if (flag_ == "--backend") {
      std::string b = value();
      if (!samples::parse_backend(b, f.backend)) {
        std::fprintf(stderr, "%s: --backend: '%s' is not auto, native or emulated\n", program_, b.c_str());
        usage_(2);
      }
    } else if (flag_ == "--accept") {
      std::string a = value();
      if (a != "one" && a != "reuseport") {
        std::fprintf(stderr, "%s: --accept: '%s' is not one or reuseport\n", program_, a.c_str());
        usage_(2);
      }
      f.accept_one = a == "one";
    } else if (flag_ == "--recv") {
      std::string r = value();
      if (r != "leased" && r != "copy") {
        std::fprintf(stderr, "%s: --recv: '%s' is not leased or copy\n", program_, r.c_str());
        usage_(2);
      }
      f.recv = r == "leased" ? server_flags::recv_kind::leased : server_flags::recv_kind::copy;
    } else if (flag_ == "--drain-timeout") {
      f.drain_timeout = std::chrono::milliseconds(static_cast<long>(number(0, 1e6) * 1000));
    } else if (flag_ == "--help" || flag_ == "-h") {
      usage_(0);
    } else {
      return false;
    }
    return true;
  }

  [[noreturn]] void unknown() {
    std::fprintf(stderr, "%s: unknown argument '%s'\n", program_, flag_.c_str());
    usage_(2);
    std::abort();  // usage does not return
  }

 private:
  const char* program_;
  int argc_;
  char** argv_;
  void (*usage_)(int);
  int i_ = 0;
  std::string flag_;
};

// One executor's share of the server: its connections and the drain.
struct worker {
  std::stop_source drain;  // requested on the worker's own thread: stop accepting, end connections' input
  // Requested on the worker's thread at the drain deadline: a handler must then end every operation it
  // has in flight (pass the token to its reads and writes), so that the process exits in bounded time.
  std::stop_source abort;
  // The connections being served: each handler is a member, spawned on this worker's executor (by its own
  // accept loop, or handed over by the one acceptor); the drain joins it.
  uring::task_scope connections;
  std::mutex mutex;
  uring::executor* ex = nullptr;  // null once the executor is gone (guarded by mutex)
  std::string start_failure;      // why the executor could not start (written before the start latch)
  std::string failure;
  int handed_in = 0;  // --accept one: connections handed to this worker (its thread's count)
  // The executor's receive buffers, shared by its connections (--recv leased); null: each connection
  // copies into a buffer of its own. Set before the executor starts serving, gone with it.
  uring::net::buffer_pool* pool = nullptr;
  // The executor by a name that stays safe after it is gone (set before any worker serves), and every
  // worker of the server, this one included: for handlers that gather figures from all of them.
  uring::executor_handle handle;
  const std::vector<std::unique_ptr<worker>>* all = nullptr;
};

// A handler's guard: at the drain, shuts down the connection's receiving side (shutdown(SHUT_RD)), which
// wakes a waiting read on either backend. Reads then return the bytes that had arrived, then end of
// stream: what a peer sent before the drain is still answered, and the close finds nothing unread, so it
// is an orderly FIN (a close with unread bytes would reset the connection and could destroy the answer).
// Construct it on the worker's thread, after the stream and before its reads; it must not outlive them.
class input_ends_at_drain {
 public:
  input_ends_at_drain(const uring::net::tcp_stream& s, worker& w)
      : callback_(w.drain.get_token(), shut{s.fd()}) {}

 private:
  struct shut {
    int fd;
    void operator()() const noexcept { ::shutdown(fd, SHUT_RD); }
  };
  std::stop_callback<shut> callback_;
};

// `work` within `limit` (zero: no limit), stopped by `stop` in place of the awaiting task's token: a
// connection's timed step (a write a slow reader must not hold forever), cut off by the drain's abort.
template <class T>
uring::task<T> bounded(uring::task<T> work, std::chrono::nanoseconds limit, std::stop_token stop) {
  if (limit.count() > 0) work = uring::with_timeout(std::move(work), limit);
  return uring::with_stop_token(std::move(work), std::move(stop));
}

namespace detail {

// Serves a connection handed over by the accepting thread, on the target worker's thread.
template <class Handler>
uring::task<void> handed_off(uring::net::tcp_stream s, worker* w, Handler handler, int endpoint) {
  ++w->handed_in;
  co_await handler(std::move(s), w, endpoint);
}

// Where the accept loop sends each connection: itself (the worker's own listener), or, with one
// acceptor, each worker in turn.
struct dispatch {
  std::vector<worker*> targets;  // empty: serve here
  std::size_t next = 0;
};

// Hands `s` to the next worker; a worker that is gone or stopping refuses it, and the connection closes.
template <class Handler>
void hand_off(dispatch& d, uring::net::tcp_stream s, const Handler& handler, int endpoint) {
  worker* target = d.targets[d.next++ % d.targets.size()];
  std::lock_guard lock(target->mutex);
  if (target->ex == nullptr) return;
  try {
    target->connections.spawn(*target->ex, handed_off(std::move(s), target, handler, endpoint));
  } catch (const std::exception&) {
    // It is draining (its executor refuses work, or its connections have all ended): the task, and the
    // connection in it, is dropped, closed.
  }
}

// Waits for the worker's connections to finish, at most `limit`; then ends the ones left (worker::abort)
// and waits for them, which their handlers make prompt.
inline uring::task<void> wind_down(const char* program, worker* w, std::chrono::milliseconds limit) {
  bool ended = false;
  if (limit.count() > 0) {
    try {
      co_await uring::with_timeout(w->connections.join(), limit);
      ended = true;
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::timed_out) throw;
    }
  }
  if (!ended) {
    if (const std::size_t open = w->connections.size(); open > 0) {
      std::fprintf(stderr, "%s: drain: %zu connection%s still open after %g s: closing\n", program, open,
                   open == 1 ? "" : "s", static_cast<double>(limit.count()) / 1000);
    }
    w->abort.request_stop();
    co_await w->connections.join();
  }
}

// Resumes a worker without a listener (--accept one) once the drain is requested.
struct drain_requested {
  worker* w;
  std::optional<std::stop_callback<std::function<void()>>> callback;
  bool await_ready() const noexcept { return w->drain.stop_requested(); }
  void await_suspend(std::coroutine_handle<> h) {
    // request_stop runs on this worker's thread (posted there): resume on a later turn, not inside it.
    callback.emplace(w->drain.get_token(), [h] { uring::executor::current()->post([h] { h.resume(); }); });
  }
  void await_resume() noexcept {}
};

// Accepts on `listener` until the drain, spawning handler(stream, w, endpoint) for each connection (or
// handing it to the next worker).
template <class Handler>
uring::task<void> accept_until_drain(const char* program, const uring::net::tcp_listener& listener, worker* w,
                                     const Handler& handler, dispatch* d, int endpoint) {
  auto connections = listener.accept_all();
  samples::accept_backoff backoff;
  while (!w->drain.stop_requested()) {
    uring::net::tcp_stream s;
    bool failed = false;
    try {
      s = co_await uring::with_stop_token(connections.next(), w->drain.get_token());
    } catch (const std::system_error& e) {
      if (w->drain.stop_requested()) break;
      // Out of fds and the like: say so (rate-limited) and retry later; the connection waits in the
      // backlog meanwhile.
      const std::string line = backoff.failed(program, e.what());
      if (!line.empty()) std::fputs(line.c_str(), stderr);
      failed = true;
    }
    if (failed) {
      co_await uring::with_stop_token(uring::sleep_for(backoff.delay()).nothrow(), w->drain.get_token());
      continue;
    }
    if (backoff.delay().count() > 0) {
      const std::string line = backoff.succeeded(program);
      if (!line.empty()) std::fputs(line.c_str(), stderr);
    }
    if (!d->targets.empty()) {
      hand_off(*d, std::move(s), handler, endpoint);
      continue;
    }
    w->connections.spawn(handler(std::move(s), w, endpoint));
  }
}

// A worker's listeners: none (--accept one, on a thread that does not accept), the one of --port, and
// the one of the second port when there is one.
struct worker_listeners {
  const uring::net::tcp_listener* first = nullptr;
  const uring::net::tcp_listener* second = nullptr;
};

// Accepts on the worker's listeners until the drain, then waits for its connections to finish. Without a
// listener it only waits for the drain. The handler is a parameter, so it lives in this coroutine's frame
// while connections are spawned.
template <class Handler>
uring::task<void> accept_loop(const char* program, worker_listeners listeners, worker* w, Handler handler,
                              dispatch* d, std::chrono::milliseconds drain_limit) {
  if (listeners.first == nullptr) {
    co_await drain_requested{w, {}};
  } else if (listeners.second == nullptr) {
    co_await accept_until_drain(program, *listeners.first, w, handler, d, 0);
  } else {
    co_await uring::when_all(accept_until_drain(program, *listeners.first, w, handler, d, 0),
                             accept_until_drain(program, *listeners.second, w, handler, d, 1));
  }
  co_await wind_down(program, w, drain_limit);
}

template <class Handler>
void run_worker(const char* program, worker_listeners listeners, worker* w, const server_flags* f,
                uring::executor_options opts, Handler handler, dispatch* d, std::latch* started) {
  try {
    uring::executor ex(opts);
    // Destroyed before the executor, after every connection has finished (the accept loop waits for them).
    std::optional<uring::net::buffer_pool> pool;
    if (f->recv == server_flags::recv_kind::leased) pool.emplace(ex, f->pool);
    w->pool = pool ? &*pool : nullptr;
    w->handle = ex.handle();
    {
      std::lock_guard lock(w->mutex);
      w->ex = &ex;
    }
    // Every worker's handle is set before any of them serves: a handler may reach the others through
    // `all` (the metrics page gathers each executor's figures) from its first connection.
    started->arrive_and_wait();
    started = nullptr;
    try {
      ex.run(accept_loop(program, listeners, w, handler, d, f->drain_timeout));
    } catch (...) {
      std::lock_guard lock(w->mutex);
      w->ex = nullptr;
      throw;
    }
    std::lock_guard lock(w->mutex);
    w->ex = nullptr;
  } catch (const std::exception& e) {
    if (started != nullptr) {
      w->start_failure = e.what();
      started->count_down();
    } else {
      w->failure = e.what();
    }
  }
}

}  // namespace detail

// Runs the server until SIGTERM/SIGINT (SIGUSR1: print each executor's operations in flight) and returns
// main's exit status. `handler(tcp_stream, worker*, int endpoint)` returns the task<void> serving one
// connection accepted on --port (endpoint 0) or on the second port (1); it is copied to every thread, so
// it should be cheap to copy and must not be a coroutine lambda with captures.
template <class Handler>
int run_server(const char* program, const server_flags& f, Handler handler) {
  // SIGTERM and SIGINT are blocked in every thread (the mask is inherited) and read from a signalfd.
  int signal_fd = -1;
  try {
    signal_fd = samples::termination_signalfd();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }

  // Every listener is bound here, before any thread starts: a bad address or a port in use ends the
  // program with the reason, and --port 0 yields one port that all of them share.
  std::vector<uring::net::tcp_listener> listeners;
  std::vector<uring::net::tcp_listener> second_listeners;
  std::string where;
  try {
    listeners = samples::bind_reuseport(f.address, f.port, f.accept_one ? 1 : f.threads);
    where = listeners.front().local_address().to_string();
    if (f.second_port >= 0) {
      second_listeners = samples::bind_reuseport(f.address, f.second_port, f.accept_one ? 1 : f.threads);
      where += " and on " + second_listeners.front().local_address().to_string() + " for " + f.second_name;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    ::close(signal_fd);
    return 1;
  }

  uring::executor_options opts;
  opts.backend = f.backend;
  opts.histograms = f.histograms;
  std::vector<std::unique_ptr<worker>> workers;
  for (int i = 0; i < f.threads; ++i) workers.push_back(std::make_unique<worker>());
  for (auto& w : workers) w->all = &workers;
  detail::dispatch dispatch;  // used by the first thread only
  if (f.accept_one) {
    for (auto& w : workers) dispatch.targets.push_back(w.get());
  }
  std::vector<std::thread> threads;
  std::latch started(f.threads);
  for (int i = 0; i < f.threads; ++i) {
    const auto n = static_cast<std::size_t>(i);
    detail::worker_listeners mine;
    if (n < listeners.size()) mine.first = &listeners[n];
    if (n < second_listeners.size()) mine.second = &second_listeners[n];
    threads.emplace_back(detail::run_worker<Handler>, program, mine, workers[n].get(), &f, opts, handler,
                         &dispatch, &started);
  }
  started.wait();
  const auto drain_all = [&] {
    for (auto& w : workers) {
      std::lock_guard lock(w->mutex);
      if (w->ex == nullptr) continue;
      try {
        w->ex->post([wp = w.get()] { wp->drain.request_stop(); });
      } catch (const std::system_error&) {
        // It stopped already.
      }
    }
    for (auto& t : threads) t.join();
    ::close(signal_fd);
  };
  // An executor that could not start (the native backend demanded where io_uring is unusable, say) ends
  // the program now, with the reason: a server that says "listening" must serve.
  for (auto& w : workers) {
    if (w->start_failure.empty()) continue;
    std::fprintf(stderr, "%s: %s\n", program, w->start_failure.c_str());
    drain_all();
    return 1;
  }
  std::string backend = "?";
  {
    std::lock_guard lock(workers.front()->mutex);
    if (workers.front()->ex != nullptr) {
      const uring::executor_plan& plan = workers.front()->ex->plan();
      backend = to_string(plan.backend);
      std::fputs(samples::backend_choice(program, plan, f.backend).c_str(), stderr);
    }
  }
  // Every worker decides alike (same flags, same kernel): the first one's choice is everyone's.
  const char* recv = workers.front()->pool != nullptr ? "leased" : "copy";
  std::printf("%s: listening on %s (%d threads, %s backend, %s recv%s)\n", program, where.c_str(), f.threads,
              backend.c_str(), recv, f.accept_one ? ", one acceptor" : "");
  std::fflush(stdout);

  const int signo = samples::wait_for_termination(signal_fd, [&] {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      std::lock_guard lock(workers[i]->mutex);
      if (workers[i]->ex != nullptr) samples::print_inflight(program, i, *workers[i]->ex);
    }
  });
  std::fprintf(stderr, "%s: %s: draining\n", program, strsignal(signo));
  drain_all();
  if (f.accept_one) {
    std::string counts;
    for (auto& w : workers) counts += " " + std::to_string(w->handed_in);
    std::fprintf(stderr, "%s: connections handed to each thread:%s\n", program, counts.c_str());
  }
  int status = 0;
  for (auto& w : workers) {
    if (!w->failure.empty()) {
      std::fprintf(stderr, "%s: a worker failed: %s\n", program, w->failure.c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace sample
