// uring-kv: an in-memory key-value server speaking RESP2 (the Redis protocol), sharded over executors.
//
//   uring-kv [--address 127.0.0.1] [--port 6379] [--threads 1] [--backend auto|native|emulated]
//
// Shared-nothing: executor i owns shard i of the keyspace (kv::shard_of picks it) and is the only thread
// that touches it. Every executor accepts connections on its own SO_REUSEPORT listener; a connection's
// command whose key lives on another shard is forwarded there with submit_to and awaited before the next
// command runs, so replies leave in request order, pipelining included. Multi-key commands (MGET, MSET,
// DEL, EXISTS) visit each shard that holds one of their keys, once; MSET is therefore not atomic across
// shards. DBSIZE, FLUSHALL and INFO visit every shard. Replies to a batch of pipelined commands are
// written together once the batch read has been parsed (or every 64 KiB).
//
// Defensive: the RESP parser bounds bulk strings (1 MiB), arguments per command (1024 + 1) and inline
// lines; malformed input gets "-ERR Protocol error: ..." and the connection is closed; an unknown command
// or a wrong argument count gets -ERR and the connection goes on. SIGTERM/SIGINT stop every executor and
// the program exits 0. `--port 0` binds a free port, printed on the first line of stdout.
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <uring/resp/parser.hpp>
#include <uring/uring.hpp>

#include "../server_setup.hpp"

#include "shard.hpp"

namespace {

using uring::task;
using uring::net::tcp_listener;
using uring::net::tcp_stream;
namespace resp = uring::resp;

using args_t = std::span<const std::string_view>;

struct config {
  std::string address = "127.0.0.1";
  int port = 6379;
  int threads = 1;
  uring::backend_kind backend = uring::backend_kind::automatic;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-kv [--address IP] [--port N] [--threads N] [--backend auto|native|emulated]\n"
               "  --address  IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
               "  --port     TCP port (default 6379; 0 picks a free one, printed at start)\n"
               "  --threads  executors, each owning a shard of the keyspace and its own SO_REUSEPORT listener\n"
               "             (default 1)\n"
               "  --backend  io_uring (native), its epoll emulation, or auto (default)\n"
               "Commands: PING ECHO GET SET(EX/PX/NX/XX/KEEPTTL) DEL EXISTS INCR DECR INCRBY DECRBY MGET MSET\n"
               "EXPIRE PEXPIRE TTL PTTL DBSIZE FLUSHALL FLUSHDB SELECT QUIT, and COMMAND/CONFIG GET/INFO for clients.\n"
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
        std::fprintf(stderr, "uring-kv: %s: '%s' is not an integer in [%ld, %ld]\n", a.c_str(), v.c_str(), lo, hi);
        usage(2);
      }
      return static_cast<int>(*n);
    };
    if (a == "--address") {
      c.address = value();
    } else if (a == "--port") {
      c.port = number(0, 65535);
    } else if (a == "--threads") {
      c.threads = number(1, 1024);
    } else if (a == "--backend") {
      std::string b = value();
      if (!samples::parse_backend(b, c.backend)) {
        std::fprintf(stderr, "uring-kv: --backend: '%s' is not auto, native or emulated\n", b.c_str());
        usage(2);
      }
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-kv: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  return c;
}

// Everything the executors share; shard i is touched only on group->at(i)'s thread.
struct server {
  uring::executor_group* group = nullptr;
  std::vector<std::unique_ptr<kv::shard>> shards;
  std::string backend;
  int port = 0;

  std::size_t count() const noexcept { return shards.size(); }
};

// Called on executor `me` for each command that names keys; `elsewhere`: some key lives on another shard.
void count_keyed(server& srv, std::size_t me, bool elsewhere) noexcept {
  kv::shard& s = *srv.shards[me];
  ++s.keyed_commands;
  if (elsewhere) ++s.forwarded_commands;
}

// How a command reaches the data it needs.
enum class route : std::uint8_t {
  local,       // no key: answered by the connection's own executor
  single_key,  // args[1] is the key: runs on its shard
  multi_key,   // every argument from args[1] on (every other one for MSET) is a key
  every_shard, // visits all shards
};

