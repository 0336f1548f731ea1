// samples/kv/transaction.hpp — a connection's MULTI queue and WATCHed keys (transaction.cpp runs them).
//
// WATCH registers the client's interest on the key's shard (keyspace::watch), which keeps a version for
// each watched key only, bumped by every change to it on that shard; EXEC visits each shard holding a
// watched key, compares the versions read at WATCH, and replies the null array if any moved.
//
// Atomicity: when every queued command is a single-key one, EXEC takes the locks of the shards that hold
// their keys and the watched keys, in shard order, checks the watches and runs the queue under them, on the
// connection's thread: atomic, on any number of shards. Otherwise (a queued command that visits shards on
// its own: MSET, DEL, KEYS...) it runs the queue in order, each command visiting its keys' shards as it
// would outside a transaction, with its replies held until the end: on one shard (--threads 1, the
// default) nothing else runs between the WATCH check and the last command, atomic too; with several,
// other clients' commands may run between the check and the commands, and between two commands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kv {

// Bounds on what one connection holds for transactions (--help and README tell them).
inline constexpr std::size_t max_queued = 10'000;                  // commands between MULTI and EXEC
inline constexpr std::size_t max_queued_bytes = 16 * 1024 * 1024;  // their arguments' bytes
inline constexpr std::size_t max_watched = 1024;                   // keys WATCHed at once
inline constexpr std::size_t max_watched_bytes = 1024 * 1024;      // their names' bytes

struct transaction {
  struct watch {
    std::size_t shard;
    int db;
    std::string key;
    std::uint64_t version;  // keyspace::version at WATCH
  };
  // The queue and the watched keys, made by the first MULTI or WATCH and dropped when both are empty
  // again: a connection using neither carries none.
  struct lists {
    std::vector<std::vector<std::string>> queue;
    std::size_t queued_bytes = 0;
    std::vector<watch> watches;
    std::size_t watched_bytes = 0;
  };

  bool active = false;  // between MULTI and EXEC or DISCARD
  bool dirty = false;   // a command was refused while queuing: EXEC aborts
  std::unique_ptr<lists> held;

  lists& get() {
    if (!held) held = std::make_unique<lists>();
    return *held;
  }
  // Drops the lists when they hold nothing.
  void trim() noexcept {
    if (held && held->queue.empty() && held->watches.empty()) held.reset();
  }
  [[nodiscard]] bool watching() const noexcept { return held && !held->watches.empty(); }
  [[nodiscard]] std::size_t queued() const noexcept { return held ? held->queue.size() : 0; }
  [[nodiscard]] std::size_t queued_bytes() const noexcept { return held ? held->queued_bytes : 0; }
};

}  // namespace kv
