// buffer_pool_state.hpp — the memory and bookkeeping of a net::buffer_pool, shared by the pool, its leases
// and the streams receiving with it.
//
// Provides: detail::pool_state, detail::pool_waiter. Threads: the pool's executor thread only.
//
// Reference counted by hand (the pool object, each lease, each stream state): a plain count, because
// everything that touches it runs on one thread, and a lease is two words rather than a shared_ptr's
// control block traffic per chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uring {
class executor;
}

struct io_uring_buf_ring;

namespace uring::detail {

// One anonymous mapping for a provided-buffer ring and its buffers: the ring's slots first (page-aligned,
// as the kernel requires), then `count` buffers of `size` bytes. Pages are backed only once touched.
struct ring_mapping {
  void* memory = nullptr;
  std::size_t mapped = 0;
  io_uring_buf_ring* slots = nullptr;
  char* buffers = nullptr;
  unsigned entries = 0;  // ring slots: count rounded up to a power of two
};
// Throws std::system_error("`who`: mmap") on failure.
ring_mapping map_ring(std::uint32_t count, std::uint32_t size, const char* who);
// Registers `m`'s slots with `ex`'s ring under a buffer group id of its own: 0 with the id in `group`, or
// -errno (-EOPNOTSUPP or -EINVAL: no buffer rings here).
int register_ring(executor& ex, const ring_mapping& m, std::uint16_t& group, unsigned flags = 0);

// A stream receiving with the pool: it holds buffers (counted here, against the pool's per-stream limit),
// and may wait for one to come back (its receive found the pool empty). Always part of a leased receive's
// state, which reacts to both calls (leased_recv.cpp): no virtual table, since that state is part of
// every idle connection's cost.
struct pool_waiter {
  std::uint32_t held = 0;  // buffers of the pool this stream holds: queued in it, leased, being filled

  // A buffer went back to the pool while this stream waited for one.
  void on_buffer_returned() noexcept;
  // One of this stream's own buffers went back (a lease returned): it may be under its limit again.
  void on_own_returned() noexcept;
};

struct pool_state {
  pool_state(executor& ex, std::uint32_t count, std::uint32_t size, bool use_ring, std::uint32_t per_stream,
             bool incremental);
  ~pool_state();
  pool_state(const pool_state&) = delete;
  pool_state& operator=(const pool_state&) = delete;

  executor* ex;
  std::uint32_t count;
  std::uint32_t size;
  std::uint32_t per_stream;  // the most buffers one stream holds (options::max_per_stream, resolved)
  std::uint16_t group = 0;   // the buffer group id, while ring
  bool ring = false;         // registered as a provided-buffer ring
  bool closed = false;       // the pool object is gone: receives fail, returns just count
  bool bundle = false;       // a receive may fill several buffers at once (the executor's plan)
  bool incremental = false;  // chunks share buffers (options::incremental): see buffer_carving.cpp
  std::size_t refs = 1;      // the pool object, leases, stream states
  void* memory = nullptr;    // one mapping: the ring's slots (page-aligned, first), then the buffers
  std::size_t mapped = 0;
  io_uring_buf_ring* slots = nullptr;
  unsigned mask = 0;  // ring slots - 1
  char* buffers = nullptr;
  std::uint32_t in_ring = 0;    // ring: buffers the kernel may still pick (as far as reaped CQEs tell)
  std::uint64_t exhausted = 0;  // times a stream found every buffer out
  std::uint64_t receives = 0;   // receive completions that brought data
  std::uint64_t returns = 0;    // buffers given back so far (a stream that ran dry asks: any since I armed?)
  std::uint64_t filled = 0;     // buffers that began receiving from their start
  std::vector<std::uint16_t> free_ids;  // no ring: buffers free to take
  std::vector<std::uint16_t> ring_pos;  // ring: by buffer id, the slot (the ring's tail) it was put in at
  std::vector<pool_waiter*> waiters;
  std::vector<pool_waiter*>
      owners;  // by buffer id: the stream holding it, or null (free, or its stream is gone)

  // Incremental pools (buffer_carving.cpp): a chunk is a piece of a buffer, with the stream it counts for.
  struct piece {
    std::uint16_t buffer;
    pool_waiter* owner;  // null once its stream is gone
  };
  std::vector<std::uint32_t> used;  // by buffer id: bytes received into it (where its next chunk starts)
  std::vector<std::uint32_t> pins;  // by buffer id: its chunks not yet returned
  std::vector<std::uint8_t> spent;  // by buffer id: full, the ring (or receive) done with it, out of the ring
  std::vector<std::uint8_t> reserved;  // by buffer id, no ring: a receive fills it now
  std::vector<std::uint16_t> partial;  // no ring: partly filled buffers with chunks out, to fill on
  std::vector<piece> pieces;           // by chunk id
  std::vector<std::uint32_t> free_pieces;
  std::uint32_t pinned = 0;  // buffers with chunks out

