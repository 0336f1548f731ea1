/// @file
/// uring/net/resolve.hpp — host names to addresses without blocking an executor, and connecting by name.
///
/// Provides: uring::net::resolve, uring::net::connect, uring::net::resolve_options,
/// uring::net::resolve_category.
/// Threads: await from a coroutine on an executor; the result arrives on the awaiting coroutine's executor.
///
/// A numeric host ("127.0.0.1", "::1", "[::1]") or "localhost", with a numeric service (or an empty one:
/// port 0), is answered at once, with no thread. Any other look-up (a service name needs /etc/services) runs
/// getaddrinfo (so /etc/hosts, nsswitch and DNS) on a process-wide pool of at most 4 threads, started on
/// demand, each ending after 10 s idle; at most 256 look-ups wait for a thread, and one more fails with
/// EAGAIN at once (it never blocks the executor). The awaiting coroutine's stop token (with_stop_token,
/// with_timeout, a task_scope's stop) ends the wait at once with ECANCELED (ETIMEDOUT through with_timeout):
/// getaddrinfo itself cannot be interrupted, so a look-up already running finishes on its thread and its
/// result is dropped; one still queued is skipped. Errors: std::system_error in resolve_category() (EAI_*
/// codes, gai_strerror's text, naming the host: "resolve example.invalid: Name or service not known");
/// EAI_SYSTEM becomes the errno it stands for.
#pragma once

#include <sys/socket.h>

#include <string>
#include <system_error>
#include <vector>

#include "uring/net/address.hpp"
#include "uring/net/tcp_stream.hpp"
#include "uring/task.hpp"

namespace uring::net {

/// How resolve and connect look a name up. Threads: a plain value.
struct resolve_options {
  /// AF_INET or AF_INET6 for one family only; AF_UNSPEC for both.
  int family = AF_UNSPEC;
  /// Answer "localhost" with the loopback addresses without a look-up (RFC 6761). False: it is looked up
  /// like any name (a local /etc/hosts entry then counts).
  bool localhost_is_loopback = true;
};

/// The category of getaddrinfo's EAI_* codes; message() is gai_strerror's.
const std::error_category& resolve_category() noexcept;

/// Every stream (SOCK_STREAM) address of `host` with the port of `service` (a number, or a name from
/// /etc/services), in getaddrinfo's order (RFC 6724), each once; at most 64. "localhost" yields ::1 then
/// 127.0.0.1 (only those of `family`).
task<std::vector<address>> resolve(std::string host, std::string service, resolve_options opts = {});

/// Resolves `host` and races connections to its addresses as RFC 8305 ("happy eyeballs") describes: the
/// families alternate, starting with the look-up's first; each attempt starts when the one before it
/// fails, or 250 ms after it started if it has not connected by then, and the others keep going. The first
/// connection made wins and the attempts still running are cancelled. If none connects, throws the last
/// error naming the host and service ("connect localhost:80: Connection refused"). A resolve error, a stop
/// (ECANCELED) or the awaiting task's deadline (with_timeout) ends it at once, attempts cancelled. The
/// attempts run on the awaiting coroutine's executor.
task<tcp_stream> connect(std::string host, std::string service, resolve_options opts = {});

}  // namespace uring::net
