// enter_flags_helper: drives an executor through every kind of enter it makes (submit only, submit and
// wait, a wait on a pipe, SQ-full flushes, CQ overflow, DEFER_TASKRUN event polling) so that
// registered_ring_test can watch the io_uring_enter calls under strace.
// Usage: enter_flags_helper [--plain]   (--plain: do not register the ring fd)
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include <uring/uring.hpp>

namespace {

uring::task<void> workload() {
  for (int i = 0; i < 10; ++i) co_await uring::nop();  // one op per enter
  int done = 0;
  auto worker = [](int& d) -> uring::task<void> {
    for (int i = 0; i < 20; ++i) co_await uring::nop();
    ++d;
  };
  for (int i = 0; i < 300; ++i) uring::spawn(worker(done));  // more than the SQ and CQ hold
  while (done < 300) co_await uring::nop();

  int fds[2];
  if (::pipe(fds) != 0) co_return;
  auto writer = [](int fd) -> uring::task<void> {
    for (int i = 0; i < 3; ++i) co_await uring::nop();
    co_await uring::write(fd, std::string_view("x"));
  };
  uring::spawn(writer(fds[1]));
  char c;
  co_await uring::read(fds[0], std::span(&c, 1));  // a waiting enter
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace

int main(int argc, char** argv) {
  bool plain = argc > 1 && std::strcmp(argv[1], "--plain") == 0;
  // The kernel probe's throw-away rings enter on plain fds; probe first, then mark (in the trace) where
  // the executors' own enters begin.
  (void)uring::probed_kernel();
  ::prctl(PR_SET_NAME, "enters-start");
  for (auto flags : {uring::executor::options{}.flags,
                     uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun}) {
    uring::executor::options opts;
    opts.sq_entries = 16;
    opts.cq_entries = 32;
    opts.flags = flags;
    opts.register_ring_fd = !plain;
    opts.backend = uring::backend_kind::native;
    uring::executor ex(opts);
    ex.run(workload());
    std::printf("flags=%s registered=%d enters=%llu sqes=%llu cqes=%llu sq_full_flushes=%llu\n",
                uring::to_string(ex.active_flags()).c_str(), ex.registered_ring() ? 1 : 0,
                static_cast<unsigned long long>(ex.stats().enters),
                static_cast<unsigned long long>(ex.stats().sqes),
                static_cast<unsigned long long>(ex.stats().cqes),
                static_cast<unsigned long long>(ex.stats().sq_full_flushes));
  }
  return 0;
}
