// samples/kv/multikey.cpp — uring-kv's commands naming several keys: each shard holding some of them is
// visited once, in shard order, and the reply assembled on the connection's executor. Across shards they
// are not atomic (another client may run between two visits), as documented in main.cpp.
#include <uring/resp/parser.hpp>

#include <optional>

#include "commands.hpp"

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

// Runs fn(keyspace&, a) for each key args[a] (a = first, first + step, ...) on the key's shard, in the
// client's database: one visit per shard, whose lookups start loading every key's place in the table first.
template <class F>
task<void> each_key(context& c, std::size_t first, std::size_t step, F fn) {
  server& srv = c.srv;
  std::vector<std::size_t> shard_at(c.args.size());  // each key argument's shard (one allocation)
  bool elsewhere = false;
  for (std::size_t a = first; a < c.args.size(); a += step) {
    shard_at[a] = kv::shard_of(c.args[a], srv.count());
    elsewhere |= shard_at[a] != c.me;
  }
  count_keyed(srv, c.me, elsewhere);
  for (std::size_t i = 0; i < srv.count(); ++i) {
    bool named = false;
    for (std::size_t a = first; a < c.args.size() && !named; a += step) named = shard_at[a] == i;
    if (!named) continue;
    // Runs on shard i's thread while this coroutine waits: what fn captured is handed over and back.
    co_await on_shard(srv, c.me, i, [&c, &srv, &shard_at, &fn, first, step, i, db = c.ses.db] {
      keyspace& ks = srv.shards[i]->db[db];
      for (std::size_t a = first; a < c.args.size(); a += step) {
        if (shard_at[a] == i) ks.prefetch(c.args[a]);
      }
      for (std::size_t a = first; a < c.args.size(); a += step) {
        if (shard_at[a] == i) fn(ks, a);
      }
    });
  }
}

bool pairs(context& c) {
  if (c.args.size() % 2 == 1) return true;
  resp::append_error(c.out.text(), "ERR wrong number of arguments for '" + lower(c.args[0]) + "' command");
  return false;
}

struct found {
  value_ptr value;
  std::int64_t expires_ms = 0;
};

// The live entry of `key` in database `db`, read on its shard; `counted`: a read of the value (COPY's, not
// RENAME's), counted in keyspace_hits or keyspace_misses as Redis counts it.
task<found> read_entry(context& c, std::string_view key, int db, bool counted) {
  found f;
  std::size_t i = shard_of(key, c.srv.count());
  co_await on_shard(c.srv, c.me, i, [&c, &f, key, i, db, counted] {
    keyspace& ks = c.srv.shards[i]->db[db];
    if (entry* e = counted ? ks.find_read(key) : ks.find(key)) {
      f = {e->value, e->expires_ms};
    }
  });
  co_return f;
}

// Stores `f` under `key` in database `db` unless `only_new` and the key exists; true if stored.
task<bool> write_entry(context& c, std::string_view key, int db, const found& f, bool only_new) {
  bool stored = false;
  std::size_t i = shard_of(key, c.srv.count());
  co_await on_shard(c.srv, c.me, i, [&c, &f, &stored, key, i, db, only_new] {
    keyspace& ks = c.srv.shards[i]->db[db];
    if (only_new && ks.find(key) != nullptr) return;
    ks.put(key, f.value, f.expires_ms);
    stored = true;
  });
  co_return stored;
}

// What copy_within did: whether the source existed, and whether it was stored under the new name.
struct copied {
  bool found = false;
  bool stored = false;
};

