// samples/kv/connection.hpp — serving one uring-kv client: reading, parsing and answering its commands
// within the limits that keep one client (or a flood of them) from holding the server.
//
// Provides: kv::connection_limits, kv::serve_connection, kv::event and kv::note (rate-limited stderr).
// Threads: serve_connection runs on the executor that accepted the connection; note from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <uring/net/tcp_stream.hpp>
#include <uring/task.hpp>

#include "commands.hpp"
#include "reply.hpp"

namespace kv {

// Each executor's receive buffers: connections lease them one received chunk at a time, so an idle one
// holds none. A connection copies each chunk into its parser and returns it at once, so it holds at most
// one (received ahead while it answers): a client that sends without reading its replies keeps one buffer
// out of the pool, not a share of it, and it takes receive_buffers such clients to make the others wait.
inline constexpr std::uint32_t receive_buffers = 256;
inline constexpr std::uint32_t receive_buffer_size = 16 * 1024;
inline constexpr std::uint32_t receive_buffers_per_connection = 1;

struct connection_limits {
  output_limits output;
  std::chrono::milliseconds idle{0};  // a connection completing no command for this long is closed; 0: never
  int max_connections = 10'000;       // open at once over all threads; those above are refused
};

// Reads, parses and answers until the peer ends the stream, breaks the protocol, says QUIT, sends HTTP,
// idles past limits.idle, leaves output unread past limits.output.stall or piles up more than
// limits.output.hard copied bytes, fails AUTH max_auth_failures times or is named by CLIENT KILL. A
// connection above limits.max_connections is answered "-ERR max number of clients reached" and closed.
// The connection is listed in its executor's client_registry while it is served.
uring::task<void> serve_connection(uring::net::tcp_stream s, server* srv, std::size_t me,
                                   const connection_limits* limits);

// What closes a connection against its will: each kind is reported on stderr at most once every 10 s,
// with how many more happened meanwhile, so a flood of them cannot flood the log.
enum class event : std::uint8_t { http, overflow, stalled, refused, auth, count_ };
void note(event kind, std::string_view what);

}  // namespace kv
