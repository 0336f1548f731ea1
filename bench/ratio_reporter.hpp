// ratio_reporter.hpp — prints Google Benchmark's table, then each figure as a ratio to its baseline.
//
// Benchmarks are named "<group>/<variant>/<arg>" (e.g. "nop/uring/32"). Within a group and arg, every
// variant's items/s is divided by the baseline variant's, so one run yields side-by-side ratios that
// survive a noisy shared machine better than absolute numbers.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace uring::bench {

class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  // baselines: group -> the variant the others are compared with.
  explicit ratio_reporter(std::map<std::string, std::string> baselines);
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  struct figure {
    std::string group, variant, arg;
    double items_per_second;
  };
  std::map<std::string, std::string> baselines_;
  std::vector<figure> figures_;
};

}  // namespace uring::bench
