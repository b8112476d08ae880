// stats: latency percentiles for homarpc-bench, computed from every sample of a run.
//
// Pure functions over plain vectors, no I/O and no threads, so tests can pin down the exact
// ranks. Percentiles use the nearest-rank definition: the p-th percentile of n sorted samples
// is the sample at 1-based rank ceil(p/100 * n), i.e. the smallest sample such that at least p%
// of all samples are <= it. It is always a value that was actually measured (no interpolation),
// and with fewer than 1000 samples the p99.9 is simply the maximum. Percentiles are given in
// parts per million (p99.9 = 999000) so that the rank is computed in integers: 99.9 has no exact
// double, and ceil(0.999 * 1000) in floating point can land on 1000 instead of 999.
#ifndef HOMARPC_TOOLS_BENCH_STATS_H_
#define HOMARPC_TOOLS_BENCH_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace homarpc::bench {

inline constexpr uint32_t kP50 = 500000;
inline constexpr uint32_t kP99 = 990000;
inline constexpr uint32_t kP999 = 999000;

// A sample at least this much above the p50 counts as stalled (LatencySummary::stalled): on
// the VMs this project runs on, a call the host interrupted (~20-35 us) or that waited for a
// sleeping thread's wake-up. Their share is a finer measure of a tail than p99, which sits
// inside them whenever they are over 1% of the calls. Meaningful for calls of up to
// kStallMaxP50Nanos at p50: a bulk transfer's own spread is larger than the margin.
inline constexpr int64_t kStallMarginNanos = 20'000;
inline constexpr int64_t kStallMaxP50Nanos = 200'000;

// Returns the nearest-rank percentile of `sorted` (ascending). `parts_per_million` must be in
// (0, 1000000]; `sorted` must not be empty (both checked with assertions).
int64_t NearestRank(absl::Span<const int64_t> sorted, uint32_t parts_per_million);

// Summary of one run's latencies, in nanoseconds. All zero when there were no samples.
struct LatencySummary {
  uint64_t count = 0;
  int64_t min_ns = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  int64_t p999_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0;
  uint64_t stalled = 0;  // samples >= p50_ns + kStallMarginNanos
};

// Sorts `samples` (taken by value; move a vector in to avoid the copy) and summarises it.
LatencySummary Summarize(std::vector<int64_t> samples);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_STATS_H_
