// samples/kv/forward_batch.hpp — a burst's consecutive single-key commands bound for the same other shard,
// run there in one hop.
//
// Provides: kv::forward_batch. Threads: a batch belongs to one connection's burst (serve_burst); run()
// executes its commands under the target shard's lock, here if it is free by then, else on the target
// shard's thread while the connection waits for it.
//
// A command whose key's shard another thread holds would pay a hop there and back.
// Consecutive ones bound for the same shard wait here instead (their arguments copied: the parser moves on)
// and go in one hop. Anything else the connection runs, replies to or closes on first runs the batch, so
// the commands take effect, and their replies go out, in the order the client sent them.
//
// Memory: at most max_commands commands and max_bytes of their arguments; a longer command goes alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <uring/task.hpp>

#include "reply.hpp"
#include "shard.hpp"

namespace kv {

struct server;

class forward_batch {
 public:
  static constexpr std::size_t max_commands = 32;
  static constexpr std::size_t max_bytes = 4096;
  // Returned by forwarded_to for a command that would not be forwarded as a plain single-key command.
  static constexpr std::size_t none = SIZE_MAX;

  [[nodiscard]] bool empty() const noexcept { return commands_.empty(); }
  // Whether the command `args`, forwarded to shard `to` (none: not forwarded), may join the batch.
  [[nodiscard]] bool takes(std::size_t to, args_t args) const noexcept;
  // Adds `fn(args)` in database `db` of shard `to` (takes() answered true).
  void add(std::size_t to, single_fn fn, int db, args_t args);
  // Runs the commands on their shard, in order, their replies appended to `out`; the batch is then empty.
  // `me`: the connection's executor.
  uring::task<void> run(server& srv, std::size_t me, reply& out);

 private:
  struct command {
    single_fn fn;
    int db;
    std::uint32_t first;  // its arguments: pieces_[first, first + count)
    std::uint32_t count;
  };
  struct piece {
    std::uint32_t at;  // in bytes_
    std::uint32_t size;
  };

  std::size_t shard_ = none;
  std::vector<command> commands_;
  std::vector<piece> pieces_;
  std::string bytes_;  // the arguments' bytes, one after another
};

}  // namespace kv
