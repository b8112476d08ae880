// Tests for tools/bench/workload.cc: CDF parsing and its errors, drawing sizes, the built-in
// W1-W5 distributions against their published statistics, offered load, size buckets, and
// slowdown — on hand-made inputs whose answers can be worked out by hand.
#include "tools/bench/workload.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Workload MustParse(absl::string_view text) {
  absl::StatusOr<Workload> workload = Workload::Parse("hand", text);
  EXPECT_TRUE(workload.ok()) << workload.status();
  return workload.ok() ? *std::move(workload) : Workload();
}

// The parse error for `text`; fails the test if it parses.
absl::Status ParseError(absl::string_view text) {
  absl::StatusOr<Workload> workload = Workload::Parse("hand", text);
  EXPECT_FALSE(workload.ok()) << "parsed: " << text;
  if (workload.ok()) return absl::OkStatus();
  EXPECT_EQ(workload.status().code(), absl::StatusCode::kInvalidArgument);
  return workload.status();
}

// 10 B: 25%, 20 B: 25%, 30 B: never (its fraction repeats 20 B's), 40 B: 50%.
constexpr absl::string_view kHand =
    "# a hand-made CDF\n"
    "\n"
    "10 0.25\n"
    "20 0.5\n"
    "30 0.5\n"
    "  40\t1.0  \n";

TEST(Workload, ParseKeepsPointsAndSkipsCommentsAndBlankLines) {
  Workload workload = MustParse(kHand);
  EXPECT_EQ(workload.name(), "hand");
  ASSERT_EQ(workload.points().size(), 4u);
  EXPECT_EQ(workload.points()[0].length, 10u);
  EXPECT_DOUBLE_EQ(workload.points()[0].fraction, 0.25);
  EXPECT_EQ(workload.points()[3].length, 40u);
  EXPECT_DOUBLE_EQ(workload.points()[3].fraction, 1.0);
}

TEST(Workload, ParseRejectsMalformedLinesNamingTheLine) {
  // Line 3 in every case: a comment and a good point come first.
  for (absl::string_view bad : {"10", "10 0.5 7", "ten 0.5", "10 half", "-10 0.5", "10.5 0.5",
                                "10,0.5", "99999999999999999999 0.5"}) {
    const absl::Status status = ParseError(absl::StrCat("# header\n5 0.1\n", bad, "\n20 1\n"));
    EXPECT_THAT(status.message(), HasSubstr("line 3: malformed line")) << bad;
    EXPECT_THAT(status.message(), HasSubstr("workload hand")) << bad;
  }
}

TEST(Workload, ParseRejectsZeroLength) {
  EXPECT_THAT(ParseError("0 0.5\n10 1\n").message(), HasSubstr("line 1: length 0"));
}

TEST(Workload, ParseRejectsLengthsNotStrictlyIncreasing) {
  EXPECT_THAT(ParseError("10 0.2\n10 0.5\n20 1\n").message(),
              HasSubstr("line 2: length 10 is not above the previous 10"));
  EXPECT_THAT(ParseError("# c\n10 0.2\n20 0.5\n15 1\n").message(),
              HasSubstr("line 4: length 15 is not above the previous 20"));
}

TEST(Workload, ParseRejectsFractionOutsideUnitInterval) {
  EXPECT_THAT(ParseError("10 0.5\n20 1.5\n").message(),
              HasSubstr("line 2: fraction 1.5 is outside [0, 1]"));
  EXPECT_THAT(ParseError("10 -0.1\n20 1\n").message(), HasSubstr("line 1: fraction -0.1"));
  EXPECT_THAT(ParseError("10 nan\n20 1\n").message(), HasSubstr("line 1: fraction nan"));
}

TEST(Workload, ParseRejectsDecreasingFraction) {
  EXPECT_THAT(ParseError("10 0.5\n20 0.4\n30 1\n").message(),
              HasSubstr("line 2: fraction 0.4 is below the previous 0.5"));
}

TEST(Workload, ParseRejectsLastFractionNotOne) {
  EXPECT_THAT(ParseError("10 0.5\n20 0.9\n# trailing comment\n").message(),
              HasSubstr("line 2: the last fraction is 0.9, not 1"));
  EXPECT_FALSE(Workload::Parse("hand", "10 0.5\n20 0.999998\n").ok());
}

TEST(Workload, ParseAcceptsLastFractionWithinOneMillionthAndMakesItOne) {
  // The last step then covers every draw up to 1: u = 0.9999999 still finds 20.
  Workload workload = MustParse("10 0.5\n20 0.9999995\n");
  EXPECT_DOUBLE_EQ(workload.points().back().fraction, 1.0);
  EXPECT_EQ(workload.SizeAt(0.9999999), 20u);
  EXPECT_DOUBLE_EQ(workload.MeanBytes(), 15.0);
}