enum class cmd : std::uint8_t {
  ping, echo, quit, select, command, config, client,
  get, set, incr, decr, incrby, decrby, expire, pexpire, ttl, pttl,
  del, exists, mget, mset,
  dbsize, flushall, info,
};

struct spec {
  std::string_view name;  // upper case
  cmd id;
  route how;
  int min_args;  // counting the name
  int max_args;  // -1: any number
};

constexpr spec commands[] = {
    {"PING", cmd::ping, route::local, 1, 2},          {"ECHO", cmd::echo, route::local, 2, 2},
    {"QUIT", cmd::quit, route::local, 1, -1},         {"SELECT", cmd::select, route::local, 2, 2},
    {"COMMAND", cmd::command, route::local, 1, -1},   {"CONFIG", cmd::config, route::local, 2, -1},
    {"CLIENT", cmd::client, route::local, 2, -1},     {"GET", cmd::get, route::single_key, 2, 2},
    {"SET", cmd::set, route::single_key, 3, 8},       {"INCR", cmd::incr, route::single_key, 2, 2},
    {"DECR", cmd::decr, route::single_key, 2, 2},     {"INCRBY", cmd::incrby, route::single_key, 3, 3},
    {"DECRBY", cmd::decrby, route::single_key, 3, 3}, {"EXPIRE", cmd::expire, route::single_key, 3, 3},
    {"PEXPIRE", cmd::pexpire, route::single_key, 3, 3}, {"TTL", cmd::ttl, route::single_key, 2, 2},
    {"PTTL", cmd::pttl, route::single_key, 2, 2},     {"DEL", cmd::del, route::multi_key, 2, -1},
    {"EXISTS", cmd::exists, route::multi_key, 2, -1}, {"MGET", cmd::mget, route::multi_key, 2, -1},
    {"MSET", cmd::mset, route::multi_key, 3, -1},     {"DBSIZE", cmd::dbsize, route::every_shard, 1, 1},
    {"FLUSHALL", cmd::flushall, route::every_shard, 1, 2}, {"FLUSHDB", cmd::flushall, route::every_shard, 1, 2},
    {"INFO", cmd::info, route::every_shard, 1, -1},
};

// The command's name upper-cased into `buf` (names longer than any command are left as they are).
std::string_view upper(std::string_view s, std::array<char, 16>& buf) noexcept {
  if (s.size() > buf.size()) return s;
  for (std::size_t i = 0; i < s.size(); ++i) buf[i] = s[i] >= 'a' && s[i] <= 'z' ? static_cast<char>(s[i] - 32) : s[i];
  return {buf.data(), s.size()};
}

const spec* lookup(std::string_view name) noexcept {
  std::array<char, 16> buf;
  std::string_view u = upper(name, buf);
  for (const spec& s : commands) {
    if (s.name == u) return &s;
  }
  return nullptr;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  return r;
}

// The printable start of untrusted bytes, for an error message.
std::string excerpt(std::string_view s) {
  std::string r;
  for (char c : s.substr(0, 64)) r += (c >= 0x20 && c < 0x7f) ? c : '?';
  return r;
}

void run_single(const spec& sp, kv::shard& s, args_t args, std::string& out) {
  switch (sp.id) {
    case cmd::get: return kv::run_get(s, args, out);
    case cmd::set: return kv::run_set(s, args, out);
    case cmd::incr: return kv::run_incrby(s, args[1], 1, out);
    case cmd::decr: return kv::run_incrby(s, args[1], -1, out);
    case cmd::incrby:
    case cmd::decrby: {
      auto by = kv::parse_int(args[2]);
      if (!by || (sp.id == cmd::decrby && *by == std::numeric_limits<std::int64_t>::min())) {
        return resp::append_error(out, "ERR value is not an integer or out of range");
      }
      return kv::run_incrby(s, args[1], sp.id == cmd::decrby ? -*by : *by, out);
    }
    case cmd::expire: return kv::run_expire(s, args, 1000, out);
    case cmd::pexpire: return kv::run_expire(s, args, 1, out);
    case cmd::ttl: return kv::run_ttl(s, args, 1000, out);
    case cmd::pttl: return kv::run_ttl(s, args, 1, out);
    default: return resp::append_error(out, "ERR internal: not a single-key command");
  }
}

