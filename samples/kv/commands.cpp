// samples/kv/commands.cpp — uring-kv's command table and the commands that visit several shards or none.
#include "commands.hpp"

#include <array>
#include <limits>
#include <optional>
#include <vector>

#include <uring/resp/parser.hpp>

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

// Called on executor `me` for each command that names keys; `elsewhere`: some key lives on another shard.
void count_keyed(server& srv, std::size_t me, bool elsewhere) noexcept {
  kv::shard& s = *srv.shards[me];
  ++s.keyed_commands;
  if (elsewhere) ++s.forwarded_commands;
}

// How a command reaches the data it needs.
enum class route : std::uint8_t {
  local,        // no key: answered by the connection's own executor
  single_key,   // args[1] is the key: runs on its shard
  multi_key,    // every argument from args[1] on (every other one for MSET) is a key
  every_shard,  // visits all shards
};

// Tables read best packed.
// clang-format off
enum class cmd : std::uint8_t {
  ping, echo, quit, select, command, config, client,
  get, set, incr, decr, incrby, decrby, expire, pexpire, ttl, pttl,
  del, exists, mget, mset,
  dbsize, flushall, info,
};
// clang-format on

struct spec {
  std::string_view name;  // upper case
  cmd id;
  route how;
  int min_args;  // counting the name
  int max_args;  // -1: any number
};

// clang-format off
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
// clang-format on

// The command's name upper-cased into `buf` (names longer than any command are left as they are).
std::string_view upper(std::string_view s, std::array<char, 16>& buf) noexcept {
  if (s.size() > buf.size()) return s;
  for (std::size_t i = 0; i < s.size(); ++i)
    buf[i] = s[i] >= 'a' && s[i] <= 'z' ? static_cast<char>(s[i] - 32) : s[i];
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
    case cmd::set:
      return kv::run_set(s, args, out);
    case cmd::incr:
      return kv::run_incrby(s, args[1], 1, out);
    case cmd::decr:
      return kv::run_incrby(s, args[1], -1, out);
    case cmd::incrby:
    case cmd::decrby: {
      auto by = kv::parse_int(args[2]);
      if (!by || (sp.id == cmd::decrby && *by == std::numeric_limits<std::int64_t>::min())) {
        return resp::append_error(out, "ERR value is not an integer or out of range");
      }
      return kv::run_incrby(s, args[1], sp.id == cmd::decrby ? -*by : *by, out);
    }
    case cmd::expire:
      return kv::run_expire(s, args, 1000, out);
    case cmd::pexpire:
      return kv::run_expire(s, args, 1, out);
    case cmd::ttl:
      return kv::run_ttl(s, args, 1000, out);
    case cmd::pttl:
      return kv::run_ttl(s, args, 1, out);
    default:
      return resp::append_error(out, "ERR internal: not a single-key command");
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
task<void> run_multi(server& srv, std::size_t me, const spec& sp, args_t args, reply& out) {
  std::size_t step = sp.id == cmd::mset ? 2 : 1;
  if ((args.size() - 1) % step != 0) {
    resp::append_error(out.text(), "ERR wrong number of arguments for '" + lower(sp.name) + "' command");
    co_return;
  }
  std::vector<std::vector<std::size_t>> by_shard(srv.count());  // argument indices of the keys
  for (std::size_t a = 1; a < args.size(); a += step)
    by_shard[kv::shard_of(args[a], srv.count())].push_back(a);
  bool elsewhere = false;
  for (std::size_t i = 0; i < by_shard.size(); ++i) elsewhere |= i != me && !by_shard[i].empty();
  count_keyed(srv, me, elsewhere);
  std::vector<value_ptr> values(sp.id == cmd::mget ? args.size() : 0);
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
            e.value = make_value(args[a + 1]);
            e.expires_ms = 0;
            break;
          }
          case cmd::del:
            count += s.erase(args[a], now) ? 1 : 0;
            break;
          case cmd::exists:
            count += s.find(args[a], now) != nullptr ? 1 : 0;
            break;
          default:
            break;
        }
      }
    });
  }
  if (sp.id == cmd::mget) {
    // Streamed: written as it forms, each value sent from the store (shared, not copied) once its turn
    // comes, so a long reply never waits whole in memory.
    resp::append_array_header(out.text(), args.size() - 1);
    for (std::size_t a = 1; a < args.size(); ++a) {
      out.bulk(std::move(values[a]));
      co_await out.flush_if_full();
    }
  } else if (sp.id == cmd::mset) {
    resp::append_simple_string(out.text(), "OK");
  } else {
    resp::append_integer(out.text(), count);
  }
}

