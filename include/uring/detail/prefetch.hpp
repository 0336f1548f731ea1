// uring/detail/prefetch.hpp — asking for a cache line in order to write it.
//
// Provides: detail::prefetch_for_write(p).
// Threads: any.
//
// Why: a store to a line that another core holds waits for the line (a "read for ownership"). A store
// alone hides that wait in the store buffer, but the next locked instruction (a spin lock's xchg) drains
// the buffer and so waits it out in full. A channel's sender writes each value into lines its receiver
// read last, under a lock per value: that wait is most of a cross-thread send (bench/README.md,
// "Channels"). Asking for the line ahead of time, with intent to write, overlaps the transfer with the
// sends before it.
//
// x86-64 has PREFETCHW only where CPUID says so (AMD since K8, Intel since Broadwell); elsewhere the
// read prefetch is used, which at least brings the line near. Compilers emit PREFETCHW for
// __builtin_prefetch(p, 1) only when the build targets such a CPU, hence the instruction by hand.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace uring::detail {

#if defined(__x86_64__)
inline const bool kHasPrefetchW = [] {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & bit_PRFCHW) != 0;
}();
#endif

inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
  if (kHasPrefetchW) {
    asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(p)));
  } else {
    __builtin_prefetch(p, 0, 3);
  }
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace uring::detail
