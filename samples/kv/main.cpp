// uring-kv: an in-memory key-value server speaking RESP2 and RESP3 (the Redis protocol), sharded over
// executors.
//
//   uring-kv [--address 127.0.0.1] [--port 6379] [--threads 1] [--backend auto|native|emulated]
//            [--max-connections N] [--idle-timeout SECONDS] [--output-timeout SECONDS]
//            [--max-output-buffer BYTES] [--requirepass PASSWORD | --requirepass-file FILE]
//
// Executor i owns shard i of the keyspace (kv::shard_of picks it); each shard holds databases 0 to 15
// (SELECT). Every executor accepts connections on its own SO_REUSEPORT listener. A shard's databases are
// touched only under its lock: a connection's command whose key lives on another shard runs on the
// connection's own thread when that lock is free, and is otherwise forwarded there with submit_to and
// awaited before the next command runs, so replies leave in request order, pipelining included. Commands
// naming several keys (MGET, MSET, MSETNX, DEL, UNLINK, EXISTS, TOUCH, RENAME, COPY) visit each shard that
// holds one of them, once per step; they are therefore not atomic across shards. KEYS, SCAN, RANDOMKEY,
// DBSIZE, FLUSHDB, FLUSHALL, SWAPDB and INFO visit every shard. Replies are Redis 7.0's, byte for byte
// (tests/kv_compat_test.py compares them with redis-server's). Replies to a batch of pipelined commands are
// written together once the batch read has been parsed (or once 64 KiB wait).
//
// Defensive: the RESP parser bounds bulk strings (--proto-max-bulk-len, 512 MiB), a command's bytes
// (--client-query-buffer-limit, 1 GiB; arguments are bounded only by it) and inline lines (64 KiB);
// malformed input gets "-ERR Protocol error: ..." and the connection is closed; an unknown command
// or a wrong argument count gets -ERR and the connection goes on. The limits of connection.hpp and
// reply.hpp hold each client's output, idleness and number (see usage()). SIGTERM/SIGINT stop every
// executor and the program exits 0. `--port 0` binds a free port, printed on the first line of stdout.
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <uring/uring.hpp>

#include "../server_setup.hpp"

#include "commands.hpp"
#include "connection.hpp"
#include "shard.hpp"