  [[nodiscard]] char* buffer(std::uint16_t id) const noexcept { return buffers + std::size_t{id} * size; }
  [[nodiscard]] bool has_free() const noexcept {
    return ring ? in_ring > 0 : !free_ids.empty() || !partial.empty();
  }
  [[nodiscard]] std::uint32_t available() const noexcept {
    if (ring) return incremental ? count - pinned : in_ring;
    return static_cast<std::uint32_t>(free_ids.size());
  }
  // Where the next bytes into buffer `id` go, and how many fit.
  [[nodiscard]] char* fill_point(std::uint16_t id) const noexcept {
    return buffer(id) + (incremental ? used[id] : 0);
  }
  [[nodiscard]] std::uint32_t space(std::uint16_t id) const noexcept {
    return incremental ? size - used[id] : size;
  }
  // Incremental: `len` bytes at buffer `id`'s fill point are received; a chunk for `w` (its id), or for
  // nobody (`w` null: a gone stream's bytes, consumed all the same), whose data starts at `*at`.
  std::uint32_t carve(std::uint16_t id, std::uint32_t len, pool_waiter* w, char** at) noexcept;
  // Incremental: chunk `p` is returned. `tell_owner`: its stream hears of it (a lease, not a queued chunk).
  void release_piece(std::uint32_t p, bool tell_owner) noexcept;
  // Incremental ring: the kernel is done with buffer `id` (a completion without IORING_CQE_F_BUF_MORE).
  void kernel_done(std::uint16_t id) noexcept;
  // Incremental, no ring: the buffer a receive fills next (has_free() must be true), partly used first.
  std::uint16_t reserve() noexcept;
  // Incremental, no ring: the receive into `id` ended (its bytes carved already).
  void unreserve(std::uint16_t id) noexcept;
  // A chunk that waited in a stream goes back unread (its stream is not told).
  void drop_chunk(std::uint32_t id) noexcept {
    if (incremental) {
      release_piece(id, false);
    } else {
      disown(static_cast<std::uint16_t>(id));
      give_back(static_cast<std::uint16_t>(id));
    }
  }
  // No ring: takes a free buffer (has_free() must be true).
  std::uint16_t take() noexcept {
    std::uint16_t id = free_ids.back();
    free_ids.pop_back();
    return id;
  }
  // The kernel filled buffer `id` (ring): it is out of the ring until given back.
  void picked() noexcept { --in_ring; }
  // Ring: the buffer `i` places after buffer `first` in ring order, where a bundled recv that started
  // with `first` continued. Read before any buffer goes back: a return may reuse slots past the tail.
  [[nodiscard]] std::uint16_t ring_next(std::uint16_t first, std::uint32_t i) const noexcept;
  // The most buffers one receive of a stream with `room` left in its share may take, as the request's
  // byte length: a byte past them, so that the kernel maps a partial last buffer and stops there (a
  // length that ends on a buffer's end lets it append a second pass). 0: bundles do not fit this size.
  [[nodiscard]] std::uint32_t bundle_bytes(std::uint32_t room) const noexcept;
  // Buffer `id` is free again: back into the ring (or the free list), every waiter hears of it (those
  // holding nothing first), then the stream that held it.
  void give_back(std::uint16_t id) noexcept;
  // Every stream waiting for a buffer tries again (one may be there now).
  void wake_waiters() noexcept;
  // Buffer `id` is held by `w` now (it filled it, or took it to fill).
  void own(std::uint16_t id, pool_waiter& w) noexcept {
    owners[id] = &w;
    ++w.held;
  }
  // Buffer `id` no longer counts for its stream (which is giving it back itself: it is not told).
  void disown(std::uint16_t id) noexcept {
    if (pool_waiter* o = owners[id]) --o->held;
    owners[id] = nullptr;
  }
  // `w` is going: its leases still out no longer count for anyone.
  void forget(pool_waiter& w) noexcept;
  [[nodiscard]] bool at_limit(const pool_waiter& w) const noexcept { return w.held >= per_stream; }

  void add_ref() noexcept { ++refs; }
  void unref() noexcept {
    if (--refs == 0) delete this;
  }
  void wait(pool_waiter& w) {
    ++exhausted;
    waiters.push_back(&w);
  }
  void stop_waiting(pool_waiter& w) noexcept;
  // The pool object goes: unregisters the ring (the kernel stops picking), fails the waiters.
  void close() noexcept;
};

}  // namespace uring::detail
