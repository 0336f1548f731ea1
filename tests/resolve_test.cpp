// Name resolution on every backend: numeric hosts and "localhost" inline, /etc/hosts names through the
// resolver pool, EAI errors, stops and time-outs while a look-up waits behind busy pool threads, the
// pool's bounds (threads and queue), and connecting by name.
#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <uring/net/resolve.hpp>
#include <uring/uring.hpp>

#include "backends.hpp"
#include "net/resolver_pool.hpp"
#include "net_fixture.hpp"
#include "seccomp_child.hpp"
#include "test_util.hpp"

// The fork test forks while the pool's threads live; TSan lets the child run on only when asked to.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }

namespace {

using namespace std::chrono_literals;
using uring::task;
using uring::net::address;
using uring::net::resolve;
using uring::net::resolve_options;
using uring::net::resolver_pool;
using uring::test::error_of;
using uring::test::loopback;

class Resolve : public uring::test::backend_test {};

// "localhost" looked up like any other name: through the pool, answered from /etc/hosts.
constexpr resolve_options kThroughPool{.localhost_is_loopback = false};

std::vector<std::string> texts(const std::vector<address>& as) {
  std::vector<std::string> out;
  for (const auto& a : as) out.push_back(a.to_string());
  return out;
}

template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The pool's threads alive now, counted by the kernel (their names in /proc/self/task).
int resolver_threads() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "uring-resolve") ++n;
  }
  ::closedir(dir);
  return n;
}

