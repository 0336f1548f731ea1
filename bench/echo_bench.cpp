// TCP echo throughput: round trips per second through a server on its own thread, N connections from one
// client thread (each connection: send 64 bytes, wait for them to come back, again); 1, 16, 64 and 256
// connections.
//   epoll     a plain epoll echo server written here (level-triggered, non-blocking sockets): the baseline
//   uring     uring-echo's shape on the native backend: one multishot accept, a coroutine per connection
//             looping read_some / write_all
//   emulated  the same coroutines on the emulated backend (epoll + MSG_DONTWAIT inside the library)
//   *_leased  the same, receiving by stream.recv(pool) from one shared buffer_pool (native: a buffer ring
//             and one recv armed per connection; emulated: poll, then recv into pool buffers); bundled
//             receives where the plan has them, one buffer per receive with URING_DISABLE=recv_bundle
//   *_leased_inc  the same from an incremental pool (many chunks per buffer: natively IOU_PBUF_RING_INC,
//             6.12+), which takes no bundles
// The leased variants report pool_peak_KiB: the most pool memory that held chunks at once (buffers neither
// available nor free, times their size), sampled after each receive.
// The client is the same plain epoll loop for all three, so the ratio compares the servers. Counters
// server_ns and client_ns: each thread's CPU time (user and system) per echo, steadier than echoes/s
// when the two threads share the cores with others.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

namespace {

constexpr std::size_t kMessage = 64;

[[noreturn]] void fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// The CPU clock of `t`, readable from any thread.
clockid_t cpu_clock(std::thread& t) {
  clockid_t c{};
  if (::pthread_getcpuclockid(t.native_handle(), &c) != 0) fail("pthread_getcpuclockid");
  return c;
}
double cpu_ns(clockid_t c) {
  timespec t{};
  ::clock_gettime(c, &t);
  return 1e9 * static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec);
}

// --- the plain epoll server ---------------------------------------------------------------------------

class epoll_server {
 public:
  explicit epoll_server(int listen_fd) : listen_fd_(listen_fd) {
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { loop(); });
  }
  clockid_t clock() { return cpu_clock(thread_); }
  ~epoll_server() {
    std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
    ::close(stop_fd_);
  }

 private:
  void loop() {
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
    add(ep, listen_fd_);
    add(ep, stop_fd_);
    std::vector<int> conns;
    std::array<char, 4096> buf;
    epoll_event events[64];
    for (;;) {
      int n = ::epoll_wait(ep, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == stop_fd_) {
          for (int c : conns) ::close(c);
          ::close(ep);
          return;
        }
        if (fd == listen_fd_) {
          for (int c; (c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
            add(ep, c);
            conns.push_back(c);
          }
          continue;
        }
        ssize_t got = ::recv(fd, buf.data(), buf.size(), 0);
        if (got <= 0) {
          if (got < 0 && errno == EAGAIN) continue;
          ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
          continue;  // closed at the end
        }
        for (ssize_t off = 0; off < got;) {  // 64-byte echoes never fill the send buffer; loop anyway
          ssize_t w = ::send(fd, buf.data() + off, static_cast<std::size_t>(got - off), MSG_NOSIGNAL);
          if (w > 0)
            off += w;
          else if (errno != EAGAIN)
            break;
        }
      }
    }
  }
  static void add(int ep, int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }

  int listen_fd_;
  int stop_fd_ = -1;
  std::thread thread_;
};

// --- our server ---------------------------------------------------------------------------------------

uring::task<void> echo_connection(uring::net::tcp_stream s) {
  std::array<char, 4096> buf;
  for (;;) {
    auto r = co_await s.read_some(buf).nothrow();
    if (r.res <= 0) co_return;
    co_await s.write_all(std::span(buf.data(), static_cast<std::size_t>(r.res)));
  }
}

enum class receiving { copy, leased, leased_incremental };

// The most buffers of the leased server's pool out at once (written by the server's thread, read once it
// has stopped).
std::atomic<std::uint32_t> g_peak_in_use{0};

// The same loop by leased receives from one pool shared by every connection (uring/net/buffer_pool.hpp).
uring::task<void> echo_leased(uring::net::tcp_stream s, uring::net::buffer_pool* pool) {
  for (;;) {
    uring::net::leased_buffer chunk = co_await s.recv(*pool);
    if (chunk.empty()) co_return;
    const std::uint32_t in_use = pool->count() - pool->available();
    if (in_use > g_peak_in_use.load(std::memory_order_relaxed))
      g_peak_in_use.store(in_use, std::memory_order_relaxed);
    co_await s.write_all(chunk);
  }
}

uring::task<void> serve(const uring::net::tcp_listener* l, receiving how) {
  uring::net::buffer_pool pool(
      {.count = 256, .size = 4096, .incremental = how == receiving::leased_incremental});
  auto connections = l->accept_all();
  for (;;) {
    uring::net::tcp_stream s = co_await connections.next();
    if (how != receiving::copy) {
      uring::spawn(echo_leased(std::move(s), &pool));
    } else {
      uring::spawn(echo_connection(std::move(s)));
    }
  }
}