namespace {

using std::chrono::milliseconds;
using uring::task;
using uring::net::tcp_listener;
using uring::net::tcp_stream;

// File descriptors kept back from --max-connections' default: listeners, rings, eventfds, the signalfd
// and the connections being refused (each needs an fd to be told so).
constexpr long reserved_fds = 32;

struct config {
  std::string address = "127.0.0.1";
  int port = 6379;
  int threads = 1;
  uring::backend_kind backend = uring::backend_kind::automatic;
  kv::connection_limits limits;
  bool max_connections_given = false;
  std::string password;                             // --requirepass / --requirepass-file
  std::uint64_t max_bulk = 512ULL * 1024 * 1024;    // --proto-max-bulk-len
  std::uint64_t max_query = 1024ULL * 1024 * 1024;  // --client-query-buffer-limit
};

// The first line of `path` (its '\n' and a '\r' before it dropped): a password kept out of the command line,
// which other users can read in /proc. At most 4096 bytes are read.
std::string read_password(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    std::fprintf(stderr, "uring-kv: --requirepass-file: %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(2);
  }
  std::string pw(4096, '\0');
  pw.resize(std::fread(pw.data(), 1, pw.size(), f));
  std::fclose(f);
  pw = pw.substr(0, pw.find('\n'));
  if (!pw.empty() && pw.back() == '\r') pw.pop_back();
  return pw;
}

[[noreturn]] void usage(int code) {
  std::fprintf(
      code == 0 ? stdout : stderr,
      "usage: uring-kv [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
      "                [--max-connections N] [--idle-timeout SECONDS] [--output-timeout SECONDS]\n"
      "                [--max-output-buffer BYTES] [--requirepass PASSWORD | --requirepass-file FILE]\n"
      "                [--proto-max-bulk-len BYTES] [--client-query-buffer-limit BYTES]\n"
      "  --address            IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
      "  --port               TCP port (default 6379; 0 picks a free one, printed at start)\n"
      "  --threads            executors, each owning a shard of the keyspace and its own SO_REUSEPORT\n"
      "                       listener (default 1)\n"
      "  --backend            io_uring (native), its epoll emulation, or auto (default)\n"
      "  --max-connections    clients at once, all threads together; one more is answered\n"
      "                       '-ERR max number of clients reached' and closed (default 10000, lowered to\n"
      "                       the open-file limit (ulimit -n) minus 32)\n"
      "  --idle-timeout       close a client that completes no command for this many seconds (default 0:\n"
      "                       never, as Redis's 'timeout 0')\n"
      "  --output-timeout     close a client that takes none of a pending reply (each piece of up to\n"
      "                       256 KiB) for this many seconds (default 30; always on)\n"
      "  --max-output-buffer  reply bytes a client may have copied and unsent (default 33554432); a client\n"
      "                       past it is closed. Values of 16 KiB and more are sent from the store, not\n"
      "                       copied, and a client's input is not read while 64 KiB of replies wait for it\n"
      "  --requirepass        the default user's password, as Redis's: until AUTH (or HELLO AUTH) gives\n"
      "                       it, a client's commands but AUTH, HELLO and QUIT get -NOAUTH. A failed AUTH\n"
      "                       costs the server nothing but its reply; the 10th on one connection closes it\n"
      "                       (reported on stderr), so each 10 guesses cost a new connection. Compared in\n"
      "                       time that does not depend on the content (the length may show)\n"
      "  --requirepass-file   the password from the first line of FILE (at most 4096 bytes read), kept\n"
      "                       out of the command line that other users can read in /proc\n"
      "  --proto-max-bulk-len         the longest bulk string a client may send, as Redis's (default\n"
      "                               512mb; a memory value of at least 1mb: 1048576, 2mb, 1gb; CONFIG SET\n"
      "                               proto-max-bulk-len); longer: '-ERR Protocol error: invalid bulk\n"
      "                               length' and a close\n"
      "  --client-query-buffer-limit  the most bytes one command may take, as Redis's (default 1gb, at\n"
      "                               least 1mb; CONFIG SET client-query-buffer-limit); past it the\n"
      "                               connection is closed without a reply, as Redis does\n"
      "Input limits: arguments bounded only by --client-query-buffer-limit, inline lines 64 KiB; an HTTP\n"
      "request (POST, Host:, a request line) closes the connection. Connections closed by a limit are\n"
      "reported on stderr, each kind at most once every 10 s.\n"
      "Receives: chunks leased from a pool of 256 x 16 KiB buffers per thread, at most 1 per client; an\n"
      "idle client holds no buffer (its parser and reply exist only while it has input being answered).\n"
      "Commands, with Redis 7.0's replies: strings GET SET (NX XX GET EX PX EXAT PXAT KEEPTTL) GETEX GETDEL\n"
      "GETSET SETNX SETEX PSETEX MGET MSET MSETNX STRLEN APPEND SETRANGE GETRANGE INCR DECR INCRBY DECRBY\n"
      "INCRBYFLOAT SUBSTR; keys DEL UNLINK EXISTS TOUCH TYPE RENAME RENAMENX COPY MOVE KEYS SCAN RANDOMKEY\n"
      "DBSIZE FLUSHDB FLUSHALL SWAPDB;\n"
      "expiry EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT) TTL PTTL EXPIRETIME PEXPIRETIME PERSIST;\n"
      "connection PING ECHO SELECT (databases 0-15) QUIT AUTH HELLO (RESP2 and RESP3) TIME, CLIENT ID\n"
      "SETNAME GETNAME INFO LIST KILL NO-EVICT (names of at most 1024 bytes; CLIENT LIST renders at most\n"
      "10000 clients, those of the lowest ids; KILL reaches every thread's clients), COMMAND (Redis's\n"
      "entries for these commands), CONFIG GET SET RESETSTAT (save and appendonly fixed;\n"
      "proto-max-bulk-len, client-query-buffer-limit), INFO server clients memory stats keyspace (and\n"
      "shards; used_memory is what the allocator holds, avg_ttl the exact mean); transactions MULTI EXEC\n"
      "DISCARD WATCH UNWATCH.\n"
      "Strings only (no lists, hashes, sets). Values made by APPEND and SETRANGE\n"
      "stop at 64 MiB ('string exceeds maximum allowed size'). Inline commands take quotes as Redis\n"
      "does; unbalanced quotes are a protocol error and a close.\n"
      "Transactions: at most 10000 queued commands and 16 MiB of their arguments (past either, an error\n"
      "and EXEC aborts), 1024 watched keys and 1 MiB of their names per client; EXEC holds its replies\n"
      "(within --max-output-buffer) and is atomic with one thread, or when its commands are single-key\n"
      "ones, whatever shards they and the watched keys live on (it holds those shards' locks); otherwise\n"
      "other clients' commands may run between its commands and between its WATCH check and its first\n"
      "command.\n"
      "KEYS and SCAN cost O(keys of a shard) per call; commands naming keys of several shards are\n"
      "not atomic. Expiry: lazy, and active every 100 ms per shard (samples of 20 keys with a deadline\n"
      "per database, again while over a quarter had expired, at most 1280 keys per database and turn);\n"
      "DBSIZE counts a key whose deadline passed until it is reclaimed, as Redis does.\n"
      "SIGUSR1: print each executor's operations in flight (kind, fd, age) on stderr.\n"
      "SIGTERM/SIGINT: stop, exit 0.\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uring-kv: %s needs a value\n", a.c_str());
        usage(2);
      }
      return argv[++i];
    };
    auto number = [&](long lo, long hi) {
      std::string v = value();
      auto n = kv::parse_int(v);
      if (!n || *n < lo || *n > hi) {
        std::fprintf(stderr, "uring-kv: %s: '%s' is not an integer in [%ld, %ld]\n", a.c_str(), v.c_str(), lo,
                     hi);
        usage(2);
      }
      return *n;
    };
    auto seconds = [&](double lo) {
      std::string v = value();
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(d >= lo && d <= 1e6)) {
        std::fprintf(stderr, "uring-kv: %s: '%s' is not a number of seconds in [%g, 1e6]\n", a.c_str(),
                     v.c_str(), lo);
        usage(2);
      }
      return milliseconds(static_cast<long>(std::ceil(d * 1000)));  // a positive time is at least 1 ms
    };
    if (a == "--address") {
      c.address = value();
    } else if (a == "--port") {
      c.port = static_cast<int>(number(0, 65535));
    } else if (a == "--threads") {
      c.threads = static_cast<int>(number(1, 1024));
    } else if (a == "--backend") {
      std::string b = value();
      if (!samples::parse_backend(b, c.backend)) {
        std::fprintf(stderr, "uring-kv: --backend: '%s' is not auto, native or emulated\n", b.c_str());
        usage(2);
      }
    } else if (a == "--max-connections") {
      c.limits.max_connections = static_cast<int>(number(1, 10'000'000));
      c.max_connections_given = true;
    } else if (a == "--idle-timeout") {
      c.limits.idle = seconds(0);
    } else if (a == "--output-timeout") {
      c.limits.output.stall = seconds(0.001);
    } else if (a == "--max-output-buffer") {
      c.limits.output.hard = static_cast<std::size_t>(number(1024, 1L << 40));
    } else if (a == "--proto-max-bulk-len" || a == "--client-query-buffer-limit") {
      std::string v = value();
      auto bytes = kv::parse_memory(v);
      if (!bytes || *bytes < kv::min_input_limit || *bytes > static_cast<std::uint64_t>(LLONG_MAX)) {
        std::fprintf(stderr, "uring-kv: %s: '%s' is not a memory value of at least 1mb\n", a.c_str(),
                     v.c_str());
        usage(2);
      }
      (a == "--proto-max-bulk-len" ? c.max_bulk : c.max_query) = *bytes;
    } else if (a == "--requirepass") {
      c.password = value();
    } else if (a == "--requirepass-file") {
      c.password = read_password(value());
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-kv: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  // Half the cap at most: a reply written at the soft limit cannot have taken the copy past the cap unless
  // one piece of it alone is longer than the other half.
  c.limits.output.soft = std::min(c.limits.output.soft, c.limits.output.hard / 2);
  return c;
}

