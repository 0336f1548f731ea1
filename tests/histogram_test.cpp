// uring::histogram's buckets, percentiles and merging; an executor's histograms on every backend: they
// count exactly what the executor did, and the latencies are at least what the operations waited.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using uring::histogram;
using uring::op_kind;
using uring::task;
using namespace std::chrono_literals;

TEST(Histogram, SmallValuesHaveABucketEachAndLargerOnesAreWithinAnEighth) {
  for (std::uint64_t v = 0; v < 8; ++v) {
    EXPECT_EQ(histogram::bucket_of(v), v);
    EXPECT_EQ(histogram::upper_bound(histogram::bucket_of(v)), v);
  }
  std::mt19937_64 rng(7);
  std::size_t last_bucket = 0;
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    const std::size_t b = histogram::bucket_of(v);
    ASSERT_LT(b, histogram::kBuckets);
    if (v >= (std::uint64_t{1} << histogram::kTopBit)) {
      EXPECT_EQ(b, histogram::kBuckets - 1) << v;
      continue;
    }
    const std::uint64_t top = histogram::upper_bound(b);
    EXPECT_GE(top, v);
    EXPECT_LE(top - v, v / 8) << v;  // the bucket is at most an eighth of its values wide
    if (b > 0) {
      EXPECT_LT(histogram::upper_bound(b - 1), v) << v;  // and v is in no lower one
    }
  }
  // Bucket indexes follow the values, with no gap and no overlap.
  for (std::uint64_t v = 0; v < 100'000; ++v) {
    const std::size_t b = histogram::bucket_of(v);
    EXPECT_TRUE(b == last_bucket || b == last_bucket + 1) << v;
    last_bucket = b;
  }
  EXPECT_EQ(histogram::bucket_of((std::uint64_t{1} << histogram::kTopBit) - 1), histogram::kBuckets - 2);
  EXPECT_EQ(histogram::bucket_of(UINT64_MAX), histogram::kBuckets - 1);
}