// Runs `fn()` on shard `i`'s executor: directly when that is this one, else forwarded and awaited.
template <class F>
task<void> on_shard(server& srv, std::size_t me, std::size_t i, F fn) {
  if (i == me) {
    fn();
  } else {
    co_await uring::submit_to(srv.group->at(i), fn);
  }
}

// MGET / MSET / DEL / EXISTS: one visit to each shard holding some of the keys, in shard order; the
// reply is assembled here in argument order.
task<void> run_multi(server& srv, std::size_t me, const spec& sp, args_t args, std::string& out) {
  std::size_t step = sp.id == cmd::mset ? 2 : 1;
  if ((args.size() - 1) % step != 0) {
    resp::append_error(out, "ERR wrong number of arguments for '" + lower(sp.name) + "' command");
    co_return;
  }
  std::vector<std::vector<std::size_t>> by_shard(srv.count());  // argument indices of the keys
  for (std::size_t a = 1; a < args.size(); a += step) by_shard[kv::shard_of(args[a], srv.count())].push_back(a);
  bool elsewhere = false;
  for (std::size_t i = 0; i < by_shard.size(); ++i) elsewhere |= i != me && !by_shard[i].empty();
  count_keyed(srv, me, elsewhere);
  std::vector<std::optional<std::string>> values(sp.id == cmd::mget ? args.size() : 0);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < srv.count(); ++i) {
    if (by_shard[i].empty()) continue;
    // Runs on shard i's thread while this coroutine waits: `values` and `count` are handed over and back.
    co_await on_shard(srv, me, i, [&srv, &sp, &by_shard, &values, &count, args, i] {
      kv::shard& s = *srv.shards[i];
      std::int64_t now = kv::clock_ms();
      for (std::size_t a : by_shard[i]) {
        switch (sp.id) {
          case cmd::mget:
            if (kv::entry* e = s.find(args[a], now)) values[a] = e->value;
            break;
          case cmd::mset: {
            kv::entry& e = s.upsert(args[a]);
            e.value.assign(args[a + 1]);
            e.expires_ms = 0;
            break;
          }
          case cmd::del: count += s.erase(args[a], now) ? 1 : 0; break;
          case cmd::exists: count += s.find(args[a], now) != nullptr ? 1 : 0; break;
          default: break;
        }
      }
    });
  }
  if (sp.id == cmd::mget) {
    resp::append_array_header(out, args.size() - 1);
    for (std::size_t a = 1; a < args.size(); ++a) {
      if (values[a]) {
        resp::append_bulk_string(out, *values[a]);
      } else {
        resp::append_null_bulk(out);
      }
    }
  } else if (sp.id == cmd::mset) {
    resp::append_simple_string(out, "OK");
  } else {
    resp::append_integer(out, count);
  }
}

