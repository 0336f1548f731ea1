// samples/kv/keyspace.cpp — uring-kv's commands over a whole database, visiting every shard in turn: KEYS,
// SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL.
#include <uring/resp/parser.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <random>

#include "commands.hpp"

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

// Redis's glob (stringmatchlen): * ? [abc] [^a] [a-z] and \ escapes; bytes past the end read as NUL, as
// they do in Redis's C strings.
bool glob(std::string_view p, std::string_view s, bool& give_up) {
  auto at = [&p](std::size_t i) { return i < p.size() ? static_cast<signed char>(p[i]) : '\0'; };
  std::size_t pi = 0, si = 0;
  while (pi < p.size() && si < s.size()) {
    auto ch = static_cast<signed char>(s[si]);
    switch (at(pi)) {
      case '*':
        while (pi + 1 < p.size() && p[pi + 1] == '*') ++pi;
        if (pi + 1 == p.size()) return true;
        for (; si < s.size(); ++si) {
          if (glob(p.substr(pi + 1), s.substr(si), give_up)) return true;
          if (give_up) return false;
        }
        give_up = true;  // the rest cannot match a shorter string either
        return false;
      case '?':
        ++si;
        break;
      case '[': {
        ++pi;
        bool negate = at(pi) == '^';
        if (negate) ++pi;
        bool match = false;
        for (;;) {
          if (at(pi) == '\\' && p.size() - pi >= 2) {
            ++pi;
            match |= at(pi) == ch;
          } else if (at(pi) == ']') {
            break;
          } else if (pi >= p.size()) {
            --pi;
            break;
          } else if (p.size() - pi >= 3 && at(pi + 1) == '-') {
            int lo = at(pi), hi = at(pi + 2);
            if (lo > hi) std::swap(lo, hi);
            pi += 2;
            match |= ch >= lo && ch <= hi;
          } else {
            match |= at(pi) == ch;
          }
          ++pi;
        }
        if (negate) match = !match;
        if (!match) return false;
        ++si;
        break;
      }
      case '\\':
        if (p.size() - pi >= 2) ++pi;
        [[fallthrough]];
      default:
        if (at(pi) != ch) return false;
        ++si;
        break;
    }
    ++pi;
    if (si == s.size()) {
      while (pi < p.size() && p[pi] == '*') ++pi;
      break;
    }
  }
  return pi >= p.size() && si == s.size();
}

// The order SCAN walks a shard's keys in: 48 bits of a hash the map's rehashing does not change, so a
// cursor stays meaningful while keys come and go. The cursor's bits above them are the shard's index.
constexpr int hash_bits = 48;
std::uint64_t scan_hash(std::string_view key) noexcept {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (unsigned char ch : key) h = (h ^ ch) * 0x100000001b3ull;
  h ^= h >> 29;
  return (h * 0xbf58476d1ce4e5b9ull) >> (64 - hash_bits);
}

// Runs fn(shard&, i) on every shard in turn.
template <class F>
task<void> every_shard(context& c, F fn) {
  for (std::size_t i = 0; i < c.srv.count(); ++i) {
    co_await on_shard(c.srv, c.me, i, [&c, &fn, i] { fn(*c.srv.shards[i], i); });
  }
}

task<void> flush(context& c, bool all) {
  if (c.args.size() > 2 ||
      (c.args.size() == 2 && !iequals(c.args[1], "ASYNC") && !iequals(c.args[1], "SYNC")))
    co_return resp::append_error(c.out.text(), syntax_error);
  co_await every_shard(c, [all, db = c.ses.db](shard& s, std::size_t) {
    for (int i = 0; i < databases; ++i) {
      if (all || i == db) s.db[i].clear();
    }
  });
  resp::append_simple_string(c.out.text(), "OK");
}

}  // namespace

bool matches(std::string_view pattern, std::string_view key) {
  bool give_up = false;
  return pattern == "*" || glob(pattern, key, give_up);
}

task<void> cmd_flushall(context& c) { co_await flush(c, true); }
task<void> cmd_flushdb(context& c) { co_await flush(c, false); }

// SWAPDB index1 index2: on every shard in turn (a client between two visits sees some shards swapped).
task<void> cmd_swapdb(context& c) {
  std::string& out = c.out.text();
  std::array<std::int64_t, 2> id{};
  for (std::size_t i = 0; i < 2; ++i) {
    auto n = parse_int(c.args[i + 1]);
    if (!n || *n < INT32_MIN || *n > INT32_MAX)
      co_return resp::append_error(out,
                                   i == 0 ? "ERR invalid first DB index" : "ERR invalid second DB index");
    id[i] = *n;
  }
  if (id[0] < 0 || id[0] >= databases || id[1] < 0 || id[1] >= databases)
    co_return resp::append_error(out, "ERR DB index is out of range");
  co_await every_shard(c, [&id](shard& s, std::size_t) { swap_databases(s.db[id[0]], s.db[id[1]]); });
  resp::append_simple_string(out, "OK");
}

task<void> cmd_dbsize(context& c) {
  std::int64_t total = 0;
  co_await every_shard(c, [&total, db = c.ses.db](shard& s, std::size_t) {
    total += static_cast<std::int64_t>(s.db[db].stored());
  });
  resp::append_integer(c.out.text(), total);
}

