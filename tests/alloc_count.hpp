// tests/alloc_count.hpp — the heap blocks one thread allocates, counted: alloc_count.cpp replaces
// operator new in the executable that links it (not under TSan, whose runtime defines it too).
#pragma once

#include <cstddef>
#include <vector>

namespace uring::test {

// Starts recording this thread's allocations; the sizes allocated since come back from take(), in order.
void start_recording() noexcept;
std::vector<std::size_t> take();

}  // namespace uring::test