TEST(Workload, ParseRejectsTextWithoutPoints) {
  EXPECT_THAT(ParseError("").message(), HasSubstr("no points"));
  EXPECT_THAT(ParseError("# only a comment\n\n   \n").message(), HasSubstr("no points"));
}

TEST(Workload, SizeAtTakesTheFirstLengthWhoseFractionIsAboveTheDraw) {
  Workload workload = MustParse(kHand);
  EXPECT_EQ(workload.SizeAt(0.0), 10u);
  EXPECT_EQ(workload.SizeAt(std::nextafter(0.25, 0.0)), 10u);  // just below the step
  EXPECT_EQ(workload.SizeAt(0.25), 20u);                       // at it: 10's fraction is not > u
  EXPECT_EQ(workload.SizeAt(std::nextafter(0.5, 0.0)), 20u);
  EXPECT_EQ(workload.SizeAt(0.5), 40u);  // 30 has no probability of its own
  EXPECT_EQ(workload.SizeAt(std::nextafter(1.0, 0.0)), 40u);
}

TEST(Workload, MeanMaxAndQuantileOfHandCdf) {
  Workload workload = MustParse(kHand);
  // 10 * 0.25 + 20 * 0.25 + 30 * 0 + 40 * 0.5.
  EXPECT_DOUBLE_EQ(workload.MeanBytes(), 27.5);
  EXPECT_EQ(workload.MaxBytes(), 40u);
  EXPECT_EQ(workload.Quantile(0.1), 10u);
  EXPECT_EQ(workload.Quantile(0.25), 10u);  // the first length whose fraction is >= q
  EXPECT_EQ(workload.Quantile(0.26), 20u);
  EXPECT_EQ(workload.Quantile(0.5), 20u);
  EXPECT_EQ(workload.Quantile(0.51), 40u);
  EXPECT_EQ(workload.Quantile(1.0), 40u);
}

TEST(Workload, BuiltInNamesAreCaseInsensitive) {
  EXPECT_THAT(Workload::BuiltInNames(), ElementsAre("w1", "w2", "w3", "w4", "w5"));
  absl::StatusOr<Workload> w3 = Workload::BuiltIn("W3");
  ASSERT_TRUE(w3.ok()) << w3.status();
  EXPECT_EQ(w3->name(), "w3");
  absl::StatusOr<Workload> unknown = Workload::BuiltIn("w6");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("unknown workload 'w6' (known: w1, w2, w3, w4, w5)"));
}

// The published statistics (../shared/workloads/README.md, copied into
// tools/bench/workloads/README.md): means to within 3%, medians and maxima exactly.
TEST(Workload, BuiltInsMatchThePublishedStatistics) {
  struct Expected {
    const char* name;
    double mean;
    uint64_t p50;
    double p99;
    uint64_t max;
  };
  const Expected expected[] = {
      {"w1", 189, 27, 1.9e3, 100000},       {"w2", 442, 269, 3.2e3, 3529904},
      {"w3", 2.9e3, 268, 31e3, 15158197},   {"w4", 128e3, 662, 3.4e6, 10000000},
      {"w5", 2.6e6, 72030, 27e6, 29400000},
  };
  for (const Expected& want : expected) {
    absl::StatusOr<Workload> workload = Workload::BuiltIn(want.name);
    ASSERT_TRUE(workload.ok()) << workload.status();
    EXPECT_NEAR(workload->MeanBytes(), want.mean, 0.03 * want.mean) << want.name;
    EXPECT_EQ(workload->Quantile(0.5), want.p50) << want.name;
    EXPECT_NEAR(static_cast<double>(workload->Quantile(0.99)), want.p99, 0.03 * want.p99)
        << want.name;
    EXPECT_EQ(workload->MaxBytes(), want.max) << want.name;
  }
}

// Mean and standard deviation of a workload's sizes, from its CDF.
std::pair<double, double> MeanAndStddev(const Workload& workload) {
  double second_moment = 0;
  double previous = 0;
  for (const CdfPoint& point : workload.points()) {
    const double length = static_cast<double>(point.length);
    second_moment += length * length * (point.fraction - previous);
    previous = point.fraction;
  }
  const double mean = workload.MeanBytes();
  return {mean, std::sqrt(second_moment - mean * mean)};
}

