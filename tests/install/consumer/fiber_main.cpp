// fiber_consumer: built against an installed uring::fiber (find_package pulls in Boost.Context), run by
// the install_consumer test. A fiber awaits a nop and returns a value that a coroutine joins.
#include <cstdio>
#include <exception>

#include <uring/fiber.hpp>
#include <uring/uring.hpp>

int main() {
  try {
    uring::executor ex;
    int v = ex.run([](uring::executor& self) -> uring::task<int> {
      auto h = uring::spawn_fiber(self, [] {
        uring::this_fiber::await(uring::nop());
        return 42;
      });
      co_return co_await h.join();
    }(ex));
    std::printf("fiber consumer: %s\n", v == 42 ? "ok" : "FAILED");
    return v == 42 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fiber consumer: %s\n", e.what());
    return 3;
  }
}