// RENAME and COPY when both names live on one shard: in one visit, so atomic as Redis's. Reads `from` in
// database `from_db` (`counted`: as a read of the value, COPY's), stores it under `to` in `to_db` unless
// `only_new` and that exists, and with `remove` deletes `from`.
task<copied> copy_within(context& c, std::size_t i, std::string_view from, int from_db, std::string_view to,
                         int to_db, bool only_new, bool remove, bool counted) {
  copied r;
  co_await on_shard(c.srv, c.me, i, [&, i] {
    keyspace& src = c.srv.shards[i]->db[from_db];
    keyspace& dst = c.srv.shards[i]->db[to_db];
    entry* e = counted ? src.find_read(from) : src.find(from);
    if (e == nullptr) return;
    r.found = true;
    if ((&src == &dst && from == to) || (only_new && dst.find(to) != nullptr)) return;  // nothing to move
    const found f{e->value, e->expires_ms};  // before put, which may move the entry
    dst.put(to, f.value, f.expires_ms);
    if (remove) src.erase(from);
    r.stored = true;
  });
  co_return r;
}

// RENAME / RENAMENX: read the source, store it under the new name, then delete the source (if it still
// holds the value moved); in one visit when both names live on one shard.
task<void> rename(context& c, bool nx) {
  std::string_view from = c.args[1], to = c.args[2];
  std::size_t n = c.srv.count();
  count_keyed(c.srv, c.me, shard_of(from, n) != c.me || shard_of(to, n) != c.me);
  std::string& out = c.out.text();
  if (std::size_t i = shard_of(from, n); i == shard_of(to, n)) {
    copied r = co_await copy_within(c, i, from, c.ses.db, to, c.ses.db, nx, from != to, false);
    if (!r.found) co_return resp::append_error(out, "ERR no such key");
    out += nx ? (r.stored ? ":1\r\n" : ":0\r\n") : "+OK\r\n";  // the same name stores nothing
    co_return;
  }
  found f = co_await read_entry(c, from, c.ses.db, false);
  if (!f.value) co_return resp::append_error(out, "ERR no such key");
  if (from == to || !co_await write_entry(c, to, c.ses.db, f, nx)) {
    out += nx ? ":0\r\n" : "+OK\r\n";  // the same name: nothing to move (RENAMENX: not stored)
    co_return;
  }
  std::size_t i = shard_of(from, n);
  co_await on_shard(c.srv, c.me, i, [&c, &f, from, i, db = c.ses.db] {
    keyspace& ks = c.srv.shards[i]->db[db];
    std::int64_t now = clock_ms();
    if (entry* e = ks.find(from, now); e != nullptr && e->value == f.value) ks.erase(from, now);
  });
  out += nx ? ":1\r\n" : "+OK\r\n";
}

// A database index as COPY's and MOVE's DB argument: an int, then 0-15; nullopt (an error replied) if not.
std::optional<int> database(std::string_view arg, std::string& out) {
  auto n = parse_int(arg);
  if (!n || *n < INT32_MIN || *n > INT32_MAX) {
    resp::append_error(out, not_integer);
    return std::nullopt;
  }
  if (*n < 0 || *n >= databases) {
    resp::append_error(out, "ERR DB index is out of range");
    return std::nullopt;
  }
  return static_cast<int>(*n);
}

}  // namespace

task<void> cmd_mget(context& c) {
  std::vector<value_ptr> values(c.args.size());
  co_await each_key(c, 1, 1, [&values, &c](keyspace& ks, std::size_t a) {
    if (entry* e = ks.find_read(c.args[a])) values[a] = e->value;
  });
  // Streamed: written as it forms, each value sent from the store (shared, not copied) once its turn
  // comes, so a long reply never waits whole in memory.
  resp::append_array_header(c.out.text(), c.args.size() - 1);
  for (std::size_t a = 1; a < c.args.size(); ++a) {
    c.out.bulk(std::move(values[a]));
    if (c.out.must_flush()) co_await c.out.flush();
  }
}

task<void> cmd_mset(context& c) {
  if (!pairs(c)) co_return;
  co_await each_key(c, 1, 2,
                    [&c](keyspace& ks, std::size_t a) { ks.put(c.args[a], c.args[a + 1], c.ses.input, 0); });
  resp::append_simple_string(c.out.text(), "OK");
}

