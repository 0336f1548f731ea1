// fiber/stack_pool.cpp — mmap'ed stacks with a guard page, recycled through a mutex-guarded pool.
#include "fiber/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "uring/fiber.hpp"

#include "sanitizers.hpp"
#ifdef URING_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace uring {
namespace detail {
namespace {

std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Free stacks by mapping size. Bounded, so that a burst of fibers does not pin its stacks for good.
struct pool {
  static constexpr std::size_t kKeepPerSize = 256;
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free;
};

pool& the_pool() {
  static pool* p = new pool;  // never destroyed: fibers may end during static destruction
  return *p;
}

std::atomic<std::size_t> in_use{0};

}  // namespace

boost::context::stack_context pooled_stack::allocate() {
  const std::size_t page = page_size();
  const std::size_t total = (usable_ + page - 1) / page * page + page;
  void* base = nullptr;
  {
    pool& p = the_pool();
    std::lock_guard lock(p.mutex);
    auto it = p.free.find(total);
    if (it != p.free.end() && !it->second.empty()) {
      base = it->second.back();
      it->second.pop_back();
    }
  }
  if (base == nullptr) {
    base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
      throw std::system_error(errno, std::system_category(), "uring::spawn_fiber: mmap (fiber stack)");
    if (::mprotect(base, page, PROT_NONE) != 0) {
      int e = errno;
      ::munmap(base, total);
      throw std::system_error(e, std::system_category(),
                              "uring::spawn_fiber: mprotect (fiber stack guard page)");
    }
  }
  in_use.fetch_add(1, std::memory_order_relaxed);
  boost::context::stack_context sctx;
  sctx.size = total;
  sctx.sp = static_cast<char*>(base) + total;
  return sctx;
}

void pooled_stack::deallocate(boost::context::stack_context& sctx) noexcept {
  void* base = static_cast<char*>(sctx.sp) - sctx.size;
#ifdef URING_ASAN
  // Frames left on the stack may leave poisoned redzones behind; the next fiber must start clean.
  __asan_unpoison_memory_region(stack_usable_bottom(sctx), sctx.size - page_size());
#endif
  in_use.fetch_sub(1, std::memory_order_relaxed);
  try {
    pool& p = the_pool();
    std::lock_guard lock(p.mutex);
    auto& list = p.free[sctx.size];
    if (list.size() < pool::kKeepPerSize) {
      list.push_back(base);
      return;
    }
  } catch (...) {
    // No memory to keep it in the pool: give it back to the kernel instead.
  }
  ::munmap(base, sctx.size);
}

void* stack_usable_bottom(const boost::context::stack_context& sctx) noexcept {
  return static_cast<char*>(sctx.sp) - sctx.size + page_size();
}

}  // namespace detail

std::size_t fiber_stacks_in_use() noexcept { return detail::in_use.load(std::memory_order_relaxed); }

}  // namespace uring