TEST(WorkloadSizes, DrawsFollowTheCdf) {
  absl::StatusOr<Workload> w3 = Workload::BuiltIn("w3");
  ASSERT_TRUE(w3.ok()) << w3.status();
  auto workload = std::make_shared<const Workload>(*w3);
  WorkloadSizes sizes(workload, 1);
  constexpr int kDraws = 200000;
  std::vector<uint64_t> draws;
  double total = 0;
  for (int i = 0; i < kDraws; ++i) {
    draws.push_back(sizes.Next());
    total += static_cast<double>(draws.back());
  }
  // W3's tail (a few draws in a million reach 15 MB) gives its sample mean a standard error of
  // about 5% at 200k draws, so "within a few %" would be luck; 4 standard errors is a real
  // bound, and the CDF check below is the sharp one.
  const auto [mean, stddev] = MeanAndStddev(*workload);
  const double standard_error = stddev / std::sqrt(static_cast<double>(kDraws));
  EXPECT_NEAR(total / kDraws, mean, 4 * standard_error);
  // At every decile length, the share of draws at or below it matches the CDF's fraction to
  // 0.005 (its binomial standard error is at most 0.0012).
  for (const uint64_t upper : DecileBucketUppers(*workload)) {
    int at_or_below = 0;
    for (uint64_t draw : draws) at_or_below += draw <= upper ? 1 : 0;
    double fraction = 0;
    for (const CdfPoint& point : workload->points()) {
      if (point.length <= upper) fraction = point.fraction;
    }
    EXPECT_NEAR(static_cast<double>(at_or_below) / kDraws, fraction, 0.005) << upper;
  }
  // Every draw is a length of the CDF.
  for (int i = 0; i < 1000; ++i) {
    bool found = false;
    for (const CdfPoint& point : workload->points()) found |= point.length == draws[i];
    EXPECT_TRUE(found) << draws[i];
  }
}

TEST(WorkloadSizes, LightTailedWorkloadsHitTheirMeanClosely) {
  // W1 and W5 have standard errors near 0.5% at 200k draws: within 3% is about 6 of them.
  for (const char* name : {"w1", "w5"}) {
    absl::StatusOr<Workload> workload = Workload::BuiltIn(name);
    ASSERT_TRUE(workload.ok()) << workload.status();
    WorkloadSizes sizes(std::make_shared<const Workload>(*workload), 42);
    double total = 0;
    for (int i = 0; i < 200000; ++i) total += static_cast<double>(sizes.Next());
    EXPECT_NEAR(total / 200000, workload->MeanBytes(), 0.03 * workload->MeanBytes()) << name;
  }
}

TEST(WorkloadSizes, SameSeedSameSequenceOtherSeedOtherSequence) {
  auto workload = std::make_shared<const Workload>(*Workload::BuiltIn("w3"));
  WorkloadSizes a(workload, 7);
  WorkloadSizes b(workload, 7);
  WorkloadSizes c(workload, 8);
  std::vector<uint64_t> from_a, from_b, from_c;
  for (int i = 0; i < 1000; ++i) {
    from_a.push_back(a.Next());
    from_b.push_back(b.Next());
    from_c.push_back(c.Next());
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_NE(from_a, from_c);
}

TEST(MakeSizeSource, FixedWithoutWorkloadDrawnWithOne) {
  StreamSpec fixed;
  fixed.request_bytes = 1234;
  absl::StatusOr<std::unique_ptr<SizeSource>> source = MakeSizeSource(fixed);
  ASSERT_TRUE(source.ok()) << source.status();
  for (int i = 0; i < 10; ++i) EXPECT_EQ((*source)->Next(), 1234u);

  StreamSpec drawn;
  drawn.workload = "W4";
  drawn.seed = 5;
  source = MakeSizeSource(drawn);
  ASSERT_TRUE(source.ok()) << source.status();
  WorkloadSizes reference(std::make_shared<const Workload>(*Workload::BuiltIn("w4")), 5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*source)->Next(), reference.Next());

  StreamSpec unknown;
  unknown.workload = "w9";
  EXPECT_EQ(MakeSizeSource(unknown).status().code(), absl::StatusCode::kNotFound);
}

TEST(PoissonRatePerClient, SplitsTheLinkShareOverClients) {
  Workload workload = MustParse("100 0.5\n300 1\n");  // mean 200 B
  // 50% of 1000 Mbit/s = 62.5 MB/s = 312500 calls/s of 200 B, over 4 clients.
  EXPECT_DOUBLE_EQ(PoissonRatePerClient(workload, 0.5, 1000, 4), 78125.0);
  EXPECT_DOUBLE_EQ(PoissonRatePerClient(workload, 0.8, 1000, 1), 500000.0);
  EXPECT_DOUBLE_EQ(PoissonRatePerClient(workload, 1.0, 100, 2), 31250.0);
}

