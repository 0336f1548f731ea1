// samples/kv/shard.cpp — a shard's databases: how a value is written, the list of keys with a deadline, and
// active expiry.
#include "shard.hpp"

#include <algorithm>

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
  if (!e.value.unique()) e.value = make_value(*e.value);
  return e.value.unshared();
}

void keyspace::store(entry& e, std::string_view v, uring::resp::command_parser* input) {
  if (input != nullptr) {
    if (std::optional<std::string> own = input->take(v)) {
      e.value = value_ptr(std::move(*own));
      return;
    }
  }
  if (e.value && e.value.unique()) {
    std::string& s = e.value.unshared();
    // In place only where the old string has room and does not hold far more than the new one needs (a
    // short value written over a long one would keep the long one's memory).
    if (v.size() <= s.capacity() && s.capacity() <= std::max<std::size_t>(2 * v.size(), 64)) {
      s.assign(v);
      return;
    }
  }
  e.value = make_value(v);
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
