// src/sanitizers.hpp — whether this file is being built with AddressSanitizer or ThreadSanitizer, under
// clang (__has_feature) or g++ (__SANITIZE_*__): URING_ASAN, URING_TSAN; and the annotations that tell
// ThreadSanitizer of an order it cannot see (detail::annotate_release, detail::annotate_acquire).
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define URING_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define URING_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(URING_ASAN)
#define URING_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(URING_TSAN)
#define URING_TSAN 1
#endif

#ifdef URING_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace uring::detail {

// A hand-off through the kernel (a CQE, a ring's mapping) is invisible to ThreadSanitizer: a release
// before it and an acquire after it on the same address tell it what the hand-off orders.
#ifdef URING_TSAN
inline void annotate_release(void* p) noexcept { __tsan_release(p); }
inline void annotate_acquire(void* p) noexcept { __tsan_acquire(p); }
#else
inline void annotate_release(void*) noexcept {}
inline void annotate_acquire(void*) noexcept {}
#endif

}  // namespace uring::detail
