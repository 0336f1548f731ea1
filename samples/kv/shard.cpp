// samples/kv/shard.cpp — a shard's databases: the list of keys with a deadline, and active expiry.
#include "shard.hpp"

namespace kv {

namespace {

constexpr std::size_t sample_size = 20;  // keys per sample, as Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP
constexpr int rounds_per_turn = 64;      // samples per database per turn: 1280 keys at most

// xorshift64: cheap, and good enough to pick sample positions.
std::uint64_t next_random(std::uint64_t& s) noexcept {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

}  // namespace

void keyspace::set_expiry(std::string_view key, entry& e, std::int64_t ms) {
  touch(key);
  if (ms != 0 && e.expires_ms == 0) {
    e.slot = static_cast<std::uint32_t>(volatile_.size());
    volatile_.emplace_back(key);
  } else if (ms == 0 && e.expires_ms != 0) {
    unlist(e);
  }
  if (ms != 0) deadline_sum_ += static_cast<deadline_sum>(ms) - e.expires_ms;  // unlist took the old one
  e.expires_ms = ms;
}

void keyspace::unlist(entry& e) {
  deadline_sum_ -= e.expires_ms;
  std::uint32_t i = e.slot;
  if (i + 1 != volatile_.size()) {
    volatile_[i] = std::move(volatile_.back());
    map_.find(view(volatile_[i]))->second.slot = i;
  }
  volatile_.pop_back();
}

void keyspace::remove(map::iterator it) {
  touch(it->first);
  if (it->second.expires_ms != 0) unlist(it->second);
  map_.erase(it);
}

std::string& keyspace::own(entry& e) {
  // Only this shard's thread copies a stored pointer, so a count of 1 cannot rise behind this check: a
  // reply on another thread can only let go of its copy.
  if (e.value.use_count() != 1) e.value = make_value(*e.value);
  return const_cast<std::string&>(*e.value);  // made non-const by make_value
}

std::uint64_t keyspace::watch(std::string_view key) {
  watched& w = watched_[view(key)];
  ++w.watchers;
  return w.version;
}

void keyspace::unwatch(std::string_view key) {
  auto it = watched_.find(view(key));
  if (it != watched_.end() && --it->second.watchers == 0) watched_.erase(it);
}

std::uint64_t keyspace::version(std::string_view key) const {
  auto it = watched_.find(view(key));
  return it != watched_.end() ? it->second.version : 0;
}

void keyspace::touch_watched(std::string_view key) {
  if (auto it = watched_.find(view(key)); it != watched_.end()) ++it->second.version;
}

void keyspace::touch_present(const keyspace& in) {
  for (auto& [key, w] : watched_) {
    if (in.map_.contains(key)) ++w.version;
  }
}

void swap_databases(keyspace& a, keyspace& b) {
  a.touch_present(a);
  a.touch_present(b);
  b.touch_present(b);
  b.touch_present(a);
  std::swap(a.map_, b.map_);
  std::swap(a.volatile_, b.volatile_);
  std::swap(a.deadline_sum_, b.deadline_sum_);
  std::swap(a.expired_keys, b.expired_keys);
}

std::size_t keyspace::expire_sample(std::int64_t now, std::uint64_t& seed, int rounds) {
  std::size_t erased = 0;
  for (int r = 0; r < rounds && !volatile_.empty(); ++r) {
    std::size_t n = std::min(sample_size, volatile_.size());
    std::size_t found = 0;
    for (std::size_t j = 0; j < n && !volatile_.empty(); ++j) {
      auto it = map_.find(view(volatile_[next_random(seed) % volatile_.size()]));
      if (expired(it->second, now)) {
        ++expired_keys;
        remove(it);
        ++found;
      }
    }
    erased += found;
    if (found * 4 <= n) break;  // a quarter or less had expired: what is left waits for the next turn
  }
  return erased;
}

std::size_t shard::expire_cycle(std::int64_t now) {
  std::size_t erased = 0;
  for (keyspace& ks : db) erased += ks.expire_sample(now, expiry_seed, rounds_per_turn);
  return erased;
}

}  // namespace kv