class uring_server {
 public:
  uring_server(const uring::net::tcp_listener& l, uring::backend_kind backend, receiving how) {
    std::latch ready(1);
    thread_ = std::thread([&, backend, how] {
      uring::executor::options opts;
      opts.backend = backend;
      uring::executor ex(opts);
      ex_ = &ex;
      ready.count_down();
      ex.run(serve(&l, how));  // until stop(): the shutdown cancels the accept and every connection
      stopped_.wait();         // stop() may still be waking the loop: the executor outlives that call
    });
    ready.wait();
  }
  clockid_t clock() { return cpu_clock(thread_); }
  ~uring_server() {
    ex_->stop();
    stopped_.count_down();
    thread_.join();
  }

 private:
  std::latch stopped_{1};
  std::thread thread_;
  uring::executor* ex_ = nullptr;
};

// --- the client, the same for every server --------------------------------------------------------------

void run_client(benchmark::State& state, int port, clockid_t server_clock) {
  const auto conns = static_cast<int>(state.range(0));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<int> fds;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < conns; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) fail("connect");
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    fds.push_back(fd);
  }
  char msg[kMessage];
  std::memset(msg, 'm', sizeof msg);
  std::vector<std::size_t> pending(static_cast<std::size_t>(conns));
  char buf[4096];
  epoll_event events[64];
  const double server0 = cpu_ns(server_clock), client0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  // Each batch: every connection sends one message, then all N echoes are collected.
  while (state.KeepRunningBatch(conns)) {
    for (int i = 0; i < conns; ++i) {
      if (::send(fds[static_cast<std::size_t>(i)], msg, sizeof msg, MSG_NOSIGNAL) != kMessage) fail("send");
      pending[static_cast<std::size_t>(i)] = kMessage;
    }
    int outstanding = conns;
    while (outstanding > 0) {
      int n = ::epoll_wait(ep, events, 64, 10'000);
      // EINTR: a signal, or task work an io_uring of this thread queued with TWA_SIGNAL (a ring set up
      // without COOP_TASKRUN by an earlier benchmark, e.g. the raw eventfd one). Not a lost echo.
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("epoll_wait (no echo within 10 s)");
      for (int e = 0; e < n; ++e) {
        auto i = events[e].data.u32;
        ssize_t got = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
        if (got == 0) fail("the server closed a connection");
        if (got < 0) continue;
        pending[i] -= static_cast<std::size_t>(got);
        if (pending[i] == 0) --outstanding;
      }
    }
  }
  const auto echoes = static_cast<double>(state.iterations());
  state.counters["server_ns"] = (cpu_ns(server_clock) - server0) / echoes;
  state.counters["client_ns"] = (cpu_ns(CLOCK_THREAD_CPUTIME_ID) - client0) / echoes;
  state.SetItemsProcessed(state.iterations());
  for (int fd : fds) ::close(fd);
  ::close(ep);
}

void BM_echo_epoll(benchmark::State& state) {
  auto l = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  epoll_server server(l.fd());
  run_client(state, l.local_address().port(), server.clock());
}

void echo_ours(benchmark::State& state, uring::backend_kind backend, receiving how = receiving::copy) {
  auto l = uring::net::tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"));
  g_peak_in_use.store(0);
  {
    uring_server server(l, backend, how);
    run_client(state, l.local_address().port(), server.clock());
  }
  if (how != receiving::copy) state.counters["pool_peak_KiB"] = g_peak_in_use.load() * 4.0;
}

void BM_echo_uring(benchmark::State& state) { echo_ours(state, uring::backend_kind::native); }
void BM_echo_emulated(benchmark::State& state) { echo_ours(state, uring::backend_kind::emulated); }
void BM_echo_uring_leased(benchmark::State& state) {
  echo_ours(state, uring::backend_kind::native, receiving::leased);
}
void BM_echo_emulated_leased(benchmark::State& state) {
  echo_ours(state, uring::backend_kind::emulated, receiving::leased);
}
void BM_echo_uring_leased_inc(benchmark::State& state) {
  echo_ours(state, uring::backend_kind::native, receiving::leased_incremental);
}
void BM_echo_emulated_leased_inc(benchmark::State& state) {
  echo_ours(state, uring::backend_kind::emulated, receiving::leased_incremental);
}

}  // namespace

BENCHMARK(BM_echo_epoll)->Name("echo/epoll")->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(BM_echo_uring)->Name("echo/uring")->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(BM_echo_emulated)->Name("echo/emulated")->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(BM_echo_uring_leased)->Name("echo/uring_leased")->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseRealTime();
BENCHMARK(BM_echo_emulated_leased)
    ->Name("echo/emulated_leased")
    ->Arg(1)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->UseRealTime();
BENCHMARK(BM_echo_uring_leased_inc)
    ->Name("echo/uring_leased_inc")
    ->Arg(1)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->UseRealTime();
BENCHMARK(BM_echo_emulated_leased_inc)
    ->Name("echo/emulated_leased_inc")
    ->Arg(1)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->UseRealTime();