TEST(DecileBucketUppers, MergesDuplicatesAndEndsAtTheLargestLength) {
  // Deciles 0.1..0.3 land on 1, 0.4..0.5 on 2, 0.6..0.9 on 100, 1.0 on 200.
  EXPECT_THAT(DecileBucketUppers(MustParse("1 0.35\n2 0.5\n100 0.95\n200 1\n")),
              ElementsAre(1u, 2u, 100u, 200u));
  // A decile exactly on a step: 0.3 belongs to 2 (the first fraction >= 0.3), so 2 is an upper
  // of its own (computed as 0.1 * 3 = 0.30000000000000004, the decile would skip to 3).
  EXPECT_THAT(DecileBucketUppers(MustParse("1 0.25\n2 0.3\n3 1\n")), ElementsAre(1u, 2u, 3u));
  // Trailing lengths without probability: the last bucket still reaches the largest one.
  EXPECT_THAT(DecileBucketUppers(MustParse("5 0.5\n10 1\n20 1\n")), ElementsAre(5u, 10u, 20u));
  // One length: one bucket.
  EXPECT_THAT(DecileBucketUppers(MustParse("64 1\n")), ElementsAre(64u));
}

TEST(DecileBucketUppers, BuiltInsHaveStrictlyIncreasingBucketsEndingAtMax) {
  for (const std::string& name : Workload::BuiltInNames()) {
    Workload workload = *Workload::BuiltIn(name);
    const std::vector<uint64_t> uppers = DecileBucketUppers(workload);
    ASSERT_FALSE(uppers.empty()) << name;
    EXPECT_LE(uppers.size(), 10u) << name;
    for (size_t i = 1; i < uppers.size(); ++i) EXPECT_LT(uppers[i - 1], uppers[i]) << name;
    EXPECT_EQ(uppers.back(), workload.MaxBytes()) << name;
  }
  // W3's deciles (checked by hand against w3.cdf).
  EXPECT_THAT(DecileBucketUppers(*Workload::BuiltIn("w3")),
              ElementsAre(36u, 77u, 110u, 158u, 268u, 313u, 402u, 573u, 1755u, 15158197u));
}

TEST(CalibrationSizes, AddTheSmallestLengthToTheBucketUppers) {
  EXPECT_THAT(CalibrationSizes(MustParse("8 0.05\n16 0.5\n64 1\n")), ElementsAre(8u, 16u, 64u));
  // The smallest length is already the first upper: no duplicate.
  EXPECT_THAT(CalibrationSizes(MustParse("8 0.5\n64 1\n")), ElementsAre(8u, 64u));
  EXPECT_THAT(
      CalibrationSizes(*Workload::BuiltIn("w4")),
      ElementsAre(53u, 315u, 376u, 502u, 561u, 662u, 960u, 6387u, 49408u, 120373u, 10000000u));
}

TEST(UnloadedLatency, InterpolatesLinearlyAndClampsAtBothEnds) {
  // Unsorted, with a later duplicate of size 100 that must be ignored.
  UnloadedLatency unloaded({{1000, 5000}, {100, 1000}, {200, 3000}, {100, 99999}});
  EXPECT_EQ(unloaded.Interpolate(100), 1000);
  EXPECT_EQ(unloaded.Interpolate(125), 1500);
  EXPECT_EQ(unloaded.Interpolate(150), 2000);
  EXPECT_EQ(unloaded.Interpolate(101), 1020);
  EXPECT_EQ(unloaded.Interpolate(200), 3000);
  EXPECT_EQ(unloaded.Interpolate(600), 4000);
  EXPECT_EQ(unloaded.Interpolate(1000), 5000);
  EXPECT_EQ(unloaded.Interpolate(1), 1000);  // clamped below
  EXPECT_EQ(unloaded.Interpolate(0), 1000);
  EXPECT_EQ(unloaded.Interpolate(1 << 30), 5000);  // clamped above
  // Rounded to the nearest nanosecond.
  UnloadedLatency thirds({{0, 0}, {3, 1}});
  EXPECT_EQ(thirds.Interpolate(1), 0);
  EXPECT_EQ(thirds.Interpolate(2), 1);
  // One point answers every size.
  UnloadedLatency single({{64, 7000}});
  EXPECT_EQ(single.Interpolate(1), 7000);
  EXPECT_EQ(single.Interpolate(1 << 20), 7000);
}

CallRecord Call(uint64_t request_bytes, int64_t latency_ns) {
  CallRecord call;
  call.request_bytes = request_bytes;
  call.latency_ns = latency_ns;
  call.response_bytes = 64;
  return call;
}