// MSETNX: a first visit checks that no key exists, a second stores them all.
task<void> cmd_msetnx(context& c) {
  if (!pairs(c)) co_return;
  bool any = false;
  co_await each_key(c, 1, 2,
                    [&c, &any](keyspace& ks, std::size_t a) { any |= ks.find(c.args[a]) != nullptr; });
  if (!any) {
    co_await each_key(
        c, 1, 2, [&c](keyspace& ks, std::size_t a) { ks.put(c.args[a], c.args[a + 1], c.ses.input, 0); });
  }
  resp::append_integer(c.out.text(), any ? 0 : 1);
}

task<void> cmd_del(context& c) {
  std::int64_t count = 0;
  co_await each_key(c, 1, 1,
                    [&c, &count](keyspace& ks, std::size_t a) { count += ks.erase(c.args[a]) ? 1 : 0; });
  resp::append_integer(c.out.text(), count);
}

task<void> cmd_exists(context& c) {
  std::int64_t count = 0;
  co_await each_key(c, 1, 1, [&c, &count](keyspace& ks, std::size_t a) {
    count += ks.find_read(c.args[a]) != nullptr ? 1 : 0;
  });
  resp::append_integer(c.out.text(), count);
}

task<void> cmd_rename(context& c) { co_await rename(c, false); }
task<void> cmd_renamenx(context& c) { co_await rename(c, true); }

// MOVE key db: to another database of the same shard, its deadline with it; 0 if absent or already there.
task<void> cmd_move(context& c) {
  std::string& out = c.out.text();
  auto db = database(c.args[2], out);
  if (!db) co_return;
  if (*db == c.ses.db) co_return resp::append_error(out, "ERR source and destination objects are the same");
  std::string_view key = c.args[1];
  std::size_t i = shard_of(key, c.srv.count());
  count_keyed(c.srv, c.me, i != c.me);
  bool moved = false;
  co_await on_shard(c.srv, c.me, i, [&c, &moved, key, i, from = c.ses.db, to = *db] {
    keyspace& src = c.srv.shards[i]->db[from];
    keyspace& dst = c.srv.shards[i]->db[to];
    std::int64_t now = clock_ms();
    entry* e = src.find(key, now);
    if (e == nullptr || dst.find(key, now) != nullptr) return;
    dst.put(key, e->value, e->expires_ms);
    src.erase(key, now);
    moved = true;
  });
  resp::append_integer(out, moved ? 1 : 0);
}

// COPY source destination [DB index] [REPLACE]
task<void> cmd_copy(context& c) {
  std::string& out = c.out.text();
  bool replace = false;
  int db = c.ses.db;
  for (std::size_t i = 3; i < c.args.size(); ++i) {
    if (iequals(c.args[i], "REPLACE")) {
      replace = true;
    } else if (iequals(c.args[i], "DB") && i + 1 < c.args.size()) {
      auto n = database(c.args[++i], out);
      if (!n) co_return;
      db = *n;
    } else {
      co_return resp::append_error(out, syntax_error);
    }
  }
  std::string_view from = c.args[1], to = c.args[2];
  if (db == c.ses.db && from == to)
    co_return resp::append_error(out, "ERR source and destination objects are the same");
  std::size_t n = c.srv.count();
  count_keyed(c.srv, c.me, shard_of(from, n) != c.me || shard_of(to, n) != c.me);
  if (std::size_t i = shard_of(from, n); i == shard_of(to, n)) {
    copied r = co_await copy_within(c, i, from, c.ses.db, to, db, !replace, false, true);
    co_return resp::append_integer(out, r.stored ? 1 : 0);
  }
  found f = co_await read_entry(c, from, c.ses.db, true);
  bool stored = false;
  if (f.value) stored = co_await write_entry(c, to, db, f, !replace);
  resp::append_integer(out, stored ? 1 : 0);
}

}  // namespace kv
