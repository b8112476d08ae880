// Tests for tools/bench/stats.cc: nearest-rank percentiles, checked on sample sets whose
// answers can be worked out by hand.
#include "tools/bench/stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace homarpc::bench {
namespace {

// 1, 2, ..., n in a scrambled order, so Summarize has to sort.
std::vector<int64_t> OneToN(int64_t n) {
  std::vector<int64_t> samples;
  for (int64_t i = 0; i < n; ++i) samples.push_back((i * 7919) % n + 1);
  return samples;
}

TEST(Stats, EmptyInputGivesAllZeroSummary) {
  LatencySummary summary = Summarize({});
  EXPECT_EQ(summary.count, 0u);
  EXPECT_EQ(summary.p50_ns, 0);
  EXPECT_EQ(summary.p999_ns, 0);
}

TEST(Stats, SingleSampleIsEveryPercentile) {
  LatencySummary summary = Summarize({42});
  EXPECT_EQ(summary.count, 1u);
  EXPECT_EQ(summary.min_ns, 42);
  EXPECT_EQ(summary.p50_ns, 42);
  EXPECT_EQ(summary.p99_ns, 42);
  EXPECT_EQ(summary.p999_ns, 42);
  EXPECT_EQ(summary.max_ns, 42);
}

TEST(Stats, ThousandSamplesUseNearestRankNotInterpolation) {
  // 1..1000: p50 is rank ceil(500) = 500, p99 rank 990, p99.9 rank 999 (not 1000: the rank is
  // computed in integers, where floating point 0.999 * 1000 could round up).
  LatencySummary summary = Summarize(OneToN(1000));
  EXPECT_EQ(summary.count, 1000u);
  EXPECT_EQ(summary.min_ns, 1);
  EXPECT_EQ(summary.p50_ns, 500);
  EXPECT_EQ(summary.p99_ns, 990);
  EXPECT_EQ(summary.p999_ns, 999);
  EXPECT_EQ(summary.max_ns, 1000);
  EXPECT_DOUBLE_EQ(summary.mean_ns, 500.5);
}

TEST(Stats, FewSamplesRoundTheRankUp) {
  // 1..10: p50 rank ceil(5) = 5; p99 rank ceil(9.9) = 10; p99.9 rank ceil(9.99) = 10.
  LatencySummary summary = Summarize(OneToN(10));
  EXPECT_EQ(summary.p50_ns, 5);
  EXPECT_EQ(summary.p99_ns, 10);
  EXPECT_EQ(summary.p999_ns, 10);
  // 1..3: p50 rank ceil(1.5) = 2.
  EXPECT_EQ(Summarize(OneToN(3)).p50_ns, 2);
}

TEST(Stats, TailSamplesShowUpInTheTailOnly) {
  // 990 fast RPCs and 10 slow ones: the median stays fast, p99 is the last fast sample (rank
  // 990), p99.9 lands among the slow ones.
  std::vector<int64_t> samples(990, 5);
  samples.insert(samples.end(), 10, 1000);
  LatencySummary summary = Summarize(samples);
  EXPECT_EQ(summary.p50_ns, 5);
  EXPECT_EQ(summary.p99_ns, 5);
  EXPECT_EQ(summary.p999_ns, 1000);
}

TEST(Stats, StalledCountsSamplesAtLeastTheMarginAboveTheMedian) {
  // p50 = 10 us. 20 us above it is 30 us: 29.999 us is not stalled, 30 us and more are.
  std::vector<int64_t> samples(95, 10'000);
  samples.push_back(29'999);
  samples.push_back(30'000);
  samples.push_back(45'000);
  samples.push_back(45'000);
  samples.push_back(200'000);
  LatencySummary summary = Summarize(samples);
  EXPECT_EQ(summary.p50_ns, 10'000);
  EXPECT_EQ(summary.stalled, 4u);
  EXPECT_EQ(Summarize(std::vector<int64_t>(10, 5)).stalled, 0u);
  EXPECT_EQ(Summarize({}).stalled, 0u);
}

TEST(Stats, NearestRankOnSortedSpan) {
  std::vector<int64_t> sorted = {10, 20, 30, 40};
  EXPECT_EQ(NearestRank(sorted, 1), 10);        // the smallest percentile is the minimum
  EXPECT_EQ(NearestRank(sorted, 250000), 10);   // rank ceil(1.0) = 1
  EXPECT_EQ(NearestRank(sorted, 250001), 20);   // rank ceil(1.000004) = 2
  EXPECT_EQ(NearestRank(sorted, 1000000), 40);  // p100 is the maximum
}

}  // namespace
}  // namespace homarpc::bench
