// executor_fixture.hpp — the Executor suite's fixture and a task of a few turns, shared by executor_test and
// executor_stop_test.
#pragma once

#include <uring/uring.hpp>

#include "backends.hpp"

namespace uring::test {

class Executor : public backend_test {
 protected:
  // An 8-entry SQ and a 16-entry CQ: every burst of work overflows both.
  executor::options tiny_ring() const {
    executor::options opts = options();
    opts.sq_entries = 8;
    opts.cq_entries = 16;
    return opts;
  }
};

// `n` nops, then `value`.
inline task<int> nops_then(int n, int value) {
  for (int i = 0; i < n; ++i) co_await nop();
  co_return value;
}

}  // namespace uring::test
