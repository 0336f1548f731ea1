// samples/kv/keys.cpp — uring-kv's expiry and key commands on one key, run on its shard, with Redis 7.0's
// replies.
#include <uring/resp/parser.hpp>

#include <limits>

#include "shard.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;
constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();
constexpr auto int64_min = std::numeric_limits<std::int64_t>::min();

// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX|XX|GT|LT], as Redis's expireGenericCommand: `base`
// is added to the time (now, or 0 for the absolute forms), `unit` converts it to milliseconds.
void expire(keyspace& ks, args_t args, std::int64_t base, std::int64_t unit, shard_reply& out) {
  bool nx = false, xx = false, gt = false, lt = false;
  for (std::size_t i = 3; i < args.size(); ++i) {
    if (iequals(args[i], "NX")) {
      nx = true;
    } else if (iequals(args[i], "XX")) {
      xx = true;
    } else if (iequals(args[i], "GT")) {
      gt = true;
    } else if (iequals(args[i], "LT")) {
      lt = true;
    } else {
      return resp::append_error(out.text, "ERR Unsupported option " + std::string(args[i]));
    }
  }
  if (nx && (xx || gt || lt)) {
    return resp::append_error(out.text,
                              "ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if (gt && lt)
    return resp::append_error(out.text, "ERR GT and LT options at the same time are not compatible");
  auto n = parse_int(args[2]);
  if (!n) return resp::append_error(out.text, not_integer);
  std::int64_t when = *n;
  if ((unit != 1 && (when > int64_max / unit || when < int64_min / unit)) ||
      (when *= unit, when > int64_max - base)) {
    return resp::append_error(out.text, "ERR invalid expire time in '" + lower(args[0]) + "' command");
  }
  when += base;
  std::int64_t now = clock_ms();
  entry* e = ks.find(args[1], now);
  if (e == nullptr) return resp::append_integer(out.text, 0);
  std::int64_t current = e->expires_ms != 0 ? e->expires_ms : -1;
  if ((nx && current != -1) || (xx && current == -1) || (gt && (when <= current || current == -1)) ||
      (lt && current != -1 && when >= current)) {
    return resp::append_integer(out.text, 0);
  }
  if (when <= now) {
    ks.erase(args[1], now);
  } else {
    ks.set_expiry(args[1], *e, when);
  }
  resp::append_integer(out.text, 1);
}

// TTL / PTTL / EXPIRETIME / PEXPIRETIME: -2 for a missing key, -1 without expiry; seconds are rounded.
void ttl(keyspace& ks, args_t args, bool ms, bool absolute, shard_reply& out) {
  std::int64_t now = clock_ms();
  entry* e = ks.find_read(args[1], now);
  if (e == nullptr) return resp::append_integer(out.text, -2);
  if (e->expires_ms == 0) return resp::append_integer(out.text, -1);
  std::int64_t t = absolute ? e->expires_ms : std::max<std::int64_t>(e->expires_ms - now, 0);
  resp::append_integer(out.text, ms ? t : (t + 500) / 1000);
}

}  // namespace

void cmd_expire(keyspace& ks, args_t args, shard_reply& out) { expire(ks, args, clock_ms(), 1000, out); }
void cmd_pexpire(keyspace& ks, args_t args, shard_reply& out) { expire(ks, args, clock_ms(), 1, out); }
void cmd_expireat(keyspace& ks, args_t args, shard_reply& out) { expire(ks, args, 0, 1000, out); }
void cmd_pexpireat(keyspace& ks, args_t args, shard_reply& out) { expire(ks, args, 0, 1, out); }

void cmd_ttl(keyspace& ks, args_t args, shard_reply& out) { ttl(ks, args, false, false, out); }
void cmd_pttl(keyspace& ks, args_t args, shard_reply& out) { ttl(ks, args, true, false, out); }
void cmd_expiretime(keyspace& ks, args_t args, shard_reply& out) { ttl(ks, args, false, true, out); }
void cmd_pexpiretime(keyspace& ks, args_t args, shard_reply& out) { ttl(ks, args, true, true, out); }

void cmd_persist(keyspace& ks, args_t args, shard_reply& out) {
  entry* e = ks.find(args[1]);
  bool had = e != nullptr && e->expires_ms != 0;
  if (had) ks.set_expiry(args[1], *e, 0);
  resp::append_integer(out.text, had ? 1 : 0);
}

void cmd_type(keyspace& ks, args_t args, shard_reply& out) {
  resp::append_simple_string(out.text, ks.find_read(args[1]) != nullptr ? "string" : "none");
}

}  // namespace kv
