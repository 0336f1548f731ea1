// connect.cpp — connecting by name: the addresses of a look-up raced as RFC 8305 ("happy eyeballs")
// describes, so that one address that does not answer costs a connection only the attempt delay.
#include <netdb.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "uring/net/resolve.hpp"
#include "uring/result.hpp"
#include "uring/sync/semaphore.hpp"
#include "uring/task_adapters.hpp"
#include "uring/task_scope.hpp"

namespace uring::net {

namespace {

// RFC 8305's recommended Connection Attempt Delay.
constexpr std::chrono::milliseconds kAttemptDelay{250};

// The addresses with the families alternating, starting with the family of the first (RFC 8305 4), each
// family in the order the look-up gave.
std::vector<address> interleave(const std::vector<address>& in) {
  if (in.empty()) return {};
  const int first = in.front().family();
  std::vector<address> preferred;
  std::vector<address> other;
  for (const address& a : in) (a.family() == first ? preferred : other).push_back(a);
  std::vector<address> out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < preferred.size() || i < other.size(); ++i) {
    if (i < preferred.size()) out.push_back(preferred[i]);
    if (i < other.size()) out.push_back(other[i]);
  }
  return out;
}

// The attempts of one connect, all on its executor: the first connection made, and the last error. Shared
// by the attempts, so that a connect cut short may return while the cancelled ones are still ending.
struct race {
  std::optional<tcp_stream> winner;
  std::error_code last;
  std::size_t running = 0;
  sync::semaphore ended{0};  // one permit per attempt that ended, won or lost
};

task<void> attempt(address peer, std::shared_ptr<race> shared) {
  race& r = *shared;
  try {
    tcp_stream s = co_await tcp_stream::connect_to(peer);
    if (!r.winner) r.winner.emplace(std::move(s));  // a later winner's connection is closed here
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::operation_canceled) r.last = e.code();
  }
  --r.running;
  r.ended.release();
}

// Waits for an attempt to end (a task, so that the awaiting task's deadline and stop token reach it).
task<void> any_ended(race& r) { co_await r.ended.async_acquire(); }

}  // namespace

task<tcp_stream> connect(std::string host, std::string service, resolve_options opts) {
  const std::vector<address> peers = interleave(co_await resolve(host, service, opts));
  auto shared = std::make_shared<race>();
  race& r = *shared;
  r.last = std::error_code(EAI_NONAME, resolve_category());
  task_scope attempts;
  std::size_t next = 0;
  while (!r.winner && (next < peers.size() || r.running > 0)) {
    if (next < peers.size()) {
      ++r.running;
      attempts.spawn(attempt(peers[next++], shared));
    }
    // A stop or the deadline throws here; the scope's destruction then cancels the attempts.
    if (next < peers.size()) {
      // The next address starts as soon as an attempt fails, or once the delay has passed.
      result<void> waited = co_await with_timeout(any_ended(r), kAttemptDelay).nothrow();
      if (!waited && waited.error() != std::errc::timed_out) waited.value();  // stopped: rethrows
    } else {
      co_await any_ended(r);
    }
  }
  attempts.request_stop();
  co_await attempts.join();
  if (r.winner) co_return std::move(*r.winner);
  throw std::system_error(r.last, "connect " + host + ":" + service);
}

}  // namespace uring::net
