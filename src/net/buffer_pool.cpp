// buffer_pool.cpp — the pool's memory, its provided-buffer ring, and the return of leased buffers.
//
// liburing 2.3 lacks io_uring_setup_buf_ring, so the ring's slots are mapped here (page-aligned, as the
// kernel requires of memory it is given) and registered with io_uring_register_buf_ring. The buffers
// follow the slots in the same anonymous mapping: pages are only backed once touched, so a pool costs
// memory for the buffers that have held data, not for its nominal size.
#include "uring/net/buffer_pool.hpp"
#include "executor/executor_state.hpp"

#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "net/buffer_pool_state.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/executor.hpp"

namespace uring::detail {

namespace {

constexpr std::uint32_t kMaxBuffers = 32768;  // the kernel's limit on a buffer ring's slots

std::uint32_t round_up_pow2(std::uint32_t n) {
  std::uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::size_t page_round(std::size_t n) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// Buffer group ids only need to be unique per ring; a process-wide counter keeps them apart, and a
// collision (after 65536 pools on one ring) just tries the next one.
std::atomic<std::uint16_t> g_next_group{1};

}  // namespace

ring_mapping map_ring(std::uint32_t count, std::uint32_t size, const char* who) {
  ring_mapping m;
  m.entries = round_up_pow2(count);
  const std::size_t ring_bytes = page_round(m.entries * sizeof(io_uring_buf));
  m.mapped = ring_bytes + page_round(std::size_t{count} * size);
  m.memory = ::mmap(nullptr, m.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m.memory == MAP_FAILED)
    throw std::system_error(errno, std::system_category(), std::string(who) + ": mmap");
  m.slots = static_cast<io_uring_buf_ring*>(m.memory);
  m.buffers = static_cast<char*>(m.memory) + ring_bytes;
  return m;
}

int register_ring(executor& ex, const ring_mapping& m, std::uint16_t& group, unsigned flags) {
  int r = -EEXIST;
  for (unsigned tries = 0; tries < 65536 && r == -EEXIST; ++tries) {
    const std::uint16_t g = g_next_group.fetch_add(1, std::memory_order_relaxed);
    r = executor_core::register_buf_ring(ex, m.slots, m.entries, g, flags);
    if (r == 0) group = g;
  }
  return r;
}

pool_state::pool_state(executor& e, std::uint32_t n, std::uint32_t sz, bool use_ring, std::uint32_t limit,
                       bool inc)
    : ex(&e),
      count(n),
      size(sz),
      // Incremental: chunks, which may outnumber the buffers they share.
      per_stream(limit != 0 ? (inc ? limit : std::min(limit, n)) : std::clamp(n / 4, 1u, 16u)),
      incremental(inc) {
  if (n == 0 || n > kMaxBuffers) {
    throw std::invalid_argument("buffer_pool: count must be 1 to 32768, not " + std::to_string(n));
  }
  if (sz == 0) throw std::invalid_argument("buffer_pool: size must not be 0");
  owners.assign(n, nullptr);
  // A bundle's buffers would each start at the pool's idea of their offset, which only holds for the
  // first one: incremental receives take one buffer's rest at a time.
  bundle = executor_core::recv_bundle(e) && !inc;
  if (inc) {
    used.assign(n, 0);
    pins.assign(n, 0);
    spent.assign(n, 0);
    reserved.assign(n, 0);
    // Without the kernel's incremental rings, carve in-process rather than give up the memory behaviour.
    use_ring = use_ring && executor_core::recv_incremental(e);
  }
  const ring_mapping m = map_ring(n, sz, "buffer_pool");
  memory = m.memory;
  mapped = m.mapped;
  slots = m.slots;
  buffers = m.buffers;
  mask = static_cast<unsigned>(io_uring_buf_ring_mask(m.entries));

  if (use_ring) {
    io_uring_buf_ring_init(slots);
    ring_pos.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      io_uring_buf_ring_add(slots, buffer(static_cast<std::uint16_t>(i)), sz, static_cast<unsigned short>(i),
                            static_cast<int>(mask), static_cast<int>(i));
      ring_pos[i] = static_cast<std::uint16_t>(i);
    }
    io_uring_buf_ring_advance(slots, static_cast<int>(n));
    const int r = register_ring(e, m, group, inc ? kPbufRingInc : 0);
    if (r == 0) {
      ring = true;
      in_ring = n;
    } else if (r != -EOPNOTSUPP && r != -EINVAL) {  // those two: no buffer rings here; plain recv
      ::munmap(memory, mapped);
      throw std::system_error(-r, std::system_category(), "buffer_pool: io_uring_register_buf_ring");
    }
  }
  if (!ring) {
    free_ids.reserve(n);
    for (std::uint32_t i = n; i-- > 0;) free_ids.push_back(static_cast<std::uint16_t>(i));
  }
}

pool_state::~pool_state() { ::munmap(memory, mapped); }

void pool_state::give_back(std::uint16_t id) noexcept {
  pool_waiter* const owner = std::exchange(owners[id], nullptr);
  if (owner != nullptr) --owner->held;
  if (closed) return;  // nobody receives any more: the buffer just waits for the memory to go
  ++returns;
  if (incremental) {
    used[id] = 0;
    spent[id] = 0;
  }
  if (ring) {
    ring_pos[id] = slots->tail;
    io_uring_buf_ring_add(slots, buffer(id), size, id, static_cast<int>(mask), 0);
    io_uring_buf_ring_advance(slots, 1);
    ++in_ring;
  } else {
    free_ids.push_back(id);
  }
  wake_waiters();
  // Last: a stream that was at its limit competes for the buffer only after the starved ones.
  if (owner != nullptr) owner->on_own_returned();
}

void pool_state::wake_waiters() noexcept {
  if (!waiters.empty()) {
    // Every waiter tries again: one that finds its socket idle takes nothing, so waking only one could
    // leave a starved stream asleep next to a free buffer. Those holding nothing go first (natively:
    // their receives reach the kernel first), then the oldest waits; each may queue itself again.
    std::vector<pool_waiter*> woken;
    woken.swap(waiters);
    std::stable_partition(woken.begin(), woken.end(), [](const pool_waiter* w) { return w->held == 0; });
    for (pool_waiter* w : woken) w->on_buffer_returned();
  }
}

std::uint16_t pool_state::ring_next(std::uint16_t first, std::uint32_t i) const noexcept {
  if (i == 0) return first;
  const auto pos = static_cast<std::uint16_t>(ring_pos[first] + i);
  return slots->bufs[pos & mask].bid;
}

std::uint32_t pool_state::bundle_bytes(std::uint32_t room) const noexcept {
  constexpr std::uint32_t kMaxLen = 0x7fffffff;  // the kernel's lengths are ints
  const std::uint32_t fits = (kMaxLen - 1) / size;
  return fits == 0 ? 0 : std::min(room, fits) * size + 1;
}

void pool_state::stop_waiting(pool_waiter& w) noexcept { std::erase(waiters, &w); }

void pool_state::forget(pool_waiter& w) noexcept {
  if (w.held == 0) return;
  std::replace(owners.begin(), owners.end(), &w, static_cast<pool_waiter*>(nullptr));
  for (piece& p : pieces) {
    if (p.owner == &w) p.owner = nullptr;
  }
  w.held = 0;
}

void pool_state::close() noexcept {
  if (ring) (void)executor_core::unregister_buf_ring(*ex, group);
  closed = true;
  std::vector<pool_waiter*> woken;
  woken.swap(waiters);
  for (pool_waiter* w : woken) w->on_buffer_returned();  // finds the pool closed: fails with ECANCELED
}

void release_lease(pool_state* pool, std::uint32_t id) noexcept {
  if (pool->incremental) {
    pool->release_piece(id, true);
  } else {
    pool->give_back(static_cast<std::uint16_t>(id));
  }
  pool->unref();
}

}  // namespace uring::detail

