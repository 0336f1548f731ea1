// fiber/stack_pool.hpp — guard-paged fiber stacks from a process-wide pool (private to uring::fiber).
//
// Provides: detail::pooled_stack (a Boost.Context StackAllocator), detail::stack_usable_bottom.
// Threads: any; a stack may be returned on another thread than the one that took it (fibers migrate).
//
// Boost's pooled_fixedsize_stack has no guard page and its protected_fixedsize_stack is not pooled: each
// stack here is one mmap with its lowest page PROT_NONE, so running off the end faults at once. Returned
// stacks are kept (up to a bound per size) and handed out again, which spares two syscalls per fiber.
#pragma once

#include <boost/context/stack_context.hpp>

#include <cstddef>

namespace uring::detail {

class pooled_stack {
 public:
  // `usable`: bytes above the guard page (rounded up to pages).
  explicit pooled_stack(std::size_t usable) noexcept : usable_(usable) {}

  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& sctx) noexcept;

 private:
  std::size_t usable_;
};

// The lowest usable address of a stack from pooled_stack (just above its guard page).
void* stack_usable_bottom(const boost::context::stack_context& sctx) noexcept;

}  // namespace uring::detail
