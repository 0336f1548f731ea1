// samples/kv/shard.cpp — the single-key commands of uring-kv, run on the shard that owns the key.
#include "shard.hpp"

#include <uring/resp/parser.hpp>

#include <limits>

namespace kv {

namespace {

constexpr std::string_view not_integer = "ERR value is not an integer or out of range";

}  // namespace

value_ptr get(shard& s, std::string_view key) {
  entry* e = s.find(key, clock_ms());
  return e != nullptr ? e->value : nullptr;
}

// SET key value [NX|XX] [EX seconds|PX milliseconds|KEEPTTL]
void run_set(shard& s, std::span<const std::string_view> args, std::string& out) {
  bool nx = false, xx = false, keep_ttl = false;
  std::int64_t ttl_ms = 0;
  for (std::size_t i = 3; i < args.size(); ++i) {
    std::string_view o = args[i];
    if (iequals(o, "NX") && !xx) {
      nx = true;
    } else if (iequals(o, "XX") && !nx) {
      xx = true;
    } else if (iequals(o, "KEEPTTL") && ttl_ms == 0) {
      keep_ttl = true;
    } else if ((iequals(o, "EX") || iequals(o, "PX")) && ttl_ms == 0 && !keep_ttl && i + 1 < args.size()) {
      auto n = parse_int(args[++i]);
      if (!n) return uring::resp::append_error(out, not_integer);
      std::int64_t unit = iequals(o, "EX") ? 1000 : 1;
      if (*n <= 0 || *n > std::numeric_limits<std::int64_t>::max() / unit / 2) {
        return uring::resp::append_error(out, "ERR invalid expire time in 'set' command");
      }
      ttl_ms = *n * unit;
    } else {
      return uring::resp::append_error(out, "ERR syntax error");
    }
  }
  std::int64_t now = clock_ms();
  entry* e = s.find(args[1], now);
  if ((nx && e != nullptr) || (xx && e == nullptr)) return uring::resp::append_null_bulk(out);
  if (e == nullptr) e = &s.upsert(args[1]);
  e->value = make_value(args[2]);
  if (!keep_ttl) e->expires_ms = ttl_ms != 0 ? now + ttl_ms : 0;
  uring::resp::append_simple_string(out, "OK");
}

void run_incrby(shard& s, std::string_view key, std::int64_t by, std::string& out) {
  entry* e = s.find(key, clock_ms());
  std::int64_t v = 0;
  if (e != nullptr) {
    auto n = parse_int(*e->value);
    if (!n) return uring::resp::append_error(out, not_integer);
    v = *n;
  }
  if (__builtin_add_overflow(v, by, &v))
    return uring::resp::append_error(out, "ERR increment or decrement would overflow");
  if (e == nullptr) e = &s.upsert(key);  // a new key has no expiry; an existing one keeps its own
  e->value = make_value(std::to_string(v));
  uring::resp::append_integer(out, v);
}

// EXPIRE key seconds / PEXPIRE key milliseconds: 1 if the key exists (a deadline not in the future
// deletes it, as in Redis), 0 if not.
void run_expire(shard& s, std::span<const std::string_view> args, std::int64_t unit_ms, std::string& out) {
  auto n = parse_int(args[2]);
  if (!n) return uring::resp::append_error(out, not_integer);
  if (*n > std::numeric_limits<std::int64_t>::max() / unit_ms / 2 ||
      *n < std::numeric_limits<std::int64_t>::min() / unit_ms / 2) {
    return uring::resp::append_error(out, "ERR invalid expire time in 'expire' command");
  }
  std::int64_t now = clock_ms();
  entry* e = s.find(args[1], now);
  if (e == nullptr) return uring::resp::append_integer(out, 0);
  if (*n <= 0) {
    s.erase(args[1], now);
  } else {
    e->expires_ms = now + *n * unit_ms;
  }
  uring::resp::append_integer(out, 1);
}

// TTL / PTTL: the time left in seconds (rounded, as Redis does) or milliseconds; -1 without expiry, -2
// for a missing key.
void run_ttl(shard& s, std::span<const std::string_view> args, std::int64_t unit_ms, std::string& out) {
  std::int64_t now = clock_ms();
  entry* e = s.find(args[1], now);
  if (e == nullptr) return uring::resp::append_integer(out, -2);
  if (e->expires_ms == 0) return uring::resp::append_integer(out, -1);
  std::int64_t left = e->expires_ms - now;
  uring::resp::append_integer(out, (left + unit_ms / 2) / unit_ms);
}

}  // namespace kv
