// samples/kv/shard.hpp — one executor's part of uring-kv's keyspace, and the commands that run on it.
//
// Provides: kv::shard (16 databases, kv::keyspace each: string keys to shared values (value.hpp) with
// optional expiry), kv::shard_of (which shard owns a key), kv::clock_ms, kv::parse_int,
// kv::iequals, and the single-key command bodies (kv::cmd_get, ...: strings.cpp, keys.cpp). Threads: a
// shard's databases are touched only under its lock (kv::keys_guard), by its own executor or, when the lock
// is free, by another that would otherwise forward the command there and wait; shard_of and parse_int are
// pure.
//
// Expiry is Redis's: lazy (an expired entry is erased when it is next looked up) and active (every 100 ms
// each shard samples 20 keys with a deadline per database, erases the expired ones, and samples again while
// more than a quarter had expired, 64 samples per database and turn at most: shard::expire_cycle).
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uring/resp/parser.hpp>

#include "value.hpp"

namespace kv {

// Milliseconds of Unix time, as Redis keeps expiry deadlines: EXPIREAT and EXPIRETIME speak in it.
inline std::int64_t clock_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// FNV-1a, not the map's own hash: shard choice and bucket choice must not use the same bits, or each
// shard's map would see keys whose hashes all agree modulo the shard count.
inline std::size_t shard_of(std::string_view key, std::size_t shards) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return static_cast<std::size_t>(h % shards);
}

// A whole-string signed 64-bit integer, as Redis reads one: no sign but a leading '-', no leading zero
// ("01", "-0"), no space, nothing after the digits.
inline std::optional<std::int64_t> parse_int(std::string_view s) noexcept {
  std::int64_t v = 0;
  std::string_view digits = s.starts_with('-') ? s.substr(1) : s;
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return std::nullopt;
  if (digits.front() == '0' && s.size() != 1) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// `a` equals the upper-case ASCII `upper`, ignoring case (command names and options).
inline bool iequals(std::string_view a, std::string_view upper) noexcept {
  if (a.size() != upper.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 32) : a[i];
    if (x != upper[i]) return false;
  }
  return true;
}

// ASCII lower case (command names in Redis's error messages).
inline std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  return r;
}

// Deadlines summed over millions of keys pass 64 bits.
__extension__ using deadline_sum = __int128;

struct entry {
  value_ptr value;
  std::int64_t expires_ms = 0;  // clock_ms() deadline; 0: never. Set through keyspace::set_expiry
  std::uint32_t slot = 0;       // with a deadline: the key's place in the keyspace's list of such keys
};

// One database of one shard: string keys to entries, and the list of keys with a deadline that active
// expiry samples (Redis's "expires" dictionary).
class keyspace {
 public:
  using map = absl::flat_hash_map<std::string, entry>;

  // `now` for find, find_read and erase that reads the clock only for a key with a deadline (most have none).
  static constexpr std::int64_t clock_now = INT64_MIN;

  // The live entry for `key`, or null (an expired one is erased on the way).
  entry* find(std::string_view key, std::int64_t now = clock_now) {
    auto it = map_.find(view(key));
    if (it == map_.end()) return nullptr;
    if (expired(it->second, now)) {
      ++expired_keys;
      remove(it);
      return nullptr;
    }
    return &it->second;
  }
  // find() for a read (GET, MGET, STRLEN, the TTL family, TYPE, EXISTS...: Redis's read lookups): counted in
  // INFO's keyspace_hits and keyspace_misses.
  entry* find_read(std::string_view key, std::int64_t now = clock_now) {
    entry* e = find(key, now);
    ++(e != nullptr ? hits : misses);
    return e;
  }
  // Starts loading where `key` sits in the table: the lookups of several keys that follow wait for their
  // cache misses together rather than one after another (MSET, MGET, DEL...).
  void prefetch(std::string_view key) const noexcept { map_.prefetch(view(key)); }
  entry& upsert(std::string_view key) {
    touch(key);
    return map_[view(key)];
  }
  // Makes `e`'s value one this keyspace alone holds (copied if a reply still holds it), to change in place.
  static std::string& own(entry& e);
  // Gives `e` the value `v`, argument of the command `input` last parsed if not null: a large one taken from
  // the parser (no copy), else written over the old value where nothing else holds it and it has room
  // (no allocation: SET over a key, INCR), else a new one.
  static void store(entry& e, std::string_view v, uring::resp::command_parser* input = nullptr);
  ///@{
  // Stores `value` under `key` with the deadline `expires_ms` (0: none), replacing any entry; the bytes go
  // in as store() puts them.
  void put(std::string_view key, value_ptr value, std::int64_t expires_ms) {
    entry& e = upsert(key);
    e.value = std::move(value);
    set_expiry(key, e, expires_ms);
  }
  void put(std::string_view key, std::string_view v, uring::resp::command_parser* input,
           std::int64_t expires_ms) {
    entry& e = upsert(key);
    store(e, v, input);
    set_expiry(key, e, expires_ms);
  }
  ///@}
  // Gives `e`, the entry of `key`, the deadline `ms` (0: none).
  void set_expiry(std::string_view key, entry& e, std::int64_t ms);
  bool erase(std::string_view key, std::int64_t now = clock_now) {
    if (find(key, now) == nullptr) return false;
    remove(map_.find(view(key)));
    return true;
  }
  // Keys held and those with a deadline, as Redis counts them (DBSIZE, INFO): a key whose deadline passed
  // counts until lazy or active expiry reclaims it. O(1).
  [[nodiscard]] std::size_t stored() const noexcept { return map_.size(); }
  [[nodiscard]] std::size_t with_deadline() const noexcept { return volatile_.size(); }
  // The sum of the deadlines of the keys with one (INFO's avg_ttl: their mean less the time now). O(1).
  [[nodiscard]] deadline_sum deadlines() const noexcept { return deadline_sum_; }
  void clear() {
    touch_present(*this);
    map_.clear();
    volatile_.clear();
    deadline_sum_ = 0;
  }
  // Every entry, expired ones included (callers skip those with expired()).
  [[nodiscard]] const map& entries() const noexcept { return map_; }

