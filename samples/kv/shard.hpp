// samples/kv/shard.hpp — one executor's part of uring-kv's keyspace, and the commands that run on it.
//
// Provides: kv::shard (string keys to shared immutable values with optional expiry), kv::value_ptr,
// kv::shard_of (which shard owns a key), kv::clock_ms, kv::parse_int, kv::iequals, and the single-shard
// command bodies (kv::get, kv::run_set, ...). Threads: a shard is touched only by the executor that owns it
// (shared-nothing: a command for another executor's key is forwarded there with submit_to); shard_of and
// parse_int are pure.
//
// Expiry is lazy, as Redis's is for keys nobody samples: an expired entry is erased when it is next
// looked up, and size() (DBSIZE) sweeps the shard so that it never counts one.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kv {

// Milliseconds on the monotonic clock: expiry deadlines are absolute values of it.
inline std::int64_t clock_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// FNV-1a, not the map's own hash: shard choice and bucket choice must not use the same bits, or each
// shard's map would see keys whose hashes all agree modulo the shard count.
inline std::size_t shard_of(std::string_view key, std::size_t shards) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return static_cast<std::size_t>(h % shards);
}

// A whole-string signed 64-bit integer, as Redis reads one ("+1", " 1", "" and "1x" are not).
inline std::optional<std::int64_t> parse_int(std::string_view s) noexcept {
  std::int64_t v = 0;
  if (s.empty() || s.front() == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A stored value: immutable once stored (SET replaces the pointer), so a reply can send it by reference
// from any thread while the shard moves on, and a value read by a slow client is not copied for it.
using value_ptr = std::shared_ptr<const std::string>;

inline value_ptr make_value(std::string_view v) { return std::make_shared<const std::string>(v); }

// `a` equals the upper-case ASCII `upper`, ignoring case (command names and options).
inline bool iequals(std::string_view a, std::string_view upper) noexcept {
  if (a.size() != upper.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 32) : a[i];
    if (x != upper[i]) return false;
  }
  return true;
}

struct entry {
  value_ptr value;
  std::int64_t expires_ms = 0;  // clock_ms() deadline; 0: never
};

class shard {
 public:
  // The live entry for `key`, or null (an expired one is erased on the way).
  entry* find(std::string_view key, std::int64_t now) {
    auto it = map_.find(view(key));
    if (it == map_.end()) return nullptr;
    if (it->second.expires_ms != 0 && it->second.expires_ms <= now) {
      map_.erase(it);
      return nullptr;
    }
    return &it->second;
  }
  entry& upsert(std::string_view key) { return map_[view(key)]; }
  bool erase(std::string_view key, std::int64_t now) {
    if (find(key, now) == nullptr) return false;
    map_.erase(view(key));
    return true;
  }
  // Live keys; sweeps the expired ones.
  std::size_t size(std::int64_t now) {
    for (auto it = map_.begin(); it != map_.end();) {
      if (it->second.expires_ms != 0 && it->second.expires_ms <= now) {
        map_.erase(it++);  // flat_hash_map's erase(iterator) returns void
      } else {
        ++it;
      }
    }
    return map_.size();
  }
  void clear() { map_.clear(); }

  // Commands that named a key, started by connections on this shard's executor, and how many of them
  // had to visit another shard (INFO reports both: the cross-shard share of a workload).
  std::uint64_t keyed_commands = 0;
  std::uint64_t forwarded_commands = 0;

 private:
  // Debian's abseil has its own string_view (not an alias of std's): its string hash takes only that.
  static absl::string_view view(std::string_view s) noexcept { return {s.data(), s.size()}; }

  absl::flat_hash_map<std::string, entry> map_;
};

// GET: the key's value, null if there is none.
value_ptr get(shard& s, std::string_view key);

// Single-key commands, run on the key's shard; each appends its RESP reply to `out`. `args` is the whole
// command, name first, its arity already checked by the caller.
void run_set(shard& s, std::span<const std::string_view> args, std::string& out);
void run_incrby(shard& s, std::string_view key, std::int64_t by, std::string& out);
void run_expire(shard& s, std::span<const std::string_view> args, std::int64_t unit_ms, std::string& out);
void run_ttl(shard& s, std::span<const std::string_view> args, std::int64_t unit_ms, std::string& out);

}  // namespace kv
