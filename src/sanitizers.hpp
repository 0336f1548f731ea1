// src/sanitizers.hpp — whether this file is being built with AddressSanitizer or ThreadSanitizer, under
// clang (__has_feature) or g++ (__SANITIZE_*__): URING_ASAN, URING_TSAN.
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
