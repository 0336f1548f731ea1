// samples/kv/commands.hpp — what uring-kv's executors share, one client's session, and running a command.
//
// Provides: kv::server (the shards and the executor group), kv::session (a connection's database and
// name), kv::execute, and for the command files kv::context, kv::on_shard, kv::on_executor and the commands
// that visit several shards (keyspace.cpp, multikey.cpp) or none (local.cpp). Threads: execute runs on the
// connection's executor `me`; shard i's databases are touched under its lock (keys_guard), on group->at(i)'s
// thread, or on `me`'s for a single-key command when that lock is free; anything else of executor i (its
// clients, its ring's figures) only on its thread, visited with submit_to.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uring/uring.hpp>

#include "clients.hpp"
#include "reply.hpp"
#include "shard.hpp"
#include "transaction.hpp"

namespace kv {

// The version HELLO and INFO report: the Redis whose replies uring-kv gives.
inline constexpr std::string_view redis_version = "7.0.0";

struct server {
  uring::executor_group* group = nullptr;
  std::vector<std::unique_ptr<shard>> shards;
  std::vector<std::unique_ptr<client_registry>> clients;  // one per executor, as the shards
  // Each executor's receive buffers (made by its accept loop, on its thread), lent to its connections one
  // chunk at a time.
  std::vector<uring::net::buffer_pool*> pools;
  std::string backend;
  int port = 0;
  int max_connections = 0;
  std::int64_t started_ms = clock_ms();
  std::string password;  // --requirepass: empty when none is required
  // Input limits, as Redis's (settable with CONFIG SET; a connection reads them at each burst of input): the
  // longest bulk string, and the most bytes one command may take (its arguments are not counted otherwise).
  std::atomic<std::uint64_t> proto_max_bulk_len{512ULL * 1024 * 1024};
  std::atomic<std::uint64_t> query_buffer_limit{1024ULL * 1024 * 1024};

  [[nodiscard]] std::size_t count() const noexcept { return shards.size(); }
  // `n` shards and a client registry each; with several, each shard's databases are taken under its lock.
  void make_shards(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      shards.push_back(std::make_unique<shard>());
      shards.back()->shared = n > 1;
      clients.push_back(std::make_unique<client_registry>());
    }
  }
};

// A connection's state between its commands. Its executor's client_registry lists it (CLIENT LIST reads
// it there, on that thread only).
struct session {
  // Ordered so that the fields pack: a session is part of every idle connection's cost.
  int db = 0;                    // SELECT
  int proto = 2;                 // HELLO: RESP2 or RESP3
  int auth_failures = 0;         // failed AUTH and HELLO AUTH: max_auth_failures close the connection
  bool authenticated = true;     // false until AUTH when --requirepass is set
  std::string name;              // CLIENT SETNAME
  std::int64_t id;               // CLIENT ID: unique over the server's life
  transaction tx;                // MULTI and WATCH
  client_info info;              // what CLIENT LIST tells of the connection
  std::int64_t exec_count = -1;  // while EXEC runs its queue: the queue's length (CLIENT LIST's multi=)
  uring::resp::command_parser* input = nullptr;  // while a burst is served: its parser (keyspace::store)
  std::size_t unacknowledged = 0;                // reply::before_waiting's bound, kept between bursts
  session* prev = nullptr;                       // its executor's client_registry, linked through sessions
  session* next = nullptr;

  session();
};

// A command execute started: awaiting it yields false when the connection should close (QUIT). Most
// commands finish at once (a refusal, a queued command, one answered by this executor, a single-key
// command on its own shard) and the await does not suspend; the rest of one that visits another shard
// runs as a task. So a command on its own shard allocates no coroutine frame.
class [[nodiscard]] command_run {
 public:
  explicit command_run(bool open) noexcept : open_(open) {}
  explicit command_run(uring::task<bool> rest) noexcept : rest_(std::move(rest)) {}

  [[nodiscard]] bool await_ready() const noexcept { return !rest_.valid(); }
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> caller) noexcept {
    return rest_.operator co_await().await_suspend(caller);
  }
  bool await_resume() { return rest_.valid() ? rest_.operator co_await().await_resume() : open_; }

 private:
  bool open_ = true;
  uring::task<bool> rest_;
};

class forward_batch;

// Runs one command, its reply into `out` (a long one written as it forms: see reply::must_flush); the
// caller awaits what it returns. `args` points into the connection's parser, which is not touched until
// that await ends. With `batch`, a single-key command bound for another shard that the batch takes joins
// it instead (its reply comes when the caller runs the batch), so the caller runs a batch that does not
// take the next command (forwarded_to) before executing that one.
command_run execute(server& srv, std::size_t me, session& ses, args_t args, reply& out,
                    forward_batch* batch = nullptr);
// The shard that execute forwards `args` to as a single-key command on another shard's key, or
// forward_batch::none for any other command (refused, queued, local, visiting several shards).
std::size_t forwarded_to(const server& srv, std::size_t me, const session& ses, args_t args) noexcept;

// One command being run: what a command body needs.
struct context {
  server& srv;
  std::size_t me;  // the connection's executor
  session& ses;
  args_t args;  // name first, arity checked
  reply& out;
  bool close = false;  // QUIT: close after the reply
};

