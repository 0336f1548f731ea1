// uring-bench: every benchmark of the library, followed by a table of ratios to each group's baseline.
#include <benchmark/benchmark.h>

#include "ratio_reporter.hpp"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  uring::bench::ratio_reporter reporter(
      std::map<std::string, std::string>{{"nop", "raw_registered"},
                                         {"nop_threaded", "raw_plain"},
                                         {"timer", "raw_liburing"},
                                         {"cancel", "raw_liburing"},
                                         {"timed_task", "plain"},
                                         {"pingpong", "raw_msg_ring"},
                                         {"eventfd_cycle", "raw_liburing"},
                                         {"wake", "futex"},
                                         {"stream", "raw_msg_ring"},
                                         {"bidir", "raw_msg_ring"},
                                         {"fiber", "coroutine"},
                                         {"fiber_switch", "coroutine_yield"},
                                         {"fiber_memory", "parked"},
                                         {"echo", "epoll"},
                                         {"send", "copy"},
                                         {"send_fixed", "raw_send"},
                                         {"send_queue", "write_all"},
                                         {"chain_fsync", "raw_linked"},
                                         {"chain_write", "raw_linked"},
                                         {"chain_nop", "raw_linked"},
                                         {"direct", "raw_fixed"},
                                         {"fixed_read", "raw_read"},
                                         {"outside_post", "mailbox"},
                                         {"outside_post_wake", "mailbox"}});
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
