/// @file
/// uring/histogram.hpp — a log-linear histogram of unsigned values in fixed memory.
///
/// Provides: uring::histogram.
/// Threads: one writer; copy it to read it elsewhere (executor::histograms does, on the owner thread).
///
/// Buckets as HdrHistogram lays them out: values below 8 have a bucket each; above, every power of two
/// is cut into 8 equal buckets, so a bucket is at most 1/8 (12.5%) as wide as the values it holds. Values
/// from 2^40 up (12.7 days in microseconds) share the last bucket. 305 counters, 2.4 KiB, whatever is
/// recorded; record() is a count-leading-zeros, a shift and an increment. Histograms merge by adding
/// counters, so a group's is the sum of its executors'.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace uring {

/// A log-linear histogram of unsigned values in fixed memory, its buckets as HdrHistogram lays them out
/// (a bucket is at most 1/8 as wide as the values it holds; values from 2^40 up share the last one).
///
/// Threads: one writer; copy it to read it elsewhere (executor::histograms does, on the owner thread).
class histogram {
 public:
  static constexpr unsigned kSubBits = 3;  ///< 8 buckets per power of two
  static constexpr unsigned kTopBit = 40;  ///< values from 2^40 up go to the last bucket
  /// 8 below 8, 8 for each power of two up to 2^39, and the last one.
  static constexpr std::size_t kBuckets = ((kTopBit - kSubBits + 1) << kSubBits) + 1;

  /// Counts `value` (`times` times).
  void record(std::uint64_t value, std::uint64_t times = 1) noexcept {
    counts_[bucket_of(value)] += times;
    count_ += times;
    sum_ += value * times;
    max_ = std::max(max_, value);
  }

  /// Adds `other`'s counts to this one's.
  void merge(const histogram& other) noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
  }

  /// How many values were recorded.
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t sum() const noexcept { return sum_; }  ///< wraps only past 2^64
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }  ///< the largest value recorded, exact

  /// The value that `fraction` (0 to 1) of the recorded values do not exceed, as the upper end of its
  /// bucket (so at most 1/8 above the true one), capped at max(). 0 when nothing was recorded.
  [[nodiscard]] std::uint64_t percentile(double fraction) const noexcept {
    if (count_ == 0) return 0;
    const double wanted = std::clamp(fraction, 0.0, 1.0) * static_cast<double>(count_);
    auto rank = static_cast<std::uint64_t>(wanted);
    if (static_cast<double>(rank) < wanted || rank == 0) ++rank;  // the rank-th smallest value, from 1
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(upper_bound(i), max_);
    }
    return max_;
  }

  /// Recorded values not above `limit`: exact where limit + 1 starts a bucket (every power of two does),
  /// else counting the whole bucket that holds `limit`.
  [[nodiscard]] std::uint64_t count_at_most(std::uint64_t limit) const noexcept {
    std::uint64_t n = 0;
    const std::size_t last = bucket_of(limit);
    for (std::size_t i = 0; i <= last; ++i) n += counts_[i];
    return n;
  }

  ///@{
  /// The bucket that holds `value`, and the largest value a bucket holds.
  static constexpr std::size_t bucket_of(std::uint64_t value) noexcept {
    if (value < (std::uint64_t{1} << kSubBits)) return static_cast<std::size_t>(value);
    const unsigned top = std::min<unsigned>(63u - static_cast<unsigned>(std::countl_zero(value)), kTopBit);
    if (top == kTopBit) return kBuckets - 1;
    const unsigned shift = top - kSubBits;
    const auto sub = static_cast<std::size_t>((value >> shift) & ((1u << kSubBits) - 1));
    return (static_cast<std::size_t>(shift + 1) << kSubBits) + sub;
  }
  static constexpr std::uint64_t upper_bound(std::size_t bucket) noexcept {
    if (bucket < (std::size_t{1} << kSubBits)) return bucket;
    if (bucket == kBuckets - 1) return UINT64_MAX;
    const auto shift = static_cast<unsigned>((bucket >> kSubBits) - 1);
    const std::uint64_t sub = bucket & ((1u << kSubBits) - 1);
    return (((std::uint64_t{1} << kSubBits) + sub + 1) << shift) - 1;
  }
  ///@}

 private:
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace uring
