// samples/kv/commands.hpp — what uring-kv's executors share, and running one command.
//
// Provides: kv::server (the shards and the executor group), kv::execute.
// Threads: shard i is touched only on group->at(i)'s thread; execute runs on the connection's executor
// `me` and visits the others with submit_to (commands naming other shards' keys).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uring/uring.hpp>

#include "reply.hpp"
#include "shard.hpp"

namespace kv {

using args_t = std::span<const std::string_view>;

struct server {
  uring::executor_group* group = nullptr;
  std::vector<std::unique_ptr<shard>> shards;
  std::string backend;
  int port = 0;

  [[nodiscard]] std::size_t count() const noexcept { return shards.size(); }
};

// Runs one command, its reply into `out` (a long one written as it forms: see reply::flush_if_full).
// Returns false when the connection should close (QUIT). `args` points into the connection's parser,
// which is not touched until this returns.
uring::task<bool> execute(server& srv, std::size_t me, args_t args, reply& out);

}  // namespace kv
