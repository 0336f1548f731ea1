// samples/kv/transaction.cpp — MULTI, EXEC, DISCARD, WATCH and UNWATCH with Redis 7.0's replies
// (transaction.hpp tells the design and what EXEC guarantees).
#include <uring/resp/parser.hpp>

#include <algorithm>
#include <deque>
#include <optional>

#include "commands.hpp"

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

void end_multi(transaction& tx) {
  tx.active = false;
  tx.dirty = false;
  if (tx.held) {
    tx.held->queue.clear();
    tx.held->queued_bytes = 0;
    tx.trim();
  }
}

// Holding shard i's lock: forgets the watches the session has there; true if one of those keys changed.
bool release_on(server& srv, std::size_t i, const transaction& tx) {
  bool changed = false;
  if (!tx.watching()) return false;
  std::int64_t now = clock_ms();
  for (const transaction::watch& w : tx.held->watches) {
    if (w.shard != i) continue;
    keyspace& ks = srv.shards[i]->db[w.db];
    ks.find(w.key, now);  // a key whose deadline passed since WATCH expires now, which changes it
    changed = changed || ks.version(w.key) != w.version;
    ks.unwatch(w.key);
  }
  return changed;
}

void forget_watches(transaction& tx) {
  if (!tx.held) return;
  tx.held->watches.clear();
  tx.held->watched_bytes = 0;
  tx.trim();
}

// Forgets every watch of the session, one visit per shard holding some; true if a watched key changed.
task<bool> release_watches(server& srv, std::size_t me, session& ses) {
  transaction& tx = ses.tx;
  bool changed = false;
  for (std::size_t i = 0; i < srv.count() && tx.watching(); ++i) {
    const auto& watches = tx.held->watches;
    if (std::none_of(watches.begin(), watches.end(), [i](auto& w) { return w.shard == i; })) continue;
    co_await on_shard(srv, me, i, [&srv, &tx, &changed, i] { changed = release_on(srv, i, tx) || changed; });
  }
  forget_watches(tx);
  co_return changed;
}

// The shards EXEC holds to run at once: those of every queued command's key and every watched key, in
// shard order, when each queued command is a single-key one and several shards run (with one, the general
// path is atomic as well: it does not suspend, and no other thread touches the keyspace).
std::optional<std::vector<std::size_t>> shards_to_hold(const context& c,
                                                       const std::vector<std::vector<std::string>>& queue) {
  if (c.srv.count() == 1 || queue.empty()) return std::nullopt;
  std::vector<bool> needed(c.srv.count());
  for (const std::vector<std::string>& command : queue) {
    if (single_command(command[0]) == nullptr) return std::nullopt;  // arity checked: command[1] is a key
    needed[shard_of(command[1], c.srv.count())] = true;
  }
  if (c.ses.tx.watching()) {
    for (const transaction::watch& w : c.ses.tx.held->watches) needed[w.shard] = true;
  }
  std::vector<std::size_t> shards;
  for (std::size_t i = 0; i < needed.size(); ++i) {
    if (needed[i]) shards.push_back(i);
  }
  return shards;
}

// EXEC holding the locks of `shards` (shards_to_hold), on the connection's thread: the watches checked, then
// the queue run if none moved, with nothing of another client in between on any of those shards. The locks
// are taken in shard order, as by every holder of more than one, so two such EXECs cannot wait for each
// other; any other holder keeps one lock for one batch of commands.
void exec_holding(context& c, const std::vector<std::size_t>& shards,
                  const std::vector<std::vector<std::string>>& queue) {
  std::deque<keys_guard> held;  // a deque: its guards never move
  for (std::size_t i : shards) held.emplace_back(*c.srv.shards[i]);
  bool changed = false;
  for (std::size_t i : shards) changed = release_on(c.srv, i, c.ses.tx) || changed;
  forget_watches(c.ses.tx);
  if (changed) return c.out.null_array();  // a watched key changed: nothing ran
  resp::append_array_header(text(c), queue.size());
  std::vector<std::string_view> args;
  for (const std::vector<std::string>& command : queue) {
    args.assign(command.begin(), command.end());
    const std::size_t i = shard_of(args[1], c.srv.count());
    count_keyed(c.srv, c.me, i != c.me);
    ++c.srv.clients[c.me]->commands_processed;
    shard_reply r{text(c), nullptr, false, c.out.resp3()};
    single_command(args[0])(c.srv.shards[i]->db[c.ses.db], args, r);
    if (r.has_value) c.out.bulk(std::move(r.value));
  }
}

}  // namespace

task<void> unwatch_all(server& srv, std::size_t me, session& ses) { co_await release_watches(srv, me, ses); }