// DBSIZE / FLUSHALL / INFO: every shard in turn.
task<void> run_every(server& srv, std::size_t me, const spec& sp, args_t args, std::string& out) {
  if (sp.id == cmd::flushall && args.size() == 2 && lookup(args[1]) == nullptr) {
    std::array<char, 16> buf;
    std::string_view mode = upper(args[1], buf);
    if (mode != "ASYNC" && mode != "SYNC") {
      resp::append_error(out, "ERR syntax error");
      co_return;
    }
  }
  std::vector<std::size_t> sizes(srv.count());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(srv.count());  // commands, forwarded
  for (std::size_t i = 0; i < srv.count(); ++i) {
    co_await on_shard(srv, me, i, [&srv, &sp, &sizes, &keyed, i] {
      kv::shard& s = *srv.shards[i];
      if (sp.id == cmd::flushall) {
        s.clear();
      } else {
        sizes[i] = s.size(kv::clock_ms());
        keyed[i] = {s.keyed_commands, s.forwarded_commands};
      }
    });
  }
  std::size_t total = 0;
  for (std::size_t n : sizes) total += n;
  if (sp.id == cmd::flushall) {
    resp::append_simple_string(out, "OK");
  } else if (sp.id == cmd::dbsize) {
    resp::append_integer(out, static_cast<std::int64_t>(total));
  } else {
    // INFO: enough for clients that read redis_version, and the keys per shard (the tests read these).
    std::string info = "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nuring_kv_backend:" + srv.backend +
                       "\r\ntcp_port:" + std::to_string(srv.port) + "\r\nuring_kv_shards:" +
                       std::to_string(srv.count()) + "\r\n\r\n# Keyspace\r\n";
    if (total > 0) info += "db0:keys=" + std::to_string(total) + ",expires=0,avg_ttl=0\r\n";
    info += "\r\n# Shards\r\n";
    std::uint64_t keyed_total = 0;
    std::uint64_t forwarded = 0;
    for (std::size_t i = 0; i < srv.count(); ++i) {
      std::string shard = "shard" + std::to_string(i);
      info += shard + "_keys:" + std::to_string(sizes[i]) + "\r\n" + shard +
              "_keyed_commands:" + std::to_string(keyed[i].first) + "\r\n" + shard +
              "_forwarded_commands:" + std::to_string(keyed[i].second) + "\r\n";
      keyed_total += keyed[i].first;
      forwarded += keyed[i].second;
    }
    // Keyed commands that visited another shard than their connection's: the cross-shard share.
    info += "keyed_commands:" + std::to_string(keyed_total) + "\r\nforwarded_commands:" + std::to_string(forwarded) + "\r\n";
    resp::append_bulk_string(out, info);
  }
}

// Commands answered without the keyspace. Returns false for QUIT (close after the reply).
bool run_local(const spec& sp, args_t args, std::string& out) {
  std::array<char, 16> buf;
  std::string_view sub = args.size() > 1 ? upper(args[1], buf) : std::string_view{};
  switch (sp.id) {
    case cmd::ping:
      if (args.size() == 2) {
        resp::append_bulk_string(out, args[1]);
      } else {
        resp::append_simple_string(out, "PONG");
      }
      break;
    case cmd::echo: resp::append_bulk_string(out, args[1]); break;
    case cmd::quit: resp::append_simple_string(out, "OK"); return false;
    case cmd::select:
      if (args[1] == "0") {
        resp::append_simple_string(out, "OK");
      } else {
        resp::append_error(out, "ERR DB index is out of range");
      }
      break;
    case cmd::command:
      // redis-cli asks for COMMAND DOCS at start (interactive): an empty answer means "no hints".
      if (sub == "COUNT") {
        resp::append_integer(out, static_cast<std::int64_t>(std::size(commands)));
      } else {
        resp::append_array_header(out, 0);
      }
      break;
    case cmd::config:
      // redis-benchmark reads "save" and "appendonly" at start: answer as a server that persists nothing.
      if (sub == "GET") {
        std::vector<std::string_view> pairs;
        for (std::size_t i = 2; i < args.size(); ++i) {
          for (std::string_view name : {"save", "appendonly"}) {
            if (args[i] == name || args[i] == "*") {
              pairs.push_back(name);
              pairs.push_back(name == "save" ? "" : "no");
            }
          }
        }
        resp::append_bulk_array(out, pairs);
      } else {
        resp::append_error(out, "ERR CONFIG " + excerpt(args[1]) + " is not supported by uring-kv");
      }
      break;
    case cmd::client:
      if (sub == "SETNAME" || sub == "SETINFO") {
        resp::append_simple_string(out, "OK");
      } else {
        resp::append_error(out, "ERR CLIENT " + excerpt(args[1]) + " is not supported by uring-kv");
      }
      break;
    default: resp::append_error(out, "ERR internal: not a local command"); break;
  }
  return true;
}

