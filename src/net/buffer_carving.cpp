// buffer_carving.cpp — incremental pools (buffer_pool::options::incremental): many chunks in one buffer,
// each a piece of it that keeps it out of circulation until returned.
//
// A buffer goes back once nothing of it is out (its pins) and its filler is done with it: natively the
// kernel, which keeps the buffer at the ring's head across receives until it is full (the completion that
// fills it lacks IORING_CQE_F_BUF_MORE); without a ring the receive in flight into it (reserved). Without a
// ring a partly filled buffer waits in `partial` for the next receive of any stream, as the kernel's head
// buffer does, and one whose pieces are all back starts over from its beginning (the kernel's offset cannot
// be reset: natively such a buffer fills on).
//
// The kernel fills a buffer in the order its completions arrive, so each one's bytes start where the
// previous one's from that buffer ended: `used` is that offset, for the ring and the emulation alike.
#include <algorithm>

#include "net/buffer_pool_state.hpp"

namespace uring::detail {

std::uint32_t pool_state::carve(std::uint16_t id, std::uint32_t len, pool_waiter* w, char** at) noexcept {
  if (used[id] == 0) ++filled;
  *at = buffer(id) + used[id];
  used[id] = std::min(size, used[id] + len);
  if (w == nullptr) return 0;
  if (pins[id]++ == 0) ++pinned;
  ++w->held;
  if (free_pieces.empty()) {
    pieces.push_back({id, w});
    return static_cast<std::uint32_t>(pieces.size() - 1);
  }
  const std::uint32_t p = free_pieces.back();
  free_pieces.pop_back();
  pieces[p] = {id, w};
  return p;
}

void pool_state::release_piece(std::uint32_t p, bool tell_owner) noexcept {
  const piece gone = pieces[p];
  pieces[p].owner = nullptr;
  free_pieces.push_back(p);
  if (gone.owner != nullptr) --gone.owner->held;
  const std::uint16_t id = gone.buffer;
  if (--pins[id] == 0) {
    --pinned;
    if (reserved[id]) {
      // The receive filling it decides when it ends.
    } else if (ring) {
      if (spent[id]) give_back(id);  // else the kernel fills on at its offset
    } else {
      if (!spent[id]) std::erase(partial, id);
      give_back(id);  // full, or partly used with nothing out: starts over
    }
  }
  // Last, as give_back does for whole buffers: the starved streams first.
  if (tell_owner && gone.owner != nullptr) gone.owner->on_own_returned();
}

void pool_state::kernel_done(std::uint16_t id) noexcept {
  picked();
  spent[id] = 1;
  if (pins[id] == 0) give_back(id);
}

std::uint16_t pool_state::reserve() noexcept {
  std::uint16_t id = 0;
  if (!partial.empty()) {
    id = partial.back();
    partial.pop_back();
  } else {
    id = take();
  }
  reserved[id] = 1;
  return id;
}

void pool_state::unreserve(std::uint16_t id) noexcept {
  reserved[id] = 0;
  if (used[id] == size) spent[id] = 1;
  if (pins[id] == 0) {
    give_back(id);  // nothing of it is out: it starts over
  } else if (!spent[id]) {
    partial.push_back(id);
    wake_waiters();  // a stream that found no buffer may fill the rest of this one
  }
}

}  // namespace uring::detail