  // Active expiry, as Redis samples: up to `rounds` times, 20 random keys with a deadline, the expired
  // ones erased; stops early once no more than a quarter of a sample had expired. Returns the keys erased.
  std::size_t expire_sample(std::int64_t now, std::uint64_t& seed, int rounds);

  static bool expired(const entry& e, std::int64_t now) noexcept {
    return e.expires_ms != 0 && e.expires_ms <= (now == clock_now ? clock_ms() : now);
  }

  std::uint64_t expired_keys = 0;      // keys erased because their deadline passed (INFO expired_keys)
  std::uint64_t hits = 0, misses = 0;  // find_read's lookups

  // WATCH: the keys some client watches, each with a version that every change to the key (write, delete,
  // expiry, flush, swap) bumps; EXEC compares it with the one read at WATCH. Unwatched keys cost nothing.
  std::uint64_t watch(std::string_view key);  // one more watcher; returns the key's version
  void unwatch(std::string_view key);         // one watcher fewer (forgotten at none)
  [[nodiscard]] std::uint64_t version(std::string_view key) const;
  // Bumps `key`'s version if it is watched: every write calls this (the keyspace's own methods do).
  void touch(std::string_view key) {
    if (!watched_.empty()) touch_watched(key);
  }
  // Bumps the watched keys of `this` that exist in `in` (FLUSHDB, SWAPDB: Redis touches those alone).
  void touch_present(const keyspace& in);
  // SWAPDB on one shard: the data changes places, each database's watches stay with its number.
  friend void swap_databases(keyspace& a, keyspace& b);

 private:
  // Debian's abseil has its own string_view (not an alias of std's): its string hash takes only that.
  static absl::string_view view(std::string_view s) noexcept { return {s.data(), s.size()}; }
  void remove(map::iterator it);
  void unlist(entry& e);

  void touch_watched(std::string_view key);

  struct watched {
    std::uint64_t version = 0;
    std::uint32_t watchers = 0;
  };
  map map_;
  std::vector<std::string> volatile_;  // the keys with a deadline; entry::slot indexes this
  deadline_sum deadline_sum_ = 0;
  absl::flat_hash_map<std::string, watched> watched_;
};

// Databases per shard, as Redis's default "databases 16": SELECT 0 to 15.
inline constexpr int databases = 16;

struct shard {
  std::array<keyspace, databases> db;

  // Guards db and expiry_seed when several shards run (`shared`); one shard alone takes no lock. A command
  // for another shard's key runs on the connection's own thread when this is free: a hop there and back
  // costs a wake-up and two hand-offs, several times the command itself.
  std::mutex keys;
  bool shared = false;

  // Active expiry's turn on this shard (every 100 ms): a bounded sample of each database. Returns the keys
  // erased.
  std::size_t expire_cycle(std::int64_t now);
  std::uint64_t expiry_seed = 0x2545f4914f6cdd1dull;

  // Commands that named a key, started by connections on this shard's executor, and how many of them
  // had to visit another shard (INFO reports both: the cross-shard share of a workload).
  std::uint64_t keyed_commands = 0;
  std::uint64_t forwarded_commands = 0;
  // Visits to another shard's databases that found its lock taken and waited for its thread (a hop there
  // and back); the other forwarded commands ran here under that shard's lock.
  std::uint64_t hops = 0;
};

