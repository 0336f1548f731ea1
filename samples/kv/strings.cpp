// samples/kv/strings.cpp — uring-kv's string commands, run on the key's shard, with Redis 7.0's replies.
#include <uring/resp/parser.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "shard.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;
constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();

void invalid_expire(std::string_view name, std::string& out) {
  resp::append_error(out, "ERR invalid expire time in '" + lower(name) + "' command");
}

// SET's and GETEX's options, as Redis's parseExtendedStringArgumentsOrReply reads them.
enum flag : unsigned {
  nx = 1,
  xx = 2,
  get = 4,
  keepttl = 8,
  persist = 16,
  ex = 32,
  px = 64,
  exat = 128,
  pxat = 256,
  any_expiry = ex | px | exat | pxat,
};

struct options {
  unsigned flags = 0;
  std::string_view expire;  // the number after EX/PX/EXAT/PXAT
};

// Reads args[from...]; false (a syntax error replied) on an unknown or conflicting option.
bool parse_options(args_t args, std::size_t from, bool is_set, options& o, std::string& out) {
  for (std::size_t i = from; i < args.size(); ++i) {
    std::string_view a = args[i];
    bool has_next = i + 1 < args.size();
    unsigned f = o.flags;
    if (iequals(a, "NX") && !(f & xx) && is_set) {
      o.flags |= nx;
    } else if (iequals(a, "XX") && !(f & nx) && is_set) {
      o.flags |= xx;
    } else if (iequals(a, "GET") && is_set) {
      o.flags |= get;
    } else if (iequals(a, "KEEPTTL") && !(f & (persist | any_expiry)) && is_set) {
      o.flags |= keepttl;
    } else if (iequals(a, "PERSIST") && !is_set && !(f & (keepttl | any_expiry))) {
      o.flags |= persist;
    } else {
      unsigned which = 0;
      for (auto [name, bit] : {std::pair{"EX", ex}, {"PX", px}, {"EXAT", exat}, {"PXAT", pxat}}) {
        if (iequals(a, name)) which = bit;
      }
      if (which == 0 || !has_next || (f & (keepttl | persist | (any_expiry & ~which)))) {
        resp::append_error(out, syntax_error);
        return false;
      }
      o.flags |= which;
      o.expire = args[++i];
    }
  }
  return true;
}

// The absolute deadline of o.expire, as Redis's getExpireMillisecondsOrReply computes it.
std::optional<std::int64_t> deadline(const options& o, std::string_view name, std::string& out) {
  auto n = parse_int(o.expire);
  if (!n) {
    resp::append_error(out, not_integer);
    return std::nullopt;
  }
  bool seconds = (o.flags & (ex | exat)) != 0;
  if (*n <= 0 || (seconds && *n > int64_max / 1000)) {
    invalid_expire(name, out);
    return std::nullopt;
  }
  std::int64_t ms = seconds ? *n * 1000 : *n;
  if ((o.flags & (ex | px)) && __builtin_add_overflow(ms, clock_ms(), &ms)) ms = -1;
  if (ms <= 0) {
    invalid_expire(name, out);
    return std::nullopt;
  }
  return ms;
}

// SET's body once its options are read: `expires` is the deadline (0: none), abort/ok the replies when
// NX/XX stops it or it stores (null abort: the null bulk string).
void set_value(keyspace& ks, std::string_view key, std::string_view value, unsigned flags,
               std::int64_t expires, shard_reply& out, std::string_view ok = "+OK\r\n",
               std::string_view abort = {}) {
  entry* e = (flags & get) != 0 ? ks.find_read(key) : ks.find(key);  // GET's read counts
  if (flags & get) out.bulk(e != nullptr ? e->value : nullptr);
  if (((flags & nx) && e != nullptr) || ((flags & xx) && e == nullptr)) {
    if (!(flags & get)) {
      if (abort.empty()) {
        out.null();
      } else {
        out.text += abort;
      }
    }
    return;
  }
  std::int64_t keep = e != nullptr && (flags & keepttl) ? e->expires_ms : 0;
  if (e == nullptr) e = &ks.upsert(key);  // one lookup when the key exists
  keyspace::store(*e, value, out.input);
  ks.set_expiry(key, *e, expires != 0 ? expires : keep);
  if (!(flags & get)) out.text += ok;
}

value_ptr get_value(keyspace& ks, std::string_view key) {
  entry* e = ks.find_read(key);
  return e != nullptr ? e->value : nullptr;
}