// Runs one command, appending its reply to `out`. Returns false when the connection should close.
// `args` points into the connection's parser, which is not touched until this returns.
task<bool> execute(server& srv, std::size_t me, args_t args, std::string& out) {
  const spec* sp = lookup(args[0]);
  if (sp == nullptr) {
    std::string msg = "ERR unknown command '" + excerpt(args[0]) + "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && i < 4; ++i) msg += "'" + excerpt(args[i]) + "' ";
    resp::append_error(out, msg);
    co_return true;
  }
  auto n = static_cast<int>(args.size());
  if (n < sp->min_args || (sp->max_args >= 0 && n > sp->max_args)) {
    resp::append_error(out, "ERR wrong number of arguments for '" + lower(sp->name) + "' command");
    co_return true;
  }
  switch (sp->how) {
    case route::local: co_return run_local(*sp, args, out);
    case route::single_key: {
      std::size_t i = kv::shard_of(args[1], srv.count());
      count_keyed(srv, me, i != me);
      co_await on_shard(srv, me, i, [&srv, sp, args, &out, i] { run_single(*sp, *srv.shards[i], args, out); });
      co_return true;
    }
    case route::multi_key: co_await run_multi(srv, me, *sp, args, out); co_return true;
    case route::every_shard: co_await run_every(srv, me, *sp, args, out); co_return true;
  }
  co_return true;
}

// Reads, parses and answers until the peer ends the stream, breaks the protocol, or says QUIT.
task<void> serve_connection(tcp_stream s, server* srv, std::size_t me) {
  resp::limits lim;
  lim.max_bulk = 1024 * 1024;
  lim.max_args = 1025;  // MSET with 512 pairs
  lim.max_command = 4 * 1024 * 1024;
  resp::command_parser parser(lim);
  std::string out;
  try {
    s.set_nodelay(true);
    bool open = true;
    while (open) {
      auto room = parser.prepare(16384);
      std::size_t n = co_await s.read_some(room);
      if (n == 0) break;
      parser.commit(n);
      for (;;) {
        auto st = parser.next();
        if (st == resp::parse_status::need_more) break;
        if (st == resp::parse_status::error) {
          out += parser.error();
          open = false;
          break;
        }
        if (!co_await execute(*srv, me, parser.args(), out)) {
          open = false;
          break;
        }
        if (out.size() >= 65536) {  // a long pipeline: answer as we go, so `out` stays bounded
          co_await s.write_all(out);
          out.clear();
        }
      }
      if (!out.empty()) {
        co_await s.write_all(out);
        out.clear();
      }
    }
  } catch (const std::exception&) {
    // The peer went away (or memory ran out for its request): nothing more to tell it.
  }
}

task<void> accept_loop(const tcp_listener* listener, server* srv, std::size_t me) {
  auto connections = listener->accept_all();
  for (;;) {
    tcp_stream s;
    bool failed = false;
    try {
      s = co_await connections.next();
    } catch (const std::system_error& e) {
      // Out of fds and the like: say so and go on; the connection waits in the backlog meanwhile.
      std::fprintf(stderr, "uring-kv: %s\n", e.what());
      failed = true;
    }
    if (failed) {
      co_await uring::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    uring::spawn(serve_connection(std::move(s), srv, me));
  }
}

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);

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

  server srv;
  srv.port = where.port();
  for (int i = 0; i < c.threads; ++i) srv.shards.push_back(std::make_unique<kv::shard>());
  int status = 0;
  try {
    uring::executor_options opts;
    opts.backend = c.backend;
    // A group, not independent executors: a forwarded command's coroutine visits other executors, and a
    // group stops them together (no frame freed while another ring still holds one of its operations).
    uring::executor_group group(static_cast<std::size_t>(c.threads), opts);
    srv.group = &group;
    srv.backend = to_string(group.at(0).plan().backend);
    for (std::size_t i = 0; i < group.size(); ++i) uring::spawn(group.at(i), accept_loop(&listeners[i], &srv, i));
    std::printf("uring-kv: listening on %s (%d threads, %s backend)\n", where.to_string().c_str(), c.threads,
                srv.backend.c_str());
    std::fflush(stdout);

    int signo = samples::wait_for_termination(signal_fd);
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