TEST(SlowdownByBucket, NearestRankPercentilesPerBucket) {
  // Unloaded latency 10 ns per byte between 100 B and 1000 B, clamped outside.
  UnloadedLatency unloaded({{100, 1000}, {1000, 10000}});
  const std::vector<uint64_t> uppers = {100, 1000, 10000};
  std::vector<CallRecord> calls;
  // Bucket (0, 100]: 100 calls of 50 B (unloaded 1000 ns, clamped) with latencies 1..100 us in
  // a scrambled order: slowdowns 1..100.
  for (int i = 0; i < 100; ++i) calls.push_back(Call(50, ((i * 37) % 100 + 1) * 1000));
  // Bucket (100, 1000]: 500 B (unloaded 5000 ns) at 5, 10 and 50 us: slowdowns 1, 2, 10; and
  // 1000 B exactly (the upper bound belongs to the bucket; unloaded 10000 ns) at 15 us: 1.5.
  calls.push_back(Call(500, 50000));
  calls.push_back(Call(500, 5000));
  calls.push_back(Call(1000, 15000));
  calls.push_back(Call(500, 10000));
  // Bucket (1000, 10000]: nothing. A call above the last upper counts nowhere.
  calls.push_back(Call(20000, 1));

  const std::vector<BucketSlowdown> buckets = SlowdownByBucket(calls, uppers, unloaded);
  ASSERT_EQ(buckets.size(), 3u);

  EXPECT_EQ(buckets[0].lower_exclusive, 0u);
  EXPECT_EQ(buckets[0].upper_inclusive, 100u);
  EXPECT_EQ(buckets[0].calls, 100u);
  EXPECT_DOUBLE_EQ(buckets[0].p50, 50.0);  // rank 50 of 100
  EXPECT_DOUBLE_EQ(buckets[0].p99, 99.0);  // rank 99
  EXPECT_EQ(buckets[0].p50_latency_ns, 50000);
  EXPECT_EQ(buckets[0].p99_latency_ns, 99000);

  // Slowdowns 1, 1.5, 2, 10: p50 rank 2 = 1.5, p99 rank 4 = 10. Latencies 5, 10, 15, 50 us:
  // p50 10 us — a different call from the median slowdown's, as it should be.
  EXPECT_EQ(buckets[1].lower_exclusive, 100u);
  EXPECT_EQ(buckets[1].upper_inclusive, 1000u);
  EXPECT_EQ(buckets[1].calls, 4u);
  EXPECT_DOUBLE_EQ(buckets[1].p50, 1.5);
  EXPECT_DOUBLE_EQ(buckets[1].p99, 10.0);
  EXPECT_EQ(buckets[1].p50_latency_ns, 10000);
  EXPECT_EQ(buckets[1].p99_latency_ns, 50000);

  EXPECT_EQ(buckets[2].lower_exclusive, 1000u);
  EXPECT_EQ(buckets[2].upper_inclusive, 10000u);
  EXPECT_EQ(buckets[2].calls, 0u);
  EXPECT_EQ(buckets[2].p50, 0);
  EXPECT_EQ(buckets[2].p99, 0);
  EXPECT_EQ(buckets[2].p50_latency_ns, 0);
  EXPECT_EQ(buckets[2].p99_latency_ns, 0);
}

TEST(SlowdownByBucket, SlowdownBelowOneIsKept) {
  // A loaded call faster than the unloaded median: 1000 ns against 1500 ns (150 B between the
  // 100 B and 200 B points) is a slowdown of 2/3, not raised to 1.
  UnloadedLatency unloaded({{100, 1000}, {200, 2000}});
  const std::vector<uint64_t> uppers = {1000};
  const std::vector<CallRecord> calls = {Call(150, 1000)};
  const std::vector<BucketSlowdown> buckets = SlowdownByBucket(calls, uppers, unloaded);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].calls, 1u);
  EXPECT_DOUBLE_EQ(buckets[0].p50, 1000.0 / 1500.0);
  EXPECT_DOUBLE_EQ(buckets[0].p99, 1000.0 / 1500.0);
}

TEST(SlowdownByBucket, NoBucketsNoCalls) {
  UnloadedLatency unloaded({{64, 1000}});
  EXPECT_TRUE(SlowdownByBucket({}, {}, unloaded).empty());
  const std::vector<uint64_t> uppers = {64, 128};
  const std::vector<BucketSlowdown> buckets = SlowdownByBucket({}, uppers, unloaded);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[1].lower_exclusive, 64u);
  EXPECT_EQ(buckets[1].calls, 0u);
}

}  // namespace
}  // namespace homarpc::bench