void incr_by(keyspace& ks, std::string_view key, std::int64_t by, shard_reply& out) {
  entry* e = ks.find(key);
  std::int64_t v = 0;
  if (e != nullptr) {
    auto n = parse_int(*e->value);
    if (!n) return resp::append_error(out.text, not_integer);
    v = *n;
  }
  if (__builtin_add_overflow(v, by, &v))
    return resp::append_error(out.text, "ERR increment or decrement would overflow");
  if (e == nullptr) e = &ks.upsert(key);  // a new key has no expiry; an existing one keeps its own
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, v).ptr;
  keyspace::store(*e, std::string_view(digits, static_cast<std::size_t>(end - digits)));
  ks.touch(key);
  resp::append_integer(out.text, v);
}

// A whole-string long double as Redis's string2ld reads one (strtold, no leading space, not NaN).
std::optional<long double> parse_float(std::string_view s) {
  char buf[5 * 1024];
  if (s.empty() || s.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  char* end = nullptr;
  errno = 0;
  long double v = std::strtold(buf, &end);
  if (std::isspace(static_cast<unsigned char>(buf[0])) || *end != '\0' || end != buf + s.size() ||
      (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) || errno == EINVAL ||
      std::isnan(v)) {
    return std::nullopt;
  }
  return v;
}

// Redis's human-friendly long double: 17 decimals, trailing zeros and a bare point dropped.
std::string format_float(long double v) {
  char buf[5 * 1024];
  int n = std::snprintf(buf, sizeof buf, "%.17Lf", v);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return "0";
  std::string s(buf, static_cast<std::size_t>(n));
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

void cmd_get(keyspace& ks, args_t args, shard_reply& out) { out.bulk(get_value(ks, args[1])); }

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT unix-s|PXAT unix-ms|KEEPTTL]
void cmd_set(keyspace& ks, args_t args, shard_reply& out) {
  options o;
  if (!parse_options(args, 3, true, o, out.text)) return;
  std::int64_t expires = 0;
  if (o.flags & any_expiry) {
    auto d = deadline(o, args[0], out.text);
    if (!d) return;
    expires = *d;
  }
  set_value(ks, args[1], args[2], o.flags, expires, out);
}

void cmd_setnx(keyspace& ks, args_t args, shard_reply& out) {
  set_value(ks, args[1], args[2], nx, 0, out, ":1\r\n", ":0\r\n");
}

// SETEX key seconds value / PSETEX key milliseconds value
void cmd_setex(keyspace& ks, args_t args, shard_reply& out) {
  if (auto d = deadline({ex, args[2]}, args[0], out.text)) set_value(ks, args[1], args[3], 0, *d, out);
}
void cmd_psetex(keyspace& ks, args_t args, shard_reply& out) {
  if (auto d = deadline({px, args[2]}, args[0], out.text)) set_value(ks, args[1], args[3], 0, *d, out);
}

// GETEX key [EX s|PX ms|EXAT unix-s|PXAT unix-ms|PERSIST]
void cmd_getex(keyspace& ks, args_t args, shard_reply& out) {
  options o;
  if (!parse_options(args, 2, false, o, out.text)) return;
  std::int64_t now = clock_ms();
  entry* e = ks.find_read(args[1], now);
  if (e == nullptr) return out.bulk(nullptr);
  std::int64_t expires = 0;
  if (o.flags & any_expiry) {
    auto d = deadline(o, args[0], out.text);
    if (!d) return;
    expires = *d;
  }
  out.bulk(e->value);
  if ((o.flags & (exat | pxat)) && expires <= now) {
    ks.erase(args[1], now);
  } else if (expires != 0) {
    ks.set_expiry(args[1], *e, expires);
  } else if ((o.flags & persist) && e->expires_ms != 0) {
    ks.set_expiry(args[1], *e, 0);
  }
}

void cmd_getdel(keyspace& ks, args_t args, shard_reply& out) {
  value_ptr v = get_value(ks, args[1]);
  if (v) ks.erase(args[1]);
  out.bulk(std::move(v));
}

void cmd_getset(keyspace& ks, args_t args, shard_reply& out) {
  out.bulk(get_value(ks, args[1]));
  ks.put(args[1], args[2], out.input, 0);
}

void cmd_strlen(keyspace& ks, args_t args, shard_reply& out) {
  value_ptr v = get_value(ks, args[1]);
  resp::append_integer(out.text, v ? static_cast<std::int64_t>(v->size()) : 0);
}

// APPEND and SETRANGE change the value in place unless a reply still holds it (then they change a copy):
// appending is amortised O(appended bytes), as in Redis.
void cmd_append(keyspace& ks, args_t args, shard_reply& out) {
  entry* e = ks.find(args[1]);
  if (e == nullptr) {
    ks.put(args[1], args[2], out.input, 0);
    return resp::append_integer(out.text, static_cast<std::int64_t>(args[2].size()));
  }
  if (static_cast<std::int64_t>(e->value->size() + args[2].size()) > max_string) {
    return resp::append_error(out.text, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  }
  std::string& v = keyspace::own(*e);
  v.append(args[2]);
  ks.touch(args[1]);
  resp::append_integer(out.text, static_cast<std::int64_t>(v.size()));
}

// SETRANGE key offset value
void cmd_setrange(keyspace& ks, args_t args, shard_reply& out) {
  auto offset = parse_int(args[2]);
  if (!offset) return resp::append_error(out.text, not_integer);
  if (*offset < 0) return resp::append_error(out.text, "ERR offset is out of range");
  std::string_view value = args[3];
  entry* e = ks.find(args[1]);
  std::int64_t size = e != nullptr ? static_cast<std::int64_t>(e->value->size()) : 0;
  if (value.empty()) return resp::append_integer(out.text, size);
  if (*offset > max_string - static_cast<std::int64_t>(value.size())) {
    return resp::append_error(out.text, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  }
  if (e == nullptr) e = &ks.upsert(args[1]);  // a new key's value starts empty
  if (!e->value) e->value = make_value("");
  std::string& v = keyspace::own(*e);
  auto at = static_cast<std::size_t>(*offset);
  if (v.size() < at + value.size()) v.resize(at + value.size(), '\0');
  v.replace(at, value.size(), value);
  ks.touch(args[1]);
  resp::append_integer(out.text, static_cast<std::int64_t>(v.size()));
}

// GETRANGE key start end: inclusive, negative indices from the end, as Redis clamps them.
void cmd_getrange(keyspace& ks, args_t args, shard_reply& out) {
  auto start = parse_int(args[2]);
  auto end = start ? parse_int(args[3]) : std::nullopt;
  if (!start || !end) return resp::append_error(out.text, not_integer);
  value_ptr v = get_value(ks, args[1]);
  std::int64_t len = v ? static_cast<std::int64_t>(v->size()) : 0;
  std::int64_t s = *start, e = *end;
  if (s < 0 && e < 0 && s > e) return resp::append_bulk_string(out.text, "");
  if (s < 0) s += len;
  if (e < 0) e += len;
  s = std::max<std::int64_t>(s, 0);
  e = std::max<std::int64_t>(e, 0);
  if (e >= len) e = len - 1;
  if (s > e || len == 0) return resp::append_bulk_string(out.text, "");
  resp::append_bulk_string(out.text, std::string_view(*v).substr(static_cast<std::size_t>(s),
                                                                 static_cast<std::size_t>(e - s + 1)));
}

void cmd_incr(keyspace& ks, args_t args, shard_reply& out) { incr_by(ks, args[1], 1, out); }
void cmd_decr(keyspace& ks, args_t args, shard_reply& out) { incr_by(ks, args[1], -1, out); }

void cmd_incrby(keyspace& ks, args_t args, shard_reply& out) {
  auto by = parse_int(args[2]);
  if (!by) return resp::append_error(out.text, not_integer);
  incr_by(ks, args[1], *by, out);
}

void cmd_decrby(keyspace& ks, args_t args, shard_reply& out) {
  auto by = parse_int(args[2]);
  if (!by) return resp::append_error(out.text, not_integer);
  if (*by == std::numeric_limits<std::int64_t>::min())
    return resp::append_error(out.text, "ERR decrement would overflow");
  incr_by(ks, args[1], -*by, out);
}

void cmd_incrbyfloat(keyspace& ks, args_t args, shard_reply& out) {
  entry* e = ks.find(args[1]);
  std::optional<long double> v = e != nullptr ? parse_float(*e->value) : 0.0L;
  std::optional<long double> by = v ? parse_float(args[2]) : std::nullopt;
  if (!v || !by) return resp::append_error(out.text, "ERR value is not a valid float");
  long double sum = *v + *by;
  if (std::isnan(sum) || std::isinf(sum))
    return resp::append_error(out.text, "ERR increment would produce NaN or Infinity");
  std::string s = format_float(sum);
  if (e == nullptr) e = &ks.upsert(args[1]);
  keyspace::store(*e, s);
  ks.touch(args[1]);
  resp::append_bulk_string(out.text, s);
}

}  // namespace kv