// The reply text the command appends to (reply::text).
inline std::string& text(context& c) { return c.out.text(); }

// Runs `fn()` on executor `i`'s thread, holding its shard's lock: for what only that thread may touch (its
// clients, its ring's figures), with or without the keyspace. Directly when that is this one, else
// forwarded and awaited.
template <class F>
uring::task<void> on_executor(server& srv, std::size_t me, std::size_t i, F fn) {
  auto locked = [&srv, &fn, i] {
    keys_guard hold(*srv.shards[i]);
    fn();
  };
  if (i == me) {
    locked();
  } else {
    co_await uring::submit_to(srv.group->at(i), locked);
  }
}

// Runs `fn()`, which touches shard `i`'s databases and nothing else of executor i, holding the shard's
// lock: on this thread when the shard is this one's or its lock is free, else on executor i's thread.
template <class F>
uring::task<void> on_shard(server& srv, std::size_t me, std::size_t i, F fn) {
  if (i != me) {
    if (keys_guard hold(*srv.shards[i], std::try_to_lock); hold.owns()) {
      fn();
      co_return;
    }
    ++srv.shards[me]->hops;
  }
  co_await on_executor(srv, me, i, std::move(fn));
}

// Counts a command that names keys on executor `me`; `elsewhere`: some key lives on another shard.
void count_keyed(server& srv, std::size_t me, bool elsewhere) noexcept;

// Commands naming several keys, each visiting the shards that hold them (multikey.cpp).
uring::task<void> cmd_mget(context& c);
uring::task<void> cmd_mset(context& c);
uring::task<void> cmd_msetnx(context& c);
uring::task<void> cmd_del(context& c);
uring::task<void> cmd_exists(context& c);
uring::task<void> cmd_rename(context& c);
uring::task<void> cmd_renamenx(context& c);
uring::task<void> cmd_copy(context& c);
uring::task<void> cmd_move(context& c);
// Commands over the whole keyspace, visiting every shard (keyspace.cpp).
uring::task<void> cmd_keys(context& c);
uring::task<void> cmd_scan(context& c);
uring::task<void> cmd_randomkey(context& c);
uring::task<void> cmd_dbsize(context& c);
uring::task<void> cmd_flushall(context& c);
uring::task<void> cmd_flushdb(context& c);
uring::task<void> cmd_swapdb(context& c);
// INFO, visiting every executor once (info.cpp).
uring::task<void> cmd_info(context& c);
// CONFIG GET, SET and RESETSTAT (config.cpp; RESETSTAT visits every executor).
uring::task<void> cmd_config(context& c);
// Transactions (transaction.cpp). While MULTI is on, execute queues the other commands with
// queue_command, and refuses those of a wrong name or arity, subcommand's included (then EXEC aborts); EXEC
// of a wrong arity ends the transaction through exec_abort. unwatch_all: a closing connection's watches go.
void cmd_multi(context& c);  // answered at once: it only opens the queue
uring::task<void> cmd_exec(context& c);
uring::task<void> cmd_discard(context& c);
uring::task<void> cmd_watch(context& c);
uring::task<void> cmd_unwatch(context& c);
void queue_command(context& c);
// The body of a single-key command (args[1] its key), or null for the others and unknown names.
single_fn single_command(std::string_view name) noexcept;
uring::task<void> exec_abort(context& c, std::string_view why);
uring::task<void> unwatch_all(server& srv, std::size_t me, session& ses);
// Commands answered without the keyspace (local.cpp; COMMAND: command_info.cpp).
void cmd_ping(context& c);
void cmd_echo(context& c);
void cmd_quit(context& c);
void cmd_select(context& c);
void cmd_command(context& c);
void cmd_time(context& c);
// Connection commands (auth.cpp, clients.cpp): AUTH and HELLO, and CLIENT with its subcommands.
void cmd_auth(context& c);
void cmd_hello(context& c);
uring::task<void> cmd_client(context& c);
// Whether the session may run `command` (upper case): with --requirepass, only AUTH, HELLO and QUIT run
// before AUTH succeeds.
bool allowed_before_auth(const server& srv, const session& ses, std::string_view command) noexcept;

// The least either input limit may be set to (Redis's bound).
inline constexpr std::uint64_t min_input_limit = 1024 * 1024;
// A memory value as Redis reads one: digits and an optional unit (b, k, kb, m, mb, g, gb; any case; k is
// 1000, kb 1024). Null if it is not one; UINT64_MAX if it overflows.
std::optional<std::uint64_t> parse_memory(std::string_view s) noexcept;

// Whether `n` arguments (the name counted) fit Redis's `arity`: N exactly N, -N at least N.
bool arity_fits(int arity, std::size_t n) noexcept;

// Whether `key` matches the glob `pattern` as Redis's stringmatchlen (KEYS, SCAN MATCH, COMMAND LIST).
bool matches(std::string_view pattern, std::string_view key);

// The number of commands uring-kv knows (COMMAND COUNT: command_table's, command_info.cpp).
std::size_t command_count() noexcept;

}  // namespace kv
