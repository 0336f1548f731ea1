// src/ops/op_canceller.cpp — where the cancellers of operations with a stop token come from: a per-thread
// cache of freed ones in front of operator new.
#include <cstddef>
#include <new>

#include "sanitizers.hpp"
#include "uring/detail/io_awaitable.hpp"

namespace uring::detail {

namespace {

// Under ASan every canceller comes from the allocator, so a use after free stays visible.
#ifdef URING_ASAN
constexpr int cache_capacity = 0;
#else
constexpr int cache_capacity = 32;
#endif

// Freed cancellers kept for the thread's next operations with a stop token (bounded: a thread that once
// had many in flight keeps at most cache_capacity). Trivially destructible, so it stays usable while the
// thread's other thread_local objects are destroyed (one of them may hold operations).
struct canceller_cache {
  void* blocks[cache_capacity > 0 ? cache_capacity : 1];
  int count;
  bool closed;  // the thread is ending: frees go straight to the allocator
};
constinit thread_local canceller_cache cache{};

// Returns the cached blocks to the allocator when the thread ends; made by the thread's first cached free.
struct cache_drain {
  ~cache_drain() {
    cache.closed = true;
    while (cache.count > 0) ::operator delete(cache.blocks[--cache.count]);
  }
};
thread_local cache_drain drain;

}  // namespace

void* op_canceller::operator new(std::size_t size) {
  if (size == sizeof(op_canceller) && cache.count > 0) return cache.blocks[--cache.count];
  return ::operator new(size);
}

void op_canceller::operator delete(void* p, std::size_t size) noexcept {
  if (size == sizeof(op_canceller) && cache.count < cache_capacity && !cache.closed) {
    static_cast<void>(&drain);  // its destructor empties the cache when the thread ends
    cache.blocks[cache.count++] = p;
    return;
  }
  ::operator delete(p);
}

}  // namespace uring::detail
