// uring::metrics on every backend: the Prometheus text parses (a strict parser of the exposition format
// here), every family has its HELP and TYPE before its samples, and each number is the executor's own.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "test_util.hpp"

namespace {

using uring::op_kind;
using uring::task;

class Metrics : public uring::test::backend_test {};

// A histogram family's sample: _bucket (with le; bounds rising and counts never falling within a series),
// _sum, or _count (equal to the series' +Inf bucket, which comes last).
void check_histogram_sample(const std::string& name, const std::string& family, const std::string& labels,
                            double value, std::map<std::string, std::pair<double, double>>& buckets,
                            const std::string& line) {
  static const std::regex bucket_labels(R"re(\{(.*),le="([^"]+)"\})re");
  if (name == family + "_bucket") {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(labels, m, bucket_labels)) << "a bucket without le: " << line;
    const double le = m[2] == "+Inf" ? HUGE_VAL : std::stod(m[2]);
    auto [last_le, last_count] = buckets.try_emplace(m[1], -HUGE_VAL, 0.0).first->second;
    EXPECT_GT(le, last_le) << "bucket bounds fall: " << line;
    EXPECT_GE(value, last_count) << "bucket counts fall: " << line;
    buckets[m[1]] = {le, value};
  } else if (name == family + "_count") {
    const auto it = buckets.find(labels.substr(1, labels.size() - 2));
    ASSERT_NE(it, buckets.end()) << "a count before its buckets: " << line;
    EXPECT_EQ(it->second.first, HUGE_VAL) << "no +Inf bucket: " << line;
    EXPECT_EQ(it->second.second, value) << "_count is not the +Inf bucket: " << line;
  } else {
    EXPECT_EQ(name, family + "_sum") << "a sample outside its family: " << line;
  }
}

// Samples by their full name with labels ("uring_cqes_total{executor=\"0\"}"); fails the test on any line
// the exposition format (0.0.4) does not allow, or a sample before its family's TYPE.
std::map<std::string, double> parse(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  static const std::regex type(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (-?[0-9.eE+]+|NaN|[+-]Inf))");
  std::map<std::string, double> out;
  std::set<std::string> typed, helped, closed;
  std::string current;
  bool histogram = false;
  std::map<std::string, std::pair<double, double>> buckets;  // a histogram's series: last le and count
  std::istringstream in(text);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the last line ends with a newline";
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      EXPECT_TRUE(helped.insert(m[1]).second) << "HELP twice: " << line;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_TRUE(typed.insert(m[1]).second) << "TYPE twice: " << line;
      EXPECT_TRUE(helped.contains(m[1])) << "TYPE before HELP: " << line;
      if (!current.empty()) closed.insert(current);
      current = m[1];
      histogram = m[2] == "histogram";
      buckets.clear();
      EXPECT_FALSE(closed.contains(current)) << "a family's samples split: " << line;
    } else if (std::regex_match(line, m, sample)) {
      const std::string name = m[1];
      if (histogram) {
        check_histogram_sample(name, current, m[2], std::stod(m[3]), buckets, line);
      } else {
        EXPECT_EQ(name, current) << "a sample outside its family: " << line;
      }
      if (m[1].str().ends_with("_total")) {
        EXPECT_EQ(current.substr(current.size() - 6), "_total");
      }
      EXPECT_TRUE(out.emplace(m[1].str() + m[2].str(), std::stod(m[3])).second) << "sample twice: " << line;
    } else {
      ADD_FAILURE() << "not Prometheus text: '" << line << "'";
    }
  }
  return out;
}

TEST_P(Metrics, RenderedFiguresParseAndAreTheExecutorsOwn) {
  uring::test::pipe_pair p;
  uring::executor ex(options());
  const auto one = ex.run([](int rfd, int wfd) -> task<uring::metrics::executor_sample> {
    for (int i = 0; i < 10; ++i) co_await uring::nop();
    char buf[4];
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(co_await uring::write(wfd, std::span<const char>("abc", 3)), 3u);
      EXPECT_EQ(co_await uring::read(rfd, std::span(buf, 3)), 3u);
    }
    co_return uring::metrics::sample_of(*uring::executor::current());
  }(p.read_end.get(), p.write_end.get()));
  const std::string text = uring::metrics::render(std::span(&one, 1));
  const auto samples = parse(text);
  ASSERT_FALSE(samples.empty()) << text;
  EXPECT_EQ(samples.at(R"(uring_operations_started_total{executor="0",kind="nop"})"), 10.0) << text;
  EXPECT_EQ(samples.at(R"(uring_operations_started_total{executor="0",kind="write"})"), 3.0) << text;
  // Reads include the executor's own wake-up reads (executor_stats::ops).
  EXPECT_GE(samples.at(R"(uring_operations_started_total{executor="0",kind="read"})"), 3.0) << text;
  EXPECT_EQ(samples.at(R"(uring_operations_in_flight{executor="0"})"), static_cast<double>(one.in_flight));
  // Every figure is the sampled one, and every kind started is there.
  const auto& st = one.stats;
  EXPECT_EQ(samples.at(R"(uring_enters_total{executor="0"})"), static_cast<double>(st.enters));
  EXPECT_EQ(samples.at(R"(uring_waits_total{executor="0"})"), static_cast<double>(st.waits));
  EXPECT_EQ(samples.at(R"(uring_sqes_total{executor="0"})"), static_cast<double>(st.sqes));
  EXPECT_EQ(samples.at(R"(uring_cqes_total{executor="0"})"), static_cast<double>(st.cqes));
  EXPECT_EQ(samples.at(R"(uring_cancels_total{executor="0"})"), static_cast<double>(st.cancels));
  EXPECT_GE(st.cqes, 16u);
  std::size_t kinds = 0;
  for (std::size_t k = 0; k < st.ops.size(); ++k) {
    if (st.ops[k] == 0) continue;
    ++kinds;
    const std::string key = std::string(R"(uring_operations_started_total{executor="0",kind=")") +
                            uring::to_string(op_kind(k)) + "\"}";
    EXPECT_EQ(samples.at(key), static_cast<double>(st.ops[k])) << key;
  }
  EXPECT_EQ(
      std::count_if(samples.begin(), samples.end(),
                    [](const auto& s) { return s.first.starts_with("uring_operations_started_total"); }),
      static_cast<std::ptrdiff_t>(kinds));
}

