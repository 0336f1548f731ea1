// sync_util.hpp — what the async_mutex and async_semaphore tests share (async_mutex_test,
// async_semaphore_test): turns of the loop, and the fixture of the destruction rule's death tests.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <numeric>
#include <vector>

#include <uring/uring.hpp>

namespace uring::test {

// Yields turns of the loop until pred() holds (or gives up after max_turns): waiters handed a lock resume
// on *some* later turn, and the tests should not depend on which.
template <class Pred>
task<bool> turns_until(Pred pred, int max_turns = 10'000) {
  for (int i = 0; i < max_turns && !pred(); ++i) co_await nop();
  co_return pred();
}

inline task<void> turns(int n) {
  for (int i = 0; i < n; ++i) co_await nop();
}

// 0, 1, ..., n - 1.
inline std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

class SyncDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

}  // namespace uring::test