// As Redis sizes maxclients: what the open-file limit leaves, so that a client above the limit can still be
// accepted and told, rather than left in the backlog by a failing accept.
void fit_to_fd_limit(config& c) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  long room = static_cast<long>(rl.rlim_cur) - reserved_fds;
  if (room < 1) room = 1;
  if (c.limits.max_connections <= room) return;
  if (c.max_connections_given) {
    std::fprintf(stderr,
                 "uring-kv: --max-connections %d is above the open-file limit %ld less %ld; using %ld\n",
                 c.limits.max_connections, static_cast<long>(rl.rlim_cur), reserved_fds, room);
  }
  c.limits.max_connections = static_cast<int>(room);
}

// Accepts on `listener`, each connection a member of `members`: a member costs one frame beyond its
// task's, where uring::spawn would add a join handle's state too. serve_connection catches what its
// connection can throw, so no member fails (which would stop the others).
task<void> accept_loop(const tcp_listener* listener, kv::server* srv, std::size_t me,
                       const kv::connection_limits* limits, uring::task_scope* members) {
  // Freed with this frame, after every operation has ended (executor_group's stop), before the executor.
  uring::net::buffer_pool pool({.count = kv::receive_buffers,
                                .size = kv::receive_buffer_size,
                                .max_per_stream = kv::receive_buffers_per_connection});
  srv->pools[me] = &pool;
  auto connections = listener->accept_all();
  samples::accept_backoff backoff;
  for (;;) {
    tcp_stream s;
    try {
      s = co_await connections.next();
    } catch (const std::system_error& e) {
      // Out of fds and the like: the connection waits in the backlog; retry later (10 ms doubling to 1 s),
      // say so at most once a second.
      std::fputs(backoff.failed("uring-kv", e.what()).c_str(), stderr);
    }
    if (!s.is_open()) {
      co_await uring::sleep_for(backoff.delay());
      continue;
    }
    if (backoff.delay().count() > 0) std::fputs(backoff.succeeded("uring-kv").c_str(), stderr);
    members->spawn(kv::serve_connection(std::move(s), srv, me, limits));
  }
}

