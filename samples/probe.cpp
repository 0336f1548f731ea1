// uring-probe: prints what the running kernel's io_uring can do, and what an executor gets from it.
#include <cstdio>
#include <exception>

#include <uring/uring.hpp>

int main() {
  uring::kernel_features f = uring::probe_kernel();
  std::fputs(uring::to_string(f).c_str(), stdout);
  if (!f.io_uring_usable) return 1;
  try {
    uring::executor ex;
    std::printf("executor          ring flags %s (dropped: %s), registered ring fd: %s\n",
                uring::to_string(ex.active_flags()).c_str(), uring::to_string(ex.dropped_flags()).c_str(),
                ex.registered_ring() ? "yes" : "no");
  } catch (const std::exception& e) {
    std::printf("executor          failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