// KEYS pattern: every matching key, gathered from each shard, then written as the reply forms.
task<void> cmd_keys(context& c) {
  std::vector<std::string> keys;
  std::string_view pattern = c.args[1];
  co_await every_shard(c, [&keys, pattern, db = c.ses.db](shard& s, std::size_t) {
    std::int64_t now = clock_ms();
    for (const auto& [k, e] : s.db[db].entries()) {
      if (!keyspace::expired(e, now) && matches(pattern, k)) keys.push_back(k);
    }
  });
  resp::append_array_header(c.out.text(), keys.size());
  for (const std::string& k : keys) {
    resp::append_bulk_string(c.out.text(), k);
    if (c.out.must_flush()) co_await c.out.flush();
  }
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]. The cursor is (shard << 48) | the scan_hash the
// walk goes on from; each call returns about COUNT keys (more when hashes tie) in hash order, so every
// key present for the whole walk is returned, once. Costs O(keys of the shards it visits) per call.
task<void> cmd_scan(context& c) {
  std::string& out = c.out.text();
  // Read as Redis reads it (strtoul: a sign and leading zeros pass, a blank or trailing byte does not).
  std::string a(c.args[1]);
  char* end = nullptr;
  errno = 0;
  std::uint64_t cursor = std::strtoull(a.c_str(), &end, 10);
  if (a.find('\0') != std::string::npos || std::isspace(static_cast<unsigned char>(a[0])) || *end != '\0' ||
      errno == ERANGE) {
    co_return resp::append_error(out, "ERR invalid cursor");
  }
  std::string_view pattern = "*";
  bool no_type_match = false;
  std::int64_t count = 10;
  for (std::size_t i = 2; i < c.args.size(); i += 2) {
    if (i + 1 >= c.args.size()) co_return resp::append_error(out, syntax_error);
    if (iequals(c.args[i], "COUNT")) {
      auto n = parse_int(c.args[i + 1]);
      if (!n) co_return resp::append_error(out, not_integer);
      if (*n < 1) co_return resp::append_error(out, syntax_error);
      count = *n;
    } else if (iequals(c.args[i], "MATCH")) {
      pattern = c.args[i + 1];
    } else if (iequals(c.args[i], "TYPE")) {
      no_type_match = !iequals(c.args[i + 1], "STRING");
    } else {
      co_return resp::append_error(out, syntax_error);
    }
  }
  std::vector<std::string> keys;
  std::size_t shard_index = cursor >> hash_bits;
  std::uint64_t from = cursor & ((1ull << hash_bits) - 1);
  std::uint64_t next = 0;
  std::size_t visited = 0;  // keys walked over, matching or not: COUNT bounds these
  for (std::size_t i = shard_index; i < c.srv.count(); ++i, from = 0) {
    std::size_t want = static_cast<std::size_t>(count) - visited;
    bool more = false;
    std::uint64_t last = 0;
    co_await on_shard(c.srv, c.me, i, [&, i, db = c.ses.db] {
      std::int64_t now = clock_ms();
      std::vector<std::uint64_t> hashes;
      for (const auto& [k, e] : c.srv.shards[i]->db[db].entries()) {
        if (std::uint64_t h = scan_hash(k); h >= from && !keyspace::expired(e, now)) hashes.push_back(h);
      }
      if (hashes.empty()) return;
      more = hashes.size() > want;
      visited += std::min(want, hashes.size());
      std::size_t nth = std::min(want, hashes.size()) - 1;
      std::nth_element(hashes.begin(), hashes.begin() + static_cast<std::ptrdiff_t>(nth), hashes.end());
      last = hashes[nth];
      for (const auto& [k, e] : c.srv.shards[i]->db[db].entries()) {
        std::uint64_t h = scan_hash(k);
        if (h >= from && h <= last && !keyspace::expired(e, now) && !no_type_match && matches(pattern, k))
          keys.push_back(k);
      }
    });
    if (more) {
      next = (static_cast<std::uint64_t>(i) << hash_bits) + last + 1;
      break;
    }
    if (visited >= static_cast<std::size_t>(count)) {
      if (i + 1 < c.srv.count()) next = static_cast<std::uint64_t>(i + 1) << hash_bits;
      break;
    }
  }
  resp::append_array_header(out, 2);
  resp::append_bulk_string(out, std::to_string(next));
  resp::append_array_header(out, keys.size());
  for (const std::string& k : keys) {
    resp::append_bulk_string(out, k);
    if (c.out.must_flush()) co_await c.out.flush();
  }
}

// RANDOMKEY: a live key of a random non-empty shard, the first after skipping up to 63 from the start of
// its map (cheap rather than uniform); at most 1024 entries looked at per shard.
task<void> cmd_randomkey(context& c) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::size_t n = c.srv.count();
  std::size_t start = rng() % n;
  std::string key;
  bool found = false;
  for (std::size_t step = 0; step < n && !found; ++step) {
    std::size_t i = (start + step) % n;
    std::size_t skip = rng() % 64;
    co_await on_shard(c.srv, c.me, i, [&, i, db = c.ses.db] {
      std::int64_t now = clock_ms();
      std::size_t budget = 1024;
      for (const auto& [k, e] : c.srv.shards[i]->db[db].entries()) {
        if (budget-- == 0) break;
        if (keyspace::expired(e, now)) continue;
        key = k;
        found = true;
        if (skip-- == 0) break;
      }
    });
  }
  if (found) {
    resp::append_bulk_string(c.out.text(), key);
  } else {
    c.out.null();
  }
}

}  // namespace kv
