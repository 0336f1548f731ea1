#include "ratio_reporter.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace uring::bench {

ratio_reporter::ratio_reporter(std::map<std::string, std::string> baselines)
    : ConsoleReporter(::isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular),
      baselines_(std::move(baselines)) {}

void ratio_reporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    if (run.error_occurred) continue;
    // With --benchmark_repetitions, keep only the median; otherwise the single run.
    bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
    if (!median && (run.run_type != Run::RT_Iteration || run.repetitions > 1)) continue;
    auto it = run.counters.find("items_per_second");
    if (it == run.counters.end()) continue;
    std::string name =
        run.run_name.function_name + (run.run_name.args.empty() ? "" : "/" + run.run_name.args);
    auto first = name.find('/'), second = name.find('/', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    auto third = name.find('/', second + 1);
    std::string arg =
        name.substr(second + 1, third == std::string::npos ? std::string::npos : third - second - 1);
    // Thread counts are variants of their own (compared with the baseline at the same count).
    if (!run.run_name.threads.empty()) arg += "," + run.run_name.threads;
    figures_.push_back(
        {name.substr(0, first), name.substr(first + 1, second - first - 1), arg, it->second.value});
  }
}

void ratio_reporter::Finalize() {
  ConsoleReporter::Finalize();
  std::sort(figures_.begin(), figures_.end(), [](const figure& a, const figure& b) {
    auto num = [](const std::string& s) { return std::atol(s.c_str()); };
    return std::make_tuple(a.group, num(a.arg), a.variant) < std::make_tuple(b.group, num(b.arg), b.variant);
  });
  std::printf("\n%-12s %-26s %-16s %14s %8s\n", "group", "variant", "arg", "M items/s", "ratio");
  for (const figure& f : figures_) {
    double base = 0;
    auto b = baselines_.find(f.group);
    for (const figure& g : figures_) {
      if (b != baselines_.end() && g.group == f.group && g.arg == f.arg && g.variant == b->second) {
        base = g.items_per_second;
      }
    }
    std::printf("%-12s %-26s %-16s %14.3f", f.group.c_str(), f.variant.c_str(), f.arg.c_str(),
                f.items_per_second / 1e6);
    if (base > 0) {
      std::printf(" %7.2fx\n", f.items_per_second / base);
    } else {
      std::printf(" %8s\n", "-");
    }
  }
  if (!baselines_.empty()) {
    std::printf("ratio = items/s over the baseline of the group:");
    for (const auto& [group, variant] : baselines_) std::printf(" %s=%s", group.c_str(), variant.c_str());
    std::printf("\n");
  }
}

}  // namespace uring::bench