// Holds a shard's lock for its scope (none with one shard). A thread that finds it taken spins briefly
// before it sleeps: another thread holds it for at most one batch of commands.
class keys_guard {
 public:
  explicit keys_guard(shard& s) : keys_guard(s, 256) {
    if (!owns_) {
      s_->keys.lock();
      owns_ = true;
    }
  }
  // Takes the lock only if it is free, or comes free within a short spin (a hop to the owner costs more
  // than a batch of commands takes): owns() says whether this guard holds the shard.
  keys_guard(shard& s, std::try_to_lock_t) : keys_guard(s, 32) {}
  keys_guard(const keys_guard&) = delete;
  keys_guard& operator=(const keys_guard&) = delete;
  ~keys_guard() {
    if (s_ != nullptr && owns_) s_->keys.unlock();
  }
  [[nodiscard]] bool owns() const noexcept { return owns_; }

 private:
  // Tries the lock up to `spins` times, pausing between tries.
  keys_guard(shard& s, int spins) : s_(s.shared ? &s : nullptr), owns_(s_ == nullptr) {
    for (int i = 0; !owns_ && i < spins; ++i) {
      owns_ = s_->keys.try_lock();
      if (!owns_) __builtin_ia32_pause();
    }
  }

  shard* s_;
  bool owns_;
};

// What a command run on a shard answers: RESP text, or a stored value sent as a bulk string after it
// (by reference when long: see reply::bulk).
struct shard_reply {
  std::string& text;
  value_ptr value;
  bool has_value = false;
  bool resp3 = false;                            // the client speaks RESP3: its null is "_"
  uring::resp::command_parser* input = nullptr;  // where the arguments came from: see keyspace::store

  void null() { text += resp3 ? "_\r\n" : "$-1\r\n"; }
  void bulk(value_ptr v) {
    value = std::move(v);
    has_value = true;
  }
};

using args_t = std::span<const std::string_view>;

// A single-key command's body, run on the key's shard in the client's database. `args` is the whole
// command, name first, its arity already checked.
using single_fn = void (*)(keyspace& ks, args_t args, shard_reply& out);

// The string commands (strings.cpp) and the key and expiry commands (keys.cpp).
void cmd_get(keyspace&, args_t, shard_reply&);
void cmd_getex(keyspace&, args_t, shard_reply&);
void cmd_getdel(keyspace&, args_t, shard_reply&);
void cmd_getset(keyspace&, args_t, shard_reply&);
void cmd_set(keyspace&, args_t, shard_reply&);
void cmd_setnx(keyspace&, args_t, shard_reply&);
void cmd_setex(keyspace&, args_t, shard_reply&);
void cmd_psetex(keyspace&, args_t, shard_reply&);
void cmd_strlen(keyspace&, args_t, shard_reply&);
void cmd_append(keyspace&, args_t, shard_reply&);
void cmd_setrange(keyspace&, args_t, shard_reply&);
void cmd_getrange(keyspace&, args_t, shard_reply&);
void cmd_incr(keyspace&, args_t, shard_reply&);
void cmd_decr(keyspace&, args_t, shard_reply&);
void cmd_incrby(keyspace&, args_t, shard_reply&);
void cmd_decrby(keyspace&, args_t, shard_reply&);
void cmd_incrbyfloat(keyspace&, args_t, shard_reply&);
void cmd_expire(keyspace&, args_t, shard_reply&);
void cmd_pexpire(keyspace&, args_t, shard_reply&);
void cmd_expireat(keyspace&, args_t, shard_reply&);
void cmd_pexpireat(keyspace&, args_t, shard_reply&);
void cmd_ttl(keyspace&, args_t, shard_reply&);
void cmd_pttl(keyspace&, args_t, shard_reply&);
void cmd_expiretime(keyspace&, args_t, shard_reply&);
void cmd_pexpiretime(keyspace&, args_t, shard_reply&);
void cmd_persist(keyspace&, args_t, shard_reply&);
void cmd_type(keyspace&, args_t, shard_reply&);

// Error replies more than one family sends, in Redis's words.
inline constexpr std::string_view not_integer = "ERR value is not an integer or out of range";
inline constexpr std::string_view syntax_error = "ERR syntax error";

// The longest string SETRANGE and APPEND make (Redis's proto-max-bulk-len is 512 MiB; uring-kv's values
// stay far smaller, so that one client cannot take the memory of many).
inline constexpr std::int64_t max_string = 64 * 1024 * 1024;

}  // namespace kv