TEST(MetricsText, EachExecutorIsLabelledByItsIndex) {
  uring::metrics::executor_sample two[2];
  two[0].stats.cqes = 5;
  two[1].stats.cqes = 7;
  two[1].stats.ops[static_cast<std::size_t>(op_kind::recv)] = 2;
  two[1].in_flight = 3;
  const auto samples = parse(uring::metrics::render(two));
  EXPECT_EQ(samples.at(R"(uring_cqes_total{executor="0"})"), 5.0);
  EXPECT_EQ(samples.at(R"(uring_cqes_total{executor="1"})"), 7.0);
  EXPECT_EQ(samples.at(R"(uring_operations_started_total{executor="1",kind="recv"})"), 2.0);
  EXPECT_FALSE(samples.contains(R"(uring_operations_started_total{executor="0",kind="recv"})"));
  EXPECT_EQ(samples.at(R"(uring_operations_in_flight{executor="1"})"), 3.0);
}

TEST_P(Metrics, HistogramsAreRenderedWithTheExecutorsCounts) {
  uring::executor_options o = options();
  o.histograms = true;
  uring::executor ex(o);
  const auto one = ex.run([]() -> task<uring::metrics::executor_sample> {
    for (int i = 0; i < 10; ++i) co_await uring::nop();
    co_return uring::metrics::sample_of(*uring::executor::current());
  }());
  const std::string text = uring::metrics::render(std::span(&one, 1));
  const auto samples = parse(text);
  EXPECT_EQ(samples.at(R"(uring_operation_latency_microseconds_count{executor="0",kind="nop"})"), 10.0)
      << text;
  EXPECT_EQ(samples.at(R"(uring_operation_latency_microseconds_bucket{executor="0",kind="nop",le="+Inf"})"),
            10.0);
  const auto& h = one.histograms;
  EXPECT_EQ(samples.at(R"(uring_cqes_per_reap_count{executor="0"})"),
            static_cast<double>(h.cqes_per_reap.count()));
  EXPECT_EQ(samples.at(R"(uring_cqes_per_reap_sum{executor="0"})"),
            static_cast<double>(h.cqes_per_reap.sum()));
  EXPECT_EQ(samples.at(R"(uring_sqes_per_submit_count{executor="0"})"),
            static_cast<double>(h.sqes_per_submit.count()));
  EXPECT_FALSE(samples.contains(R"(uring_operation_latency_microseconds_count{executor="0",kind="send"})"));
}

TEST(MetricsText, HistogramBucketsAreCumulativeAtPowersOfTwoLessOne) {
  uring::metrics::executor_sample one;
  for (std::uint64_t v : {0, 1, 2, 3, 5, 100}) one.histograms.asleep_us.record(v);
  const auto samples = parse(uring::metrics::render(std::span(&one, 1)));
  const auto bucket = [&](const char* le) {
    return samples.at(std::string(R"(uring_asleep_microseconds_bucket{executor="0",le=")") + le + "\"}");
  };
  EXPECT_EQ(bucket("0"), 1.0);
  EXPECT_EQ(bucket("1"), 2.0);
  EXPECT_EQ(bucket("3"), 4.0);
  EXPECT_EQ(bucket("7"), 5.0);
  EXPECT_EQ(bucket("63"), 5.0);
  EXPECT_EQ(bucket("127"), 6.0);  // the first bound that holds every value: the last before +Inf
  EXPECT_FALSE(samples.contains(R"(uring_asleep_microseconds_bucket{executor="0",le="255"})"));
  EXPECT_EQ(bucket("+Inf"), 6.0);
  EXPECT_EQ(samples.at(R"(uring_asleep_microseconds_sum{executor="0"})"), 111.0);
  EXPECT_EQ(samples.at(R"(uring_asleep_microseconds_count{executor="0"})"), 6.0);
}

INSTANTIATE_BACKENDS(Metrics);

}  // namespace
