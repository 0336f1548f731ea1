// uring::metrics on every backend: the Prometheus text parses (a strict parser of the exposition format
// here), every family has its HELP and TYPE before its samples, and each number is the executor's own.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
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
      EXPECT_FALSE(closed.contains(current)) << "a family's samples split: " << line;
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_EQ(m[1].str(), current) << "a sample outside its family: " << line;
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

INSTANTIATE_BACKENDS(Metrics);

}  // namespace
