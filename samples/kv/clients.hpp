// samples/kv/clients.hpp — the clients connected to each executor of uring-kv: what CLIENT LIST, CLIENT INFO
// and CLIENT KILL read, and INFO's connection counters.
//
// Provides: kv::client_info (one connection's addresses, times and last command), kv::client_registry (an
// executor's connections by id, and its counters), and the bounds CLIENT applies.
// Threads: a registry, and the sessions it lists, are touched only on their executor's thread: CLIENT LIST
// and CLIENT KILL visit each executor with submit_to and read or kill its connections there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kv {

struct session;

// The most clients one CLIENT LIST renders (those of the lowest ids) and the longest client name: the
// reply stays under 10000 * (1024 + 400) bytes, whatever the number of connections.
inline constexpr std::size_t max_client_list = 10'000;
inline constexpr std::size_t max_client_name = 1024;
// Failed AUTH (or HELLO AUTH) replies a connection gets before it is closed: guessing a password costs a
// reconnect every 10 tries.
inline constexpr int max_auth_failures = 10;

struct client_info {
  std::string addr;             // the peer's "ip:port" (the local one is asked of the socket when shown)
  std::int64_t created_ms = 0;  // connect (age)
  std::int64_t last_ms = 0;     // the last burst of input, or a flush within one (idle)
  std::string_view cmd;         // the last command's name, upper case (a static string); empty: none
  std::string_view sub;         // its subcommand (CLIENT, CONFIG), upper case; empty: none
  int fd = -1;
  bool killed = false;    // CLIENT KILL by another connection: closed at the next chance
  bool no_evict = false;  // CLIENT NO-EVICT (shown in CLIENT LIST; uring-kv never evicts)
};

// An executor's connections, in the order they were listed, which is the order of their ids (a session
// takes its id and is listed on its executor's thread without a suspension between): a list linked
// through the sessions themselves, so that a connection costs no node of its own.
struct client_registry {
  session* first = nullptr;
  session* last = nullptr;
  std::size_t size = 0;
  std::uint64_t connections_received = 0;  // accepted by this executor, refused ones included
  std::uint64_t commands_processed = 0;    // run by its connections (not those refused or queued)

  void add(session& s) noexcept;     // at the end: `s` has the highest id listed here
  void remove(session& s) noexcept;  // `s` is listed here
  [[nodiscard]] session* find(std::int64_t id) const noexcept;  // null when not listed here
};

// The local "ip:port" of connection `fd`, empty if the socket cannot tell.
std::string local_address(int fd);

// Redis's CLIENT LIST line for `ses` (without its '\n'); `now` in clock_ms() time.
void client_line(const session& ses, std::int64_t now, std::string& out);

}  // namespace kv
