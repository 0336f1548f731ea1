// backend/native/ring_mapping.hpp — a ring's set-up and tear-down, with their ordering told to TSan.
//
// liburing maps and unmaps a ring's SQ and CQ with raw syscalls, which TSan does not see. A ring mapped
// on one thread where another thread's ring was unmapped before would look to it like one object used
// by two threads without ordering. The kernel orders the unmap before the map; the release before every
// tear-down and the acquire after every set-up say so to TSan. Elsewhere both are plain liburing calls.
#pragma once

#include <liburing.h>

#include "sanitizers.hpp"

namespace uring::detail {

inline char ring_mappings;  // the sync object every set-up acquires and every tear-down releases

inline int init_ring(unsigned entries, io_uring* ring, io_uring_params* params) noexcept {
  const int r = io_uring_queue_init_params(entries, ring, params);
  annotate_acquire(&ring_mappings);
  return r;
}

inline void exit_ring(io_uring* ring) noexcept {
  annotate_release(&ring_mappings);
  io_uring_queue_exit(ring);
}

}  // namespace uring::detail