// DBSIZE / FLUSHALL / INFO: every shard in turn.
task<void> run_every(server& srv, std::size_t me, const spec& sp, args_t args, reply& out) {
  if (sp.id == cmd::flushall && args.size() == 2 && lookup(args[1]) == nullptr) {
    std::array<char, 16> buf;
    std::string_view mode = upper(args[1], buf);
    if (mode != "ASYNC" && mode != "SYNC") {
      resp::append_error(out.text(), "ERR syntax error");
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
    resp::append_simple_string(out.text(), "OK");
  } else if (sp.id == cmd::dbsize) {
    resp::append_integer(out.text(), static_cast<std::int64_t>(total));
  } else {
    // INFO: enough for clients that read redis_version, and the keys per shard (the tests read these).
    std::string info =
        "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nuring_kv_backend:" + srv.backend +
        "\r\ntcp_port:" + std::to_string(srv.port) + "\r\nuring_kv_shards:" + std::to_string(srv.count()) +
        "\r\n\r\n# Keyspace\r\n";
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
    info += "keyed_commands:" + std::to_string(keyed_total) +
            "\r\nforwarded_commands:" + std::to_string(forwarded) + "\r\n";
    resp::append_bulk_string(out.text(), info);
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
    case cmd::echo:
      resp::append_bulk_string(out, args[1]);
      break;
    case cmd::quit:
      resp::append_simple_string(out, "OK");
      return false;
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
    default:
      resp::append_error(out, "ERR internal: not a local command");
      break;
  }
  return true;
}

}  // namespace

task<bool> execute(server& srv, std::size_t me, args_t args, reply& out) {
  const spec* sp = lookup(args[0]);
  if (sp == nullptr) {
    std::string msg = "ERR unknown command '" + excerpt(args[0]) + "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && i < 4; ++i) msg += "'" + excerpt(args[i]) + "' ";
    resp::append_error(out.text(), msg);
    co_return true;
  }
  auto n = static_cast<int>(args.size());
  if (n < sp->min_args || (sp->max_args >= 0 && n > sp->max_args)) {
    resp::append_error(out.text(), "ERR wrong number of arguments for '" + lower(sp->name) + "' command");
    co_return true;
  }
  switch (sp->how) {
    case route::local:
      co_return run_local(*sp, args, out.text());
    case route::single_key: {
      std::size_t i = kv::shard_of(args[1], srv.count());
      count_keyed(srv, me, i != me);
      if (sp->id == cmd::get) {
        // The value itself comes back (shared), so a long one is sent from the store, not copied.
        value_ptr v;
        co_await on_shard(srv, me, i, [&srv, &v, args, i] { v = kv::get(*srv.shards[i], args[1]); });
        out.bulk(std::move(v));
        co_return true;
      }
      std::string& text = out.text();
      co_await on_shard(srv, me, i,
                        [&srv, sp, args, &text, i] { run_single(*sp, *srv.shards[i], args, text); });
      co_return true;
    }
    case route::multi_key:
      co_await run_multi(srv, me, *sp, args, out);
      co_return true;
    case route::every_shard:
      co_await run_every(srv, me, *sp, args, out);
      co_return true;
  }
  co_return true;
}

}  // namespace kv
