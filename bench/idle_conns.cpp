// uring-idle-conns: memory per idle connection of an echo server, as RSS delta / connections.
//
//   uring-idle-conns [--connections 10000] [--backend native|emulated] [--recv leased|buffer]
//                    [--pool 256] [--size 4096]
//
// The server (this process, one executor on its own thread) accepts with a multishot accept and runs one
// coroutine per connection that echoes, either by leased receives from one shared buffer_pool of --pool
// buffers of --size bytes (`leased`: an idle connection holds no buffer), or by read_some into a
// --size-byte buffer of its own in the coroutine frame (`buffer`: the classic shape). A child process (so
// that the server's fd limit is all its own) opens the connections and echoes one byte on each, so every
// connection has received, sent, and is idle again with its receive armed. The server's VmRSS before the
// first connection and once all are idle gives the figure; a second round of echoes on every connection
// checks they all still work. Prints one line per figure.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <uring/uring.hpp>

namespace {

using uring::task;
using uring::net::buffer_pool;
using uring::net::tcp_listener;
using uring::net::tcp_stream;

struct config {
  int connections = 10000;
  uring::backend_kind backend = uring::backend_kind::native;
  bool leased = true;
  std::uint32_t pool = 256;
  std::uint32_t size = 4096;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "uring-idle-conns: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) {
      std::fprintf(stderr,
                   "usage: uring-idle-conns [--connections N] [--backend native|emulated] "
                   "[--recv leased|buffer] [--pool N] [--size BYTES]\n");
      std::exit(2);
    }
    ++i;
    if (a == "--connections") {
      c.connections = std::atoi(v);
    } else if (a == "--backend") {
      c.backend = std::string(v) == "emulated" ? uring::backend_kind::emulated : uring::backend_kind::native;
    } else if (a == "--recv") {
      c.leased = std::string(v) == "leased";
    } else if (a == "--pool") {
      c.pool = static_cast<std::uint32_t>(std::atoi(v));
    } else if (a == "--size") {
      c.size = static_cast<std::uint32_t>(std::atoi(v));
    } else {
      std::fprintf(stderr, "uring-idle-conns: unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  return c;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

void raise_nofile(rlim_t want) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = std::min(std::max(r.rlim_cur, want), r.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < want) {
    std::fprintf(stderr, "uring-idle-conns: RLIMIT_NOFILE's hard limit %lu is below %lu\n",
                 static_cast<unsigned long>(r.rlim_max), static_cast<unsigned long>(want));
    std::exit(1);
  }
}

// --- the server ---------------------------------------------------------------------------------------

task<void> echo_leased(tcp_stream s, buffer_pool* pool) {
  try {
    for (;;) {
      uring::net::leased_buffer chunk = co_await s.recv(*pool);
      if (chunk.empty()) break;
      co_await s.write_all(chunk);
    }
  } catch (const std::system_error&) {
  }
}

template <std::size_t N>
task<void> echo_buffer(tcp_stream s) {
  std::array<char, N> buf;
  try {
    for (;;) {
      std::size_t n = co_await s.read_some(buf);
      if (n == 0) break;
      co_await s.write_all(std::span(buf.data(), n));
    }
  } catch (const std::system_error&) {
  }
}

task<void> serve(const tcp_listener* l, const config* c, std::atomic<bool>* ready) {
  buffer_pool pool({.count = c->pool, .size = c->size});
  if (c->leased)
    std::printf("pool: %u x %u bytes, %s\n", c->pool, c->size, pool.uses_ring() ? "buffer ring" : "no ring");
  auto connections = l->accept_all();
  ready->store(true);
  for (;;) {
    tcp_stream s = co_await connections.next();
    if (c->leased) {
      uring::spawn(echo_leased(std::move(s), &pool));
    } else if (c->size <= 4096) {
      uring::spawn(echo_buffer<4096>(std::move(s)));
    } else {
      uring::spawn(echo_buffer<16384>(std::move(s)));
    }
  }
}

// --- the client (a child process) ---------------------------------------------------------------------

void echo_one(int fd) {
  char b = 'x';
  if (::send(fd, &b, 1, MSG_NOSIGNAL) != 1) fail("client send");
  if (::recv(fd, &b, 1, MSG_WAITALL) != 1) fail("client recv");
}

// Connects `n` sockets to `port` and echoes a byte on each; tells the parent (byte on `report`); waits for
// its word (a byte on `go`) to echo again on each; reports; waits for the end (EOF on `go`).
[[noreturn]] void client(int n, std::uint16_t port, int report, int go) {
  raise_nofile(static_cast<rlim_t>(n) + 64);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fds;
  fds.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("client socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) fail("client connect");
    echo_one(fd);
    fds.push_back(fd);
  }
  char b = 'r';
  if (::write(report, &b, 1) != 1) fail("client report");
  if (::read(go, &b, 1) != 1) fail("client wait");
  for (int fd : fds) echo_one(fd);
  if (::write(report, &b, 1) != 1) fail("client report");
  (void)!::read(go, &b, 1);
  for (int fd : fds) ::close(fd);
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  raise_nofile(static_cast<rlim_t>(c.connections) + 256);
  auto listener = tcp_listener::bind(uring::net::address::parse("127.0.0.1:0"), {.backlog = 4096});
  const std::uint16_t port = listener.local_address().port();

  int report[2], go[2];
  if (::pipe(report) != 0 || ::pipe(go) != 0) fail("pipe");
  pid_t child = ::fork();  // before any thread starts
  if (child < 0) fail("fork");
  if (child == 0) {
    ::close(report[0]);
    ::close(go[1]);
    client(c.connections, port, report[1], go[0]);
  }
  ::close(report[1]);
  ::close(go[0]);

  std::atomic<bool> ready{false};
  uring::executor* server_ex = nullptr;
  std::atomic<bool> started{false};
  std::thread server([&] {
    uring::executor_options o;
    o.backend = c.backend;
    uring::executor ex(o);
    server_ex = &ex;
    started.store(true);
    try {
      ex.run(serve(&listener, &c, &ready));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "server: %s\n", e.what());
    }
  });
  while (!ready.load()) std::this_thread::yield();
  const long before = rss_kib();

  char b;
  if (::read(report[0], &b, 1) != 1) fail("waiting for the client");
  const long after = rss_kib();
  if (::write(go[1], &b, 1) != 1) fail("go");
  if (::read(report[0], &b, 1) != 1) fail("waiting for the second round");  // every connection still echoes
  const long after_second = rss_kib();

  const double per_conn = static_cast<double>(after - before) * 1024.0 / c.connections;
  std::printf(
      "%s recv, %s backend: %d idle connections: RSS %ld KiB -> %ld KiB (%ld after a second echo round): "
      "%.0f bytes per connection\n",
      c.leased ? "leased" : "buffer", c.backend == uring::backend_kind::native ? "native" : "emulated",
      c.connections, before, after, after_second, per_conn);

  ::close(go[1]);  // the client closes its sockets and exits
  int status = 0;
  ::waitpid(child, &status, 0);
  server_ex->post([ex = server_ex] { ex->stop(); });
  server.join();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