// Holds every pool thread in a job until it goes (or, so that a broken stop fails a test rather than hangs
// it, for at most 20 s), so that look-ups queue behind them.
class busy_pool {
 public:
  busy_pool() {
    for (std::size_t i = 0; i < resolver_pool::kMaxThreads; ++i) {
      resolver_pool::instance().submit([release = release_, started = started_] {
        started->fetch_add(1);
        while (!release->load()) release->wait(false);
      });
    }
    ok_ = eventually([&] { return started_->load() == static_cast<int>(resolver_pool::kMaxThreads); });
    // The constructor returns only once the watchdog runs its loop: a thread still starting allocates, and a
    // fork then would leave the child a sanitizer allocator locked for good.
    auto watching = std::make_shared<std::atomic<bool>>(false);
    watchdog_ = std::thread([release = release_, watching] {
      watching->store(true);
      (void)eventually([&] { return release->load(); }, 20s);
      release->store(true);
      release->notify_all();
    });
    ok_ = ok_ && eventually([&] { return watching->load(); });
  }
  ~busy_pool() {
    release_->store(true);
    release_->notify_all();
    watchdog_.join();
    (void)eventually([] { return resolver_pool::instance().queued() == 0; });
  }
  busy_pool(const busy_pool&) = delete;
  busy_pool& operator=(const busy_pool&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  std::shared_ptr<std::atomic<bool>> release_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> started_ = std::make_shared<std::atomic<int>>(0);
  std::thread watchdog_;
  bool ok_ = false;
};

TEST_P(Resolve, NumericHostsAreAnsweredWithoutThePool) {
  const auto before = resolver_pool::instance().submitted();
  EXPECT_EQ(texts(run(resolve("127.0.0.1", "80"))), std::vector<std::string>{"127.0.0.1:80"});
  EXPECT_EQ(texts(run(resolve("::1", "443"))), std::vector<std::string>{"[::1]:443"});
  EXPECT_EQ(texts(run(resolve("[::1]", "443"))), std::vector<std::string>{"[::1]:443"});
  EXPECT_EQ(texts(run(resolve("10.1.2.3", ""))), std::vector<std::string>{"10.1.2.3:0"});
  EXPECT_EQ(resolver_pool::instance().submitted(), before);
}

TEST_P(Resolve, LocalhostIsLoopbackWithoutThePool) {
  const auto before = resolver_pool::instance().submitted();
  EXPECT_EQ(texts(run(resolve("localhost", "8080"))),
            (std::vector<std::string>{"[::1]:8080", "127.0.0.1:8080"}));
  EXPECT_EQ(texts(run(resolve("LocalHost.", "1", {.family = AF_INET}))),
            std::vector<std::string>{"127.0.0.1:1"});
  EXPECT_EQ(texts(run(resolve("localhost", "1", {.family = AF_INET6}))), std::vector<std::string>{"[::1]:1"});
  EXPECT_EQ(resolver_pool::instance().submitted(), before);
}

TEST_P(Resolve, WrongFamilyAndBadBracketsFailWithEaiCodes) {
  std::string what;
  auto code = error_of([&] { run(resolve("127.0.0.1", "80", {.family = AF_INET6})); }, &what);
  EXPECT_EQ(code, std::error_code(EAI_ADDRFAMILY, uring::net::resolve_category()));
  EXPECT_EQ(what, std::string("resolve 127.0.0.1: ") + ::gai_strerror(EAI_ADDRFAMILY));
  code = error_of([&] { run(resolve("[not-v6]", "80")); });
  EXPECT_EQ(code, std::error_code(EAI_NONAME, uring::net::resolve_category()));
  code = error_of([&] { run(resolve("", "80")); });
  EXPECT_EQ(code, std::error_code(EAI_NONAME, uring::net::resolve_category()));
}

TEST_P(Resolve, HostsFileNamesGoThroughThePool) {
  const auto before = resolver_pool::instance().submitted();
  auto got = texts(run(resolve("localhost", "8080", kThroughPool)));
  EXPECT_EQ(resolver_pool::instance().submitted(), before + 1);
  EXPECT_NE(std::find(got.begin(), got.end(), "127.0.0.1:8080"), got.end()) << ::testing::PrintToString(got);
  // A service name is looked up in /etc/services (also through the pool, even for a numeric host).
  EXPECT_EQ(texts(run(resolve("127.0.0.1", "http"))), std::vector<std::string>{"127.0.0.1:80"});
}

TEST_P(Resolve, InvalidNameFailsWithTheEaiErrorNamingTheHost) {
  std::string what;
  // Bounded: a slow or absent DNS server must not hang the test (here the answer comes in milliseconds).
  auto code = error_of([&] { run(uring::with_timeout(resolve("example.invalid", "80"), 60s)); }, &what);
  ASSERT_EQ(code.category(), uring::net::resolve_category()) << what;
  EXPECT_EQ(what, "resolve example.invalid: " + code.message());
  EXPECT_TRUE(code.value() == EAI_NONAME || code.value() == EAI_AGAIN) << what;
}

TEST_P(Resolve, StopWhileQueuedBehindBusyThreadsCancelsAtOnce) {
  busy_pool busy;
  ASSERT_TRUE(busy.ok());
  std::stop_source stop;
  std::chrono::steady_clock::time_point asked{};
  std::thread stopper([&] {
    if (eventually([] { return resolver_pool::instance().queued() >= 1; })) {
      asked = std::chrono::steady_clock::now();
      stop.request_stop();
    }
  });
  std::string what;
  auto code = error_of(
      [&] { run(uring::with_stop_token(resolve("localhost", "80", kThroughPool), stop.get_token())); },
      &what);
  const auto ended = std::chrono::steady_clock::now();
  stopper.join();
  EXPECT_EQ(code, std::errc::operation_canceled) << what;
  EXPECT_EQ(what, "resolve localhost: " + code.message());
  EXPECT_LT(ended - asked, 5s);  // the pool is still busy: the stop alone ended the wait
}

TEST_P(Resolve, WithTimeoutWhileQueuedFailsWithEtimedout) {
  busy_pool busy;
  ASSERT_TRUE(busy.ok());
  const auto start = std::chrono::steady_clock::now();
  auto code = error_of([&] { run(uring::with_timeout(resolve("localhost", "80", kThroughPool), 50ms)); });
  EXPECT_EQ(code, std::errc::timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // the pool is still busy
}

TEST_P(Resolve, FullQueueRefusesWithEagain) {
  busy_pool busy;
  ASSERT_TRUE(busy.ok());
  const std::size_t room = resolver_pool::kMaxQueued - resolver_pool::instance().queued();
  for (std::size_t i = 0; i < room; ++i) resolver_pool::instance().submit([] {});
  std::string what;
  auto code = error_of([&] { run(resolve("localhost", "80", kThroughPool)); }, &what);
  EXPECT_EQ(code, std::errc::resource_unavailable_try_again) << what;
  EXPECT_EQ(what.rfind("resolve localhost: ", 0), 0u) << what;
}

TEST_P(Resolve, ExecutorGoneBeforeTheResultIsSafe) {
  busy_pool busy;
  ASSERT_TRUE(busy.ok());
  {
    uring::executor ex(options());
    bool queued = ex.run([]() -> task<bool> {
      uring::spawn([]() -> task<void> { (void)co_await resolve("localhost", "80", kThroughPool); }());
      for (int i = 0; i < 30000 && resolver_pool::instance().queued() == 0; ++i)
        co_await uring::sleep_for(1ms);
      co_return resolver_pool::instance().queued() >= 1;
    }());
    ASSERT_TRUE(queued);
  }  // the waiting frame is freed here; the queued look-up runs later and finds nobody
}

TEST_P(Resolve, ManyLookupsStayWithinThePoolsThreadBound) {
  const long total = uring::test::scaled(10000);
  constexpr long kInFlight = 64;
  ASSERT_LE(resolver_threads(), static_cast<int>(resolver_pool::kMaxThreads));
  std::atomic<bool> done{false};
  std::atomic<int> most{0};
  std::thread sampler([&] {
    while (!done.load()) {
      most.store(std::max(most.load(), resolver_threads()));
      std::this_thread::sleep_for(1ms);
    }
  });
  long ok = run([](long n) -> task<long> {
    long good = 0;
    for (long i = 0; i < n; i += kInFlight) {
      std::vector<task<std::vector<address>>> batch;
      for (long j = i; j < std::min(n, i + kInFlight); ++j)
        batch.push_back(resolve("localhost", "80", kThroughPool));
      for (const auto& r : co_await uring::when_all(std::move(batch)))
        good += std::count(r.begin(), r.end(), address::parse("127.0.0.1:80"));
    }
    co_return good;
  }(total));
  done.store(true);
  sampler.join();
  EXPECT_EQ(ok, total);
  EXPECT_GE(most.load(), 1);
  EXPECT_LE(most.load(), static_cast<int>(resolver_pool::kMaxThreads));
  EXPECT_LE(resolver_threads(), static_cast<int>(resolver_pool::kMaxThreads));
  EXPECT_LE(resolver_pool::instance().threads(), resolver_pool::kMaxThreads);
}

TEST_P(Resolve, ForkedChildStartsItsOwnPool) {
  busy_pool busy;  // the parent's pool is at its bound, every thread busy: none of them is the child's
  ASSERT_TRUE(busy.ok());
  auto opts = options();
  auto child = uring::test::run_in_child(
      [opts] {
        uring::executor ex(opts);
        auto got = ex.run(resolve("localhost", "80", kThroughPool));
        return got.empty() ? 1 : 0;
      },
      20s);
  EXPECT_TRUE(child.exited && child.exit_code == 0) << child.describe();
}

// Not per backend: it waits for the pool's idle time-out once.
TEST(ResolverPool, IdleThreadsEndAndAreReplacedOnDemand) {
  uring::executor ex;
  (void)ex.run(resolve("localhost", "80", kThroughPool));
  ASSERT_GE(resolver_threads(), 1);
  EXPECT_TRUE(eventually([] { return resolver_threads() == 0; }, resolver_pool::kIdleExit + 30s));
  auto got = ex.run(resolve("localhost", "80", kThroughPool));  // joins the ended ones, starts a new one
  EXPECT_FALSE(got.empty());
  EXPECT_EQ(resolver_pool::instance().threads(), static_cast<std::size_t>(resolver_threads()));
}

TEST_P(Resolve, ConnectByNameTriesEachAddress) {
  auto listener = uring::net::tcp_listener::bind(loopback());
  const std::string port = std::to_string(listener.local_address().port());
  // "localhost" is ::1 first, where nobody listens: the connect falls back to 127.0.0.1.
  std::string back = run([](const uring::net::tcp_listener& l, std::string p) -> task<std::string> {
    uring::net::tcp_stream client = co_await uring::net::connect("localhost", p);
    uring::net::tcp_stream server = co_await l.accept();
    co_await client.write_all(std::string_view("name"));
    std::string buf(4, '\0');
    co_await server.read_exactly(buf);
    co_return buf;
  }(listener, port));
  EXPECT_EQ(back, "name");
  // Through the pool too (/etc/hosts).
  run([](const uring::net::tcp_listener& l, std::string p) -> task<void> {
    uring::net::tcp_stream client = co_await uring::net::connect("localhost", p, kThroughPool);
    uring::net::tcp_stream server = co_await l.accept();
  }(listener, port));
}

TEST_P(Resolve, ConnectFailureNamesTheHost) {
  const std::string port = [] {
    auto listener = uring::net::tcp_listener::bind(loopback());
    return std::to_string(listener.local_address().port());  // closed when it goes
  }();
  std::string what;
  auto code = error_of([&] { run(uring::net::connect("localhost", port, {.family = AF_INET})); }, &what);
  EXPECT_EQ(code, std::errc::connection_refused);
  EXPECT_EQ(what, "connect localhost:" + port + ": " + code.message());
}

// A listener on [::1]:port whose accept queue is full: the kernel drops further SYNs, so a connect there
// neither succeeds nor fails for minutes.
struct unanswering_v6 {
  uring::net::tcp_listener listener;
  uring::owned_fd queued;
  explicit unanswering_v6(std::uint16_t port)
      : listener(uring::net::tcp_listener::bind(address::ip("::1", port), {.backlog = 0})),
        queued(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const address self = listener.local_address();
    if (::connect(queued.get(), self.data(), self.size()) != 0) {
      throw std::system_error(errno, std::system_category(), "connect to fill the queue");
    }
  }
};

TEST_P(Resolve, ConnectByNameRacesPastAnAddressThatDoesNotAnswer) {
  auto listener = uring::net::tcp_listener::bind(loopback());
  const std::uint16_t port = listener.local_address().port();
  unanswering_v6 v6(port);
  // "localhost" is ::1 first, which never answers; 127.0.0.1 starts after the attempt delay and wins.
  const auto start = std::chrono::steady_clock::now();
  std::string peer = run([](const uring::net::tcp_listener& l, std::string p) -> task<std::string> {
    uring::net::tcp_stream client =
        co_await uring::with_timeout(uring::net::connect("localhost", p), std::chrono::seconds(20));
    uring::net::tcp_stream server = co_await l.accept();
    co_return client.peer_address().to_string();
  }(listener, std::to_string(port)));
  EXPECT_EQ(peer, "127.0.0.1:" + std::to_string(port));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);  // ::1 was tried first, for the delay
}

TEST_P(Resolve, ConnectByNameCutShortByItsDeadlineEndsItsAttempts) {
  const std::uint16_t port = [] {
    auto l = uring::net::tcp_listener::bind(loopback());
    return l.local_address().port();
  }();
  unanswering_v6 v6(port);
  std::string what;
  const auto start = std::chrono::steady_clock::now();
  auto code = error_of(
      [&] {
        run(uring::with_timeout(uring::net::connect("localhost", std::to_string(port), {.family = AF_INET6}),
                                std::chrono::milliseconds(300)));
      },
      &what);
  EXPECT_EQ(code, std::errc::timed_out) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_P(Resolve, ConnectByNameStoppedEndsItsAttempts) {
  const std::uint16_t port = [] {
    auto l = uring::net::tcp_listener::bind(loopback());
    return l.local_address().port();
  }();
  unanswering_v6 v6(port);
  auto code = error_of([&] {
    run([](std::string p) -> task<void> {
      std::stop_source stop;
      uring::spawn([](std::stop_source& s) -> task<void> {
        co_await uring::sleep_for(std::chrono::milliseconds(50));
        s.request_stop();
      }(stop));
      co_await uring::with_stop_token(uring::net::connect("localhost", p, {.family = AF_INET6}),
                                      stop.get_token());
    }(std::to_string(port)));
  });
  EXPECT_EQ(code, std::errc::operation_canceled);
}

INSTANTIATE_BACKENDS(Resolve);

}  // namespace