namespace uring::net {

buffer_pool::buffer_pool(options opts) : buffer_pool(detail::executor_access::current("buffer_pool"), opts) {}

buffer_pool::buffer_pool(executor& ex, options opts)
    : state_(new detail::pool_state(ex, opts.count, opts.size, opts.use_ring, opts.max_per_stream,
                                    opts.incremental)) {}

buffer_pool::~buffer_pool() {
  state_->close();
  state_->unref();
}

std::uint32_t buffer_pool::count() const noexcept { return state_->count; }
std::uint32_t buffer_pool::buffer_size() const noexcept { return state_->size; }
std::uint32_t buffer_pool::available() const noexcept { return state_->available(); }
std::uint32_t buffer_pool::max_per_stream() const noexcept { return state_->per_stream; }
bool buffer_pool::uses_ring() const noexcept { return state_->ring; }
std::uint64_t buffer_pool::exhausted() const noexcept { return state_->exhausted; }
std::uint64_t buffer_pool::receives() const noexcept { return state_->receives; }
bool buffer_pool::uses_bundles() const noexcept { return state_->bundle; }
bool buffer_pool::incremental() const noexcept { return state_->incremental; }
std::uint64_t buffer_pool::buffers_filled() const noexcept { return state_->filled; }

}  // namespace uring::net
