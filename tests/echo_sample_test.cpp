// uring-echo as a user runs it: a real process on an ephemeral port, real clients, SIGTERM drains it and it
// exits 0. Natively and emulated, with one and with two executors, receiving by leased buffers and by copy.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <uring/kernel_features.hpp>

#include "test_util.hpp"

extern char** environ;

namespace {

using uring::test::unique_fd;

// The sample running as a child, its stdout and stderr on pipes.
class echo_process {
 public:
  explicit echo_process(std::vector<std::string> args) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    args.insert(args.begin(), URING_ECHO_PROGRAM);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, URING_ECHO_PROGRAM, &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    out_.reset(out[0]);
    err_.reset(err[0]);
  }
  ~echo_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // The first line of stdout.
  std::string first_line() {
    std::string line;
    char c;
    while (::read(out_.get(), &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  // stderr as far as the first `needle` after what was read before (empty if it does not come within
  // `limit`); what follows it stays for the next call or errors().
  std::string errors_until(const std::string& needle, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (const auto at = seen_.find(needle); at != std::string::npos) {
        std::string upto = seen_.substr(0, at + needle.size());
        seen_.erase(0, at + needle.size());
        return upto;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{err_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
      char buf[512];
      const ssize_t n = ::read(err_.get(), buf, sizeof buf);
      if (n <= 0) return {};
      seen_.append(buf, static_cast<std::size_t>(n));
    }
  }
  // Everything on stderr not yet returned, once the process has ended.
  std::string errors() {
    std::string all = std::exchange(seen_, {});
    char buf[512];
    for (ssize_t n; (n = ::read(err_.get(), buf, sizeof buf)) > 0;)
      all.append(buf, static_cast<std::size_t>(n));
    return all;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit status, or -1 if it did not exit normally.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  unique_fd out_, err_;
  std::string seen_;  // read from stderr, not yet returned
};

int port_of(const std::string& line) {
  auto colon = line.find("127.0.0.1:");
  return colon == std::string::npos ? -1 : std::atoi(line.c_str() + colon + 10);
}

// A blocking client with a receive timeout, so that a broken server fails the test instead of hanging it.
unique_fd connect_to(int port) {
  unique_fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval limit{10, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) s.reset();
  return s;
}

// A blocking socket call (`call` returns its result), again after EINTR. With SO_RCVTIMEO set, a blocking
// recv is never restarted: it fails with EINTR when the process is stopped and continued, or frozen and
// thawed, even with no signal handler (signal(7)). That happened under CI load, and the echo read as
// nothing.
template <class Call>
ssize_t retrying(Call call) {
  ssize_t n;
  do {
    n = call();
  } while (n < 0 && errno == EINTR);
  return n;
}

// What came back, or (when less did) that much followed by why: "(end of stream)" or "(recv: <errno>)".
std::string echo(int fd, const std::string& msg) {
  const ssize_t sent = retrying([&] { return ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL); });
  if (sent != static_cast<ssize_t>(msg.size())) return std::string("(send: ") + std::strerror(errno) + ")";
  std::string back;
  char buf[4096];
  while (back.size() < msg.size()) {
    const ssize_t n = retrying([&] { return ::recv(fd, buf, sizeof buf, 0); });
    if (n == 0) return back + "(end of stream)";
    if (n < 0) return back + "(recv: " + std::strerror(errno) + ")";
    back.append(buf, static_cast<std::size_t>(n));
  }
  return back;
}

// recv's result once the server is done with the connection: 0 (end of stream) expected.
ssize_t read_end(int fd) {
  char c;
  return retrying([&] { return ::recv(fd, &c, 1, 0); });
}

struct echo_config {
  std::string backend;
  int threads;
  std::string accept = "reuseport";
  std::string recv = "leased";
};

class EchoSample : public ::testing::TestWithParam<echo_config> {
 protected:
  std::vector<std::string> args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{"--port",    "0",
                               "--backend", GetParam().backend,
                               "--threads", std::to_string(GetParam().threads),
                               "--accept",  GetParam().accept,
                               "--recv",    GetParam().recv};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

TEST_P(EchoSample, EchoesThenDrainsOnSigtermAndExitsZero) {
  echo_process server(args());
  std::string line = server.first_line();
  int port = port_of(line);
  ASSERT_GT(port, 0) << line;
  EXPECT_NE(line.find(GetParam().backend + " backend, " + GetParam().recv + " recv"), std::string::npos)
      << line;

  std::vector<unique_fd> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(connect_to(port));
    ASSERT_GE(clients.back().get(), 0);
    std::string msg = "message " + std::to_string(i) + std::string(static_cast<std::size_t>(i) * 1000, 'x');
    EXPECT_EQ(echo(clients.back().get(), msg), msg);
  }
  // Connections still open at SIGTERM are closed by the drain, then the process exits 0.
  server.signal(SIGTERM);
  for (auto& c : clients) EXPECT_EQ(read_end(c.get()), 0);
  EXPECT_EQ(server.wait(), 0);
  const std::string errors = server.errors();  // read once: it drains the pipe
  EXPECT_NE(errors.find("draining"), std::string::npos);
  if (GetParam().accept == "one") {
    // One acceptor handed the 8 connections to the threads in turn: an equal share each.
    std::string each;
    for (int t = 0; t < GetParam().threads; ++t) each += " " + std::to_string(8 / GetParam().threads);
    EXPECT_NE(errors.find("connections handed to each thread:" + each + "\n"), std::string::npos) << errors;
  }
}

TEST_P(EchoSample, Sigusr1PrintsWhatEachExecutorHasInFlight) {
  echo_process server(args());
  int port = port_of(server.first_line());
  ASSERT_GT(port, 0);
  unique_fd c = connect_to(port);
  EXPECT_EQ(echo(c.get(), "ping"), "ping");  // the server now waits for this connection's next bytes
  server.signal(SIGUSR1);
  std::string dump;
  for (int i = 0; i < GetParam().threads; ++i)
    dump += server.errors_until("operations in flight\n", std::chrono::seconds(30));
  for (int i = 0; i < GetParam().threads; ++i)
    EXPECT_NE(dump.find("uring-echo: executor " + std::to_string(i) + ": "), std::string::npos) << dump;
  // The server keeps serving afterwards.
  EXPECT_EQ(echo(c.get(), "pong"), "pong");
  server.signal(SIGTERM);
  EXPECT_EQ(read_end(c.get()), 0);
  EXPECT_EQ(server.wait(), 0);
  const std::string rest = dump + server.errors();
  // Natively a receive; the emulation waits for readiness first (a poll) when it leases buffers.
  const bool receiving = rest.find("uring-echo:   recv") != std::string::npos ||
                         rest.find("uring-echo:   poll") != std::string::npos;
  EXPECT_TRUE(receiving) << rest;
  EXPECT_NE(rest.find(" age="), std::string::npos) << rest;
}

TEST_P(EchoSample, SigintDrainsToo) {
  echo_process server(args());
  int port = port_of(server.first_line());
  ASSERT_GT(port, 0);
  unique_fd c = connect_to(port);
  EXPECT_EQ(echo(c.get(), "ping"), "ping");
  server.signal(SIGINT);
  EXPECT_EQ(read_end(c.get()), 0);
  EXPECT_EQ(server.wait(), 0);
}

TEST_P(EchoSample, IdleConnectionsAreClosed) {
  echo_process server(args({"--idle-timeout", "0.2"}));
  int port = port_of(server.first_line());
  ASSERT_GT(port, 0);
  unique_fd c = connect_to(port);
  EXPECT_EQ(echo(c.get(), "still here"), "still here");
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read_end(c.get()), 0);  // the server gave up on us
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, EchoSample, ::testing::ValuesIn([] {
                           std::vector<echo_config> all;
                           for (const char* recv : {"leased", "copy"}) {
                             for (const char* backend : {"native", "emulated"}) {
                               all.push_back({backend, 1, "reuseport", recv});
                               all.push_back({backend, 2, "reuseport", recv});
                               all.push_back({backend, 2, "one", recv});
                             }
                           }
                           return all;
                         }()),
                         [](const auto& test_info) {
                           const auto& p = test_info.param;
                           return p.backend + "_" + std::to_string(p.threads) + "_threads" +
                                  (p.accept == "one" ? "_one_acceptor" : "") + "_" + p.recv;
                         });

// Without --recv: leased, on either backend (without buffer rings a poll, then a recv into a pool buffer).
TEST(EchoSampleFlags, RecvDefaultsToLeased) {
  for (const char* backend : {"native", "emulated"}) {
    SCOPED_TRACE(backend);
    echo_process server({"--port", "0", "--backend", backend});
    const std::string line = server.first_line();
    EXPECT_NE(line.find(", leased recv"), std::string::npos) << line;
    int port = port_of(line);
    ASSERT_GT(port, 0) << line;
    unique_fd c = connect_to(port);
    EXPECT_EQ(echo(c.get(), "default"), "default");
    server.signal(SIGTERM);
    EXPECT_EQ(server.wait(), 0);
    const std::string errors = server.errors();
    EXPECT_EQ(errors, std::string("uring-echo: Terminated: draining\n"));
  }
}

TEST(EchoSampleFlags, HelpAndBadArguments) {
  {
    echo_process p({"--help"});
    EXPECT_EQ(p.first_line().rfind("usage: uring-echo", 0), 0u);
    EXPECT_EQ(p.wait(), 0);
  }
  {
    echo_process p({"--recv", "borrowed"});
    EXPECT_EQ(p.wait(), 2);
    EXPECT_NE(p.errors().find("--recv: 'borrowed' is not leased or copy"), std::string::npos);
  }
  {
    echo_process p({"--threads", "zero"});
    EXPECT_EQ(p.wait(), 2);
    EXPECT_NE(p.errors().find("--threads: 'zero' is not a number"), std::string::npos);
  }
  {
    echo_process p({"--address", "not-an-ip", "--port", "0"});
    EXPECT_EQ(p.wait(), 1);
    EXPECT_NE(p.errors().find("not-an-ip"), std::string::npos);
  }
}

TEST(EchoSampleFlags, PortInUseIsReported) {
  echo_process first({"--port", "0"});
  int port = port_of(first.first_line());
  ASSERT_GT(port, 0);
  // SO_REUSEPORT only shares a port within one user's sockets that all set it; a plain listener blocks it.
  unique_fd blocker(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(blocker.get(), reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  socklen_t len = sizeof any;
  ::getsockname(blocker.get(), reinterpret_cast<sockaddr*>(&any), &len);
  ::listen(blocker.get(), 1);
  echo_process second({"--port", std::to_string(ntohs(any.sin_port))});
  EXPECT_EQ(second.wait(), 1);
  EXPECT_NE(second.errors().find("Address already in use"), std::string::npos);
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(), 0);
}

}  // namespace
