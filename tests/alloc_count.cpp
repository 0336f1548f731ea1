// tests/alloc_count.cpp — counts what each thread allocates (alloc_count.hpp) by replacing operator new.
#include "alloc_count.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <new>

namespace {

// What this thread allocated while `recording`: each block's requested size, in order.
thread_local bool recording = false;
thread_local std::size_t recorded = 0;
thread_local std::size_t sizes[64];

void note(std::size_t n) noexcept {
  if (!recording) return;
  if (recorded < std::size(sizes)) sizes[recorded] = n;
  ++recorded;
}

}  // namespace

namespace uring::test {

void start_recording() noexcept {
  recorded = 0;
  recording = true;
}

std::vector<std::size_t> take() {
  recording = false;
  return {sizes, sizes + std::min(recorded, std::size(sizes))};
}

}  // namespace uring::test

void* operator new(std::size_t n) {
  note(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  note(n);
  if (void* p = std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) &
                                                                    ~(static_cast<std::size_t>(a) - 1)))
    return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