void queue_command(context& c) {
  transaction& tx = c.ses.tx;
  std::size_t bytes = 0;
  for (std::string_view a : c.args) bytes += a.size();
  if (tx.queued() >= max_queued || tx.queued_bytes() + bytes > max_queued_bytes) {
    tx.dirty = true;
    return resp::append_error(text(c), "ERR transaction too long (at most " + std::to_string(max_queued) +
                                           " commands and " + std::to_string(max_queued_bytes >> 20) +
                                           " MiB of arguments are queued)");
  }
  transaction::lists& l = tx.get();
  l.queue.emplace_back(c.args.begin(), c.args.end());
  l.queued_bytes += bytes;
  resp::append_simple_string(text(c), "QUEUED");
}

task<void> exec_abort(context& c, std::string_view why) {
  end_multi(c.ses.tx);
  co_await release_watches(c.srv, c.me, c.ses);
  resp::append_error(text(c), "EXECABORT Transaction discarded because of: " + std::string(why));
}

void cmd_multi(context& c) {
  transaction& tx = c.ses.tx;
  if (tx.active) return resp::append_error(text(c), "ERR MULTI calls can not be nested");
  tx.active = true;
  resp::append_simple_string(text(c), "OK");
}

task<void> cmd_discard(context& c) {
  transaction& tx = c.ses.tx;
  if (!tx.active) co_return resp::append_error(text(c), "ERR DISCARD without MULTI");
  end_multi(tx);
  co_await release_watches(c.srv, c.me, c.ses);
  resp::append_simple_string(text(c), "OK");
}

task<void> cmd_exec(context& c) {
  transaction& tx = c.ses.tx;
  if (!tx.active) co_return resp::append_error(text(c), "ERR EXEC without MULTI");
  bool dirty = tx.dirty;
  std::vector<std::vector<std::string>> queue;
  if (tx.held) queue = std::move(tx.held->queue);
  end_multi(tx);
  if (!dirty) {
    if (auto shards = shards_to_hold(c, queue)) co_return exec_holding(c, *shards, queue);
  }
  bool changed = false;
  if (tx.watching()) changed = co_await release_watches(c.srv, c.me, c.ses);
  if (dirty) {
    co_return resp::append_error(text(c), "EXECABORT Transaction discarded because of previous errors.");
  }
  if (changed) {
    c.out.null_array();  // a watched key changed: nothing ran
    co_return;
  }
  resp::append_array_header(text(c), queue.size());
  c.out.hold(true);
  c.ses.exec_count = static_cast<std::int64_t>(queue.size());
  std::vector<std::string_view> args;
  try {
    for (const std::vector<std::string>& command : queue) {
      args.assign(command.begin(), command.end());
      co_await execute(c.srv, c.me, c.ses, args, c.out);
      if (c.out.must_flush()) co_await c.out.flush();
    }
  } catch (...) {
    c.out.hold(false);
    c.ses.exec_count = -1;
    throw;
  }
  c.out.hold(false);
  c.ses.exec_count = -1;
}

task<void> cmd_watch(context& c) {
  transaction& tx = c.ses.tx;
  if (tx.active) co_return resp::append_error(text(c), "ERR WATCH inside MULTI is not allowed");
  std::size_t bytes = 0;
  for (std::string_view key : c.args.subspan(1)) bytes += key.size();
  const std::size_t watched = tx.held ? tx.held->watches.size() : 0;
  const std::size_t watched_bytes = tx.held ? tx.held->watched_bytes : 0;
  if (watched + c.args.size() - 1 > max_watched || watched_bytes + bytes > max_watched_bytes) {
    co_return resp::append_error(text(c), "ERR too many watched keys (at most " +
                                              std::to_string(max_watched) + " keys and " +
                                              std::to_string(max_watched_bytes >> 20) + " MiB of names)");
  }
  int db = c.ses.db;
  transaction::lists& l = tx.get();
  for (std::string_view key : c.args.subspan(1)) {
    if (std::any_of(l.watches.begin(), l.watches.end(), [&](auto& w) { return w.db == db && w.key == key; }))
      continue;
    std::size_t i = shard_of(key, c.srv.count());
    std::uint64_t version = 0;
    co_await on_shard(c.srv, c.me, i, [&c, &version, key, i, db] {
      keyspace& ks = c.srv.shards[i]->db[db];
      ks.find(key);  // a key already expired is gone before the watch: its erasure is no change
      version = ks.watch(key);
    });
    l.watches.push_back({i, db, std::string(key), version});
    l.watched_bytes += key.size();
  }
  resp::append_simple_string(text(c), "OK");
}

task<void> cmd_unwatch(context& c) {
  co_await release_watches(c.srv, c.me, c.ses);
  resp::append_simple_string(text(c), "OK");
}

}  // namespace kv
