// resolve.cpp — name look-ups: numeric hosts and "localhost" inline, the rest by getaddrinfo on the
// resolver pool, the result handed back to the awaiting coroutine's executor.
#include "uring/net/resolve.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cerrno>
#include <charconv>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string_view>
#include <utility>

#include "net/resolver_pool.hpp"
#include "uring/detail/remote.hpp"
#include "uring/executor.hpp"

namespace uring::net {

namespace {

// Bounds on what one call holds: a host name is at most 253 bytes in DNS (1024 leaves room for the
// rest of nsswitch), and no real host has more than a few dozen addresses.
constexpr std::size_t kMaxHostLength = 1024;
constexpr std::size_t kMaxServiceLength = 64;
constexpr std::size_t kMaxAddresses = 64;

class resolve_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "resolve"; }
  std::string message(int ev) const override { return ::gai_strerror(ev); }
};

[[noreturn]] void throw_lookup_error(int eai, int err, const std::string& host) {
  if (eai == EAI_SYSTEM) throw std::system_error(err, std::system_category(), "resolve " + host);
  throw std::system_error(eai, resolve_category(), "resolve " + host);
}

// The port of a numeric service ("" is 0); nullopt for a name, which getaddrinfo looks up.
std::optional<std::uint16_t> numeric_port(std::string_view service) {
  if (service.empty()) return 0;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(service.data(), service.data() + service.size(), value);
  if (ec != std::errc() || end != service.data() + service.size() || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

bool is_localhost(std::string_view host) {
  if (host.ends_with('.')) host.remove_suffix(1);
  constexpr std::string_view kName = "localhost";
  if (host.size() != kName.size()) return false;
  for (std::size_t i = 0; i < host.size(); ++i) {
    char c = host[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kName[i]) return false;
  }
  return true;
}

bool family_wanted(int family, int wanted) { return wanted == AF_UNSPEC || wanted == family; }

// The answer for a numeric host or "localhost" with a numeric service, or nullopt for a look-up.
std::optional<std::vector<address>> answer_inline(std::string_view host, std::string_view service,
                                                  const resolve_options& opts) {
  if (host.empty() || host.size() > kMaxHostLength || host.find('\0') != std::string_view::npos)
    throw_lookup_error(EAI_NONAME, 0, std::string(host));
  if (service.size() > kMaxServiceLength || service.find('\0') != std::string_view::npos)
    throw_lookup_error(EAI_SERVICE, 0, std::string(host));
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  std::string_view bare = bracketed ? host.substr(1, host.size() - 2) : host;
  auto port = numeric_port(service);
  if (!port) return std::nullopt;
  std::vector<address> out;
  if (!bracketed && opts.localhost_is_loopback && is_localhost(bare)) {
    if (family_wanted(AF_INET6, opts.family)) out.push_back(address::ip("::1", *port));
    if (family_wanted(AF_INET, opts.family)) out.push_back(address::ip("127.0.0.1", *port));
    if (out.empty()) throw_lookup_error(EAI_ADDRFAMILY, 0, std::string(host));
    return out;
  }
  std::string text(bare);
  in6_addr scratch;
  const int family = bare.find(':') == std::string_view::npos ? AF_INET : AF_INET6;
  if (::inet_pton(family, text.c_str(), &scratch) != 1) {
    if (bracketed) throw_lookup_error(EAI_NONAME, 0, std::string(host));
    return std::nullopt;  // a name, or a form only getaddrinfo reads (a scope id, "0x7f.1")
  }
  if (!family_wanted(family, opts.family)) throw_lookup_error(EAI_ADDRFAMILY, 0, std::string(host));
  out.push_back(address::ip(text, *port));
  return out;
}

class lookup_awaiter;

// One look-up, shared by the awaiting coroutine and the pool's job: whichever side ends last frees it.
struct lookup {
  lookup(std::string h, std::string s, resolve_options o)
      : host(std::move(h)), service(std::move(s)), opts(o) {}
  const std::string host;
  const std::string service;
  const resolve_options opts;
  std::mutex m;
  bool done = false;                 // the job has filled in the result
  bool abandoned = false;            // the coroutine left without the result: a queued job skips it
  lookup_awaiter* waiter = nullptr;  // the coroutine to wake, taken by whichever of done/stop comes first
  int eai = 0;
  int err = 0;
  std::vector<address> result;
};

// Waits for the job on the awaiting coroutine's executor, or for its stop token. The lookup's mutex
// orders the three ends (job done, stop, frame destroyed): exactly one of the first two wakes the
// coroutine, and a frame destroyed first takes its node back so that nobody touches it afterwards.
class lookup_awaiter : private detail::remote_node {
 public:
  explicit lookup_awaiter(std::shared_ptr<lookup> l) noexcept : l_(std::move(l)) {}
  lookup_awaiter(const lookup_awaiter&) = delete;
  lookup_awaiter& operator=(const lookup_awaiter&) = delete;
  ~lookup_awaiter() {
    stop_.reset();  // waits for a callback running on another thread
    std::lock_guard lock(l_->m);
    if (l_->waiter == this) l_->waiter = nullptr;
    if (!l_->done) l_->abandoned = true;
  }

  bool await_ready() const {
    std::lock_guard lock(l_->m);
    return l_->done;
  }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> h) {
    h_ = h;
    home_ = &detail::executor_access::current("resolve");
    follow_.follow(h.promise());  // the task's stop token, and its deadline's (may allocate)
    run = [](remote_node* n) noexcept { static_cast<lookup_awaiter*>(n)->h_.resume(); };
    discard = [](remote_node*) noexcept {};  // the executor shuts down: it frees the frame, unresumed
    {
      std::lock_guard lock(l_->m);
      if (l_->done) return false;
      l_->waiter = this;
    }
    if (!follow_.empty()) stop_.emplace(follow_.token(), on_stop{this});  // may run at once
    return true;
  }
  void await_resume() {
    stop_.reset();
    if (stopped_) throw std::system_error(ECANCELED, std::system_category(), "resolve " + l_->host);
  }

  // With the lookup's mutex held, by whoever took `waiter`: resumes the coroutine on its executor.
  void wake() noexcept {
    if (detail::running_executor() == home_) {
      detail::executor_access::schedule(*home_, h_);
    } else {
      (void)detail::executor_access::send(*home_, *this);  // refused: home shuts down and frees the frame
    }
  }

 private:
  struct on_stop {
    lookup_awaiter* a;
    void operator()() const noexcept {
      std::lock_guard lock(a->l_->m);
      if (a->l_->waiter != a) return;  // the result came first
      a->l_->waiter = nullptr;
      a->stopped_ = true;
      a->wake();
    }
  };

  std::shared_ptr<lookup> l_;
  std::coroutine_handle<> h_;
  executor* home_ = nullptr;
  detail::wait_stop follow_;
  std::optional<std::stop_callback<on_stop>> stop_;
  bool stopped_ = false;
};

// On a pool thread.
void run_lookup(lookup& l) {
  {
    std::lock_guard lock(l.m);
    if (l.abandoned) return;
  }
  addrinfo hints{};
  hints.ai_family = l.opts.family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc =
      ::getaddrinfo(l.host.c_str(), l.service.empty() ? nullptr : l.service.c_str(), &hints, &list);
  const int err = errno;
  std::vector<address> out;
  for (const addrinfo* p = list; p != nullptr && out.size() < kMaxAddresses; p = p->ai_next) {
    if (p->ai_socktype != SOCK_STREAM || p->ai_addrlen > address::capacity()) continue;
    address a = address::from_native(p->ai_addr, p->ai_addrlen);
    bool seen = false;
    for (const address& b : out) seen = seen || b == a;
    if (!seen) out.push_back(a);
  }
  if (list != nullptr) ::freeaddrinfo(list);
  std::lock_guard lock(l.m);
  l.eai = rc == 0 && out.empty() ? EAI_NONAME : rc;
  l.err = err;
  l.result = std::move(out);
  l.done = true;
  if (lookup_awaiter* w = std::exchange(l.waiter, nullptr)) w->wake();
}

}  // namespace

const std::error_category& resolve_category() noexcept {
  static const resolve_error_category category;
  return category;
}

task<std::vector<address>> resolve(std::string host, std::string service, resolve_options opts) {
  if (auto now = answer_inline(host, service, opts)) co_return std::move(*now);
  auto l = std::make_shared<lookup>(std::move(host), std::move(service), opts);
  try {
    resolver_pool::instance().submit([l] { run_lookup(*l); });
  } catch (const std::system_error& e) {
    throw std::system_error(e.code(), "resolve " + l->host);
  }
  co_await lookup_awaiter(l);
  if (l->eai != 0) throw_lookup_error(l->eai, l->err, l->host);
  co_return std::move(l->result);
}

}  // namespace uring::net
