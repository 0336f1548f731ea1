// samples/kv/reply.hpp — a connection's pending output: the RESP bytes its replies copied, and large values
// sent straight from the store by reference.
//
// Provides: kv::reply (the output of one connection), kv::output_limits, kv::output_overflow.
// Threads: a reply belongs to its connection's coroutine; a command forwarded to another shard appends to
// text() from that shard's thread while the coroutine waits for it (handed over and back).
//
// Memory: values of by_reference bytes and more are held by shared ownership, not copied: one 1 MiB value
// named 1024 times in an MGET costs 1 MiB however slowly the client reads. Once limits.soft bytes (copied or
// referenced) wait, must_flush() tells the connection to write them, so it runs no further command (and
// reads no further input) before its client has taken them; copied bytes beyond limits.hard throw
// output_overflow.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <uring/net/tcp_stream.hpp>
#include <uring/task.hpp>

#include "shard.hpp"

namespace kv {

struct output_limits {
  std::size_t soft = 64 * 1024;             // pending bytes written before anything else runs
  std::size_t hard = 32 * 1024 * 1024;      // copied bytes a connection may hold unsent
  std::chrono::milliseconds stall{30'000};  // each write of up to 256 KiB must be taken within this
};

// Thrown when a connection's copied output passes output_limits::hard: the connection is closed.
struct output_overflow : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class reply {
 public:
  // Values this long and longer are sent from the store, not copied.
  static constexpr std::size_t by_reference = 16 * 1024;

  reply(const uring::net::tcp_stream& s, const output_limits& lim) noexcept : stream_(&s), limits_(&lim) {}

  // The copied bytes: RESP encoders append replies here.
  std::string& text() noexcept { return text_; }
  // A bulk string of `v` (the null bulk string for null).
  void bulk(value_ptr v);

  // The protocol the client chose with HELLO: RESP3 has its own null, maps and verbatim strings.
  void set_resp3(bool on) noexcept { resp3_ = on; }
  [[nodiscard]] bool resp3() const noexcept { return resp3_; }
  void null() { text_ += resp3_ ? "_\r\n" : "$-1\r\n"; }
  void null_array() { text_ += resp3_ ? "_\r\n" : "*-1\r\n"; }
  // A map of `pairs` entries: RESP2 sends it as a flat array of keys and values.
  void map_header(std::size_t pairs);
  // Text meant for people (INFO, CLIENT LIST): a verbatim string in RESP3, a bulk string in RESP2.
  void verbatim(std::string_view txt);

  [[nodiscard]] bool empty() const noexcept { return text_.empty() && refs_.empty(); }
  // Bytes waiting to be written, copied and referenced.
  [[nodiscard]] std::size_t pending() const noexcept { return text_.size() + referenced_; }

  // After each command: throws output_overflow past the hard limit; true when the soft one is reached (and
  // output is not held), and then the caller flushes. Not a coroutine, so that a command whose reply fits
  // allocates no frame for the check.
  bool must_flush();
  // While held, must_flush answers false (the hard limit still applies): EXEC holds its replies so that no
  // write suspends it between two of its commands.
  void hold(bool on) noexcept { held_ = on; }
  // Writes everything pending, in order. A piece the client does not take within limits.stall throws
  // std::system_error(ETIMEDOUT); a peer that went away throws as the write does.
  uring::task<void> flush();

  // Before a write that may wait on the client, `fn(ctx)` runs: the connection ends the receive it keeps
  // armed ahead, so a client that stops reading holds no buffer of the shared receive pool while its reply
  // waits. `unacknowledged` is the connection's bound on bytes written and not yet acknowledged, kept
  // between bursts: the kernel is asked (tcp_stream::unacknowledged) only when it passes what the socket
  // surely takes.
  void before_waiting(uring::task<void> (*fn)(void* ctx), void* ctx, std::size_t& unacknowledged) noexcept {
    wait_hook_ = fn;
    wait_ctx_ = ctx;
    unacknowledged_ = &unacknowledged;
  }

 private:
  struct ref {
    std::size_t at;  // the value goes before text_[at]
    value_ptr value;
  };

  uring::task<void> flush_all(bool waits);
  uring::task<void> write(std::string_view bytes);
  bool may_wait(std::size_t n);

  const uring::net::tcp_stream* stream_;
  const output_limits* limits_;
  std::string text_;
  std::string sending_;  // the text a flush of one piece is writing
  std::vector<ref> refs_;
  std::size_t referenced_ = 0;
  bool held_ = false;
  bool resp3_ = false;
  uring::task<void> (*wait_hook_)(void*) = nullptr;
  void* wait_ctx_ = nullptr;
  std::size_t* unacknowledged_ = nullptr;
};

}  // namespace kv