// Active expiry on shard `i`, as Redis's cycle: every 100 ms a bounded sample of each database's keys with a
// deadline, so keys nobody reads again are reclaimed too.
task<void> expiry_loop(kv::server* srv, std::size_t i) {
  for (;;) {
    co_await uring::sleep_for(milliseconds(100));
    kv::keys_guard hold(*srv->shards[i]);
    srv->shards[i]->expire_cycle(kv::clock_ms());
  }
}

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  fit_to_fd_limit(c);

  // SIGTERM and SIGINT are read from a signalfd; every listener is bound before any thread starts.
  int signal_fd = -1;
  std::vector<tcp_listener> listeners;
  uring::net::address where;
  try {
    signal_fd = samples::termination_signalfd();
    listeners = samples::bind_reuseport(c.address, c.port, c.threads);
    where = listeners.front().local_address();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-kv: %s\n", e.what());
    return 1;
  }

  kv::server srv;
  srv.port = where.port();
  srv.password = c.password;
  srv.proto_max_bulk_len = c.max_bulk;
  srv.query_buffer_limit = c.max_query;
  srv.max_connections = c.limits.max_connections;
  srv.make_shards(static_cast<std::size_t>(c.threads));
  srv.pools.resize(srv.shards.size());
  int status = 0;
  // Each executor's connections. Destroyed after the group, whose stop ends them (their frames go with
  // their executors), so that nothing is left to wait for.
  std::vector<std::unique_ptr<uring::task_scope>> connections;
  for (int i = 0; i < c.threads; ++i) connections.push_back(std::make_unique<uring::task_scope>());
  try {
    uring::executor_options opts;
    opts.backend = c.backend;
    opts.histograms = true;  // INFO uring reports the batching percentiles
    // One shard: SINGLE_ISSUER|DEFER_TASKRUN, so that the task work of its sockets' receives runs in a batch
    // when the loop waits, not as each arrives (5-8% less CPU per request without pipelining). Several
    // shards hand commands to each other all the time: they keep the default flags (messages cost more
    // between such rings) and send by mailbox, a queue in memory with an eventfd only to wake a sleeping
    // shard, which costs less per hop than a MSG_RING each (2-16% less CPU per request). Both measured in
    // bench/README.md, "uring-kv, build against build".
    if (c.threads == 1) {
      opts.flags = opts.flags | uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
    } else {
      opts.disable = opts.disable | uring::feature::msg_ring;
    }
    // A group, not independent executors: a forwarded command's coroutine visits other executors, and a
    // group stops them together (no frame freed while another ring still holds one of its operations).
    uring::executor_group group(static_cast<std::size_t>(c.threads), opts);
    srv.group = &group;
    srv.backend = to_string(group.at(0).plan().backend);
    for (std::size_t i = 0; i < group.size(); ++i) {
      uring::spawn(group.at(i), accept_loop(&listeners[i], &srv, i, &c.limits, connections[i].get()));
      uring::spawn(group.at(i), expiry_loop(&srv, i));
    }
    std::printf("uring-kv: listening on %s (%d threads, %s backend)\n", where.to_string().c_str(), c.threads,
                srv.backend.c_str());
    std::fflush(stdout);

    int signo = samples::wait_for_termination(signal_fd, [&] {
      for (std::size_t i = 0; i < group.size(); ++i) samples::print_inflight("uring-kv", i, group.at(i));
    });
    std::fprintf(stderr, "uring-kv: %s: stopping\n", strsignal(signo));
    group.stop();
    group.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-kv: %s\n", e.what());
    status = 1;
  }
  ::close(signal_fd);
  return status;
}
