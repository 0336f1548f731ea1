// samples/kv/forward_batch.cpp — a burst's commands bound for one other shard, in one hop
// (forward_batch.hpp).
#include "forward_batch.hpp"

#include <uring/uring.hpp>

#include "commands.hpp"

namespace kv {

bool forward_batch::takes(std::size_t to, args_t args) const noexcept {
  if (to == none || (!empty() && to != shard_) || commands_.size() == max_commands) return false;
  std::size_t size = bytes_.size();
  for (std::string_view a : args) size += a.size();
  return size <= max_bytes;
}

void forward_batch::add(std::size_t to, single_fn fn, int db, args_t args) {
  shard_ = to;
  commands_.push_back(
      {fn, db, static_cast<std::uint32_t>(pieces_.size()), static_cast<std::uint32_t>(args.size())});
  for (std::string_view a : args) {
    pieces_.push_back({static_cast<std::uint32_t>(bytes_.size()), static_cast<std::uint32_t>(a.size())});
    bytes_.append(a);
  }
}

uring::task<void> forward_batch::run(server& srv, std::size_t me, reply& out) {
  // Views of the copied arguments, made now that no more are added (the bytes no longer move).
  std::vector<std::string_view> views;
  views.reserve(pieces_.size());
  for (const piece& p : pieces_) views.emplace_back(bytes_.data() + p.at, p.size);
  shard& target = *srv.shards[shard_];
  auto run_all = [this, &target, &views, &out] {
    shard_reply r{out.text(), nullptr, false, out.resp3(), nullptr};
    for (const command& c : commands_) {
      c.fn(target.db[c.db], args_t(views.data() + c.first, c.count), r);
      if (r.has_value) {
        out.bulk(std::move(r.value));
        r.has_value = false;
      }
    }
  };
  if (keys_guard hold(target, std::try_to_lock); hold.owns()) {
    run_all();  // the shard is free now: no hop
  } else {
    ++srv.shards[me]->hops;
    co_await uring::submit_to(srv.group->at(shard_), [&target, &run_all] {
      keys_guard held(target);
      run_all();
    });
  }
  commands_.clear();
  pieces_.clear();
  bytes_.clear();
  shard_ = none;
}

}  // namespace kv