TEST(Histogram, PercentilesAreTheBucketsUpperEndsCappedAtTheMaximum) {
  histogram h;
  EXPECT_EQ(h.percentile(0.5), 0u);  // empty
  for (std::uint64_t v = 1; v <= 1000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_EQ(h.sum(), 500'500u);
  EXPECT_EQ(h.max(), 1000u);
  EXPECT_EQ(h.percentile(0.0), 1u);
  EXPECT_EQ(h.percentile(1.0), 1000u);
  const std::uint64_t p50 = h.percentile(0.5);
  EXPECT_GE(p50, 500u);
  EXPECT_LE(p50, 500u + 500u / 8);
  const std::uint64_t p99 = h.percentile(0.99);
  EXPECT_GE(p99, 990u);
  EXPECT_LE(p99, 1000u);
  // One huge value: the maximum is exact even in the last bucket.
  h.record(std::uint64_t{1} << 50);
  EXPECT_EQ(h.percentile(1.0), std::uint64_t{1} << 50);
}

TEST(Histogram, CountsAtPowersOfTwoAreExactAndMergingAddsUp) {
  histogram a, b;
  for (std::uint64_t v = 0; v < 5000; ++v) (v % 2 == 0 ? a : b).record(v, 2);
  a.merge(b);
  EXPECT_EQ(a.count(), 10'000u);
  EXPECT_EQ(a.sum(), 2u * (4999u * 5000u / 2));
  EXPECT_EQ(a.max(), 4999u);
  for (unsigned k = 0; k <= 12; ++k) {  // 2^12 - 1 = 4095: the values 0..4095, twice each
    const std::uint64_t le = (std::uint64_t{1} << k) - 1;
    EXPECT_EQ(a.count_at_most(le), 2 * (le + 1)) << le;
  }
  EXPECT_EQ(a.count_at_most(8191), 10'000u);
}

class Histograms : public uring::test::backend_test {
 protected:
  uring::executor_options with_histograms() const {
    uring::executor_options o = options();
    o.histograms = true;
    return o;
  }
};

task<void> nops(int n) {
  for (int i = 0; i < n; ++i) co_await uring::nop();
}

task<void> eight_nops_then_a_timer() {
  co_await uring::when_all(nops(1), nops(1), nops(1), nops(1), nops(1), nops(1), nops(1), nops(1));
  co_await uring::sleep_for(30ms);
}

TEST_P(Histograms, TheLoopsFiguresAddUpToItsCounters) {
  uring::executor ex(with_histograms());
  ex.run(eight_nops_then_a_timer());
  const uring::executor_histograms h = ex.histograms();
  const uring::executor_stats& st = ex.stats();
  // Eight nops started in one turn go to the kernel together, and complete together.
  EXPECT_GE(h.sqes_per_submit.max(), 8u);
  EXPECT_GE(h.cqes_per_reap.max(), 8u);
  EXPECT_EQ(h.cqes_per_reap.sum(), st.cqes);
  EXPECT_EQ(h.sqes_per_submit.sum(), st.sqes);
}

TEST_P(Histograms, WithoutTheOptionNothingIsKept) {
  uring::executor ex(options());
  ex.run(eight_nops_then_a_timer());
  const uring::executor_histograms h = ex.histograms();
  EXPECT_EQ(h.sqes_per_submit.count(), 0u);
  EXPECT_EQ(h.cqes_per_reap.count(), 0u);
  EXPECT_TRUE(h.latency_us.empty());
  EXPECT_EQ(h.latency(op_kind::nop), nullptr);
  EXPECT_EQ(h.user_us.count(), 0u);
  EXPECT_EQ(h.asleep_us.count(), 0u);
}

TEST_P(Histograms, LatenciesCountEveryOperationByKindAndAtLeastItsWait) {
  uring::test::pipe_pair p;
  uring::executor ex(with_histograms());
  ex.run([](int rfd, int wfd) -> task<void> {
    co_await nops(20);
    char buf[3];
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(co_await uring::write(wfd, std::span<const char>("abc", 3)), 3u);
      EXPECT_EQ(co_await uring::read(rfd, std::span(buf, 3)), 3u);
    }
    co_await uring::sleep_for(20ms);
  }(p.read_end.get(), p.write_end.get()));
  const uring::executor_histograms h = ex.histograms();
  const uring::executor_stats& st = ex.stats();
  ASSERT_EQ(h.latency_us.size(), uring::detail::kOpCodeCount);
  EXPECT_EQ(h.latency(op_kind::nop)->count(), 20u);
  EXPECT_EQ(h.latency(op_kind::write)->count(), 3u);
  EXPECT_EQ(h.latency(op_kind::nop)->count(), st.started(op_kind::nop));
  EXPECT_EQ(h.latency(op_kind::timeout)->count(), 1u);
  EXPECT_GE(h.latency(op_kind::timeout)->max(), 20'000u);  // the timer's own 20 ms, in µs
  EXPECT_EQ(h.latency(op_kind::send)->count(), 0u);
  // Every kind's count is what was started (the reads include the executor's own wake-up reads, one
  // of which may still be armed).
  std::uint64_t completed = 0;
  for (const histogram& k : h.latency_us) completed += k.count();
  EXPECT_LE(completed, st.cqes);
  EXPECT_GE(h.latency(op_kind::read)->count(), 3u);
  EXPECT_GE(h.user_us.count(), 1u);  // turns that resumed coroutines
  // The loop slept through the timer, at least as long as it ran: its clock starts before the submit.
  EXPECT_GE(h.asleep_us.count(), 1u);
  EXPECT_GE(h.asleep_us.sum(), 20'000u);
}

// A nop started by the coroutine that a timer's completion resumed, after the loop waited for it: its
// latency is the nop's, not the wait's (the loop reads its clock after waiting).
TEST_P(Histograms, ALatencyStartsWhenTheOperationDoesNotBeforeTheWait) {
  uring::executor ex(with_histograms());
  ex.run([]() -> task<void> {
    co_await uring::sleep_for(200ms);
    co_await uring::nop();
  }());
  const uring::executor_histograms h = ex.histograms();
  ASSERT_EQ(h.latency(op_kind::nop)->count(), 1u);
  EXPECT_LT(h.latency(op_kind::nop)->max(), 100'000u);  // µs
  EXPECT_GE(h.latency(op_kind::timeout)->max(), 200'000u);
}

TEST_P(Histograms, AGroupsHistogramsAreTheSumOfItsExecutors) {
  uring::executor_histograms total;
  std::uint64_t nops_run = 0;
  for (int n : {5, 7}) {
    uring::executor ex(with_histograms());
    ex.run(nops(n));
    total.merge(ex.histograms());
    nops_run += static_cast<std::uint64_t>(n);
  }
  EXPECT_EQ(total.latency(op_kind::nop)->count(), nops_run);
}

// Hops between two executors that keep latency histograms are timed where they land; a hop from an
// executor that keeps none carries no time.
TEST_P(Histograms, HopsBetweenExecutorsAreTimedWhereTheyLand) {
  constexpr int kHops = 50;
  for (const bool sender_times : {true, false}) {
    uring::executor_group g(2, with_histograms());
    uring::executor_options plain = options();
    uring::executor home(sender_times ? with_histograms() : plain);
    const auto far = home.run([](uring::executor& away, int n) -> task<uring::executor_histograms> {
      uring::executor& here = *uring::executor::current();
      for (int i = 0; i < n; ++i) {
        co_await uring::resume_on(away);
        co_await uring::resume_on(here);
      }
      co_return co_await uring::submit_to(away, [] { return uring::executor::current()->histograms(); });
    }(g.at(0), kHops));
    const uring::executor_histograms near = home.histograms();
    if (sender_times) {
      // Every hop there, and the submit_to's, landed on the group's executor; every hop back here.
      EXPECT_GE(far.hop_us.count(), static_cast<std::uint64_t>(kHops) + 1);
      EXPECT_GE(near.hop_us.count(), static_cast<std::uint64_t>(kHops));
    } else {
      EXPECT_EQ(far.hop_us.count(), 0u);  // sent from an executor without a clock of its own
    }
  }
}

TEST_P(Histograms, AreReadOnTheOwnerThreadOnly) {
  uring::executor ex(options());
  std::thread other([&] { EXPECT_THROW((void)ex.histograms(), std::logic_error); });
  other.join();
}

INSTANTIATE_BACKENDS(Histograms);

}  // namespace
