// canceller_cache_helper.cpp — run under valgrind by the canceller_cache_no_leak test: threads that end with
// freed cancellers in their per-thread cache (src/ops/op_canceller.cpp), and one whose thread_local
// operation frees its canceller after the cache was emptied at thread exit. Valgrind must find no leak.
#include <optional>
#include <stop_token>
#include <thread>

#include <uring/uring.hpp>

namespace {

using stoppable_nop = decltype(uring::with_stop_token(uring::nop(), std::stop_token{}));

// Made before the thread's first cached free, so destroyed after the cache is emptied.
thread_local std::optional<stoppable_nop> late;

void round_trips(int n) {
  uring::executor ex;
  ex.run([](int count) -> uring::task<void> {
    for (int i = 0; i < count; ++i) {
      std::stop_source s;
      co_await uring::with_stop_token(uring::nop(), s.get_token());
    }
  }(n));
}

}  // namespace

int main() {
  std::thread cached([] { round_trips(100); });
  cached.join();
  std::thread after([] {
    std::stop_source s;
    late.emplace(uring::with_stop_token(uring::nop(), s.get_token()));  // never awaited
    round_trips(100);
  });
  after.join();
  round_trips(10);  // the main thread too
  return 0;
}
