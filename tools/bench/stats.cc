// stats: nearest-rank percentiles over every sample (see stats.h for the definition).
#include "tools/bench/stats.h"

#include <algorithm>
#include <cassert>

namespace homarpc::bench {

int64_t NearestRank(absl::Span<const int64_t> sorted, uint32_t parts_per_million) {
  assert(!sorted.empty());
  assert(parts_per_million > 0 && parts_per_million <= 1000000);
  // rank = ceil(ppm * n / 1e6), in integers. ppm <= 1e6 and n < 2^40 keep this inside 64 bits.
  const uint64_t n = sorted.size();
  const uint64_t rank = (uint64_t{parts_per_million} * n + 999999) / 1000000;
  return sorted[std::max<uint64_t>(rank, 1) - 1];
}

LatencySummary Summarize(std::vector<int64_t> samples) {
  LatencySummary summary;
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  summary.count = samples.size();
  summary.min_ns = samples.front();
  summary.max_ns = samples.back();
  summary.p50_ns = NearestRank(samples, kP50);
  summary.p99_ns = NearestRank(samples, kP99);
  summary.p999_ns = NearestRank(samples, kP999);
  summary.stalled = static_cast<uint64_t>(
      samples.end() -
      std::lower_bound(samples.begin(), samples.end(), summary.p50_ns + kStallMarginNanos));
  double total = 0;
  for (int64_t sample : samples) total += static_cast<double>(sample);
  summary.mean_ns = total / static_cast<double>(samples.size());
  return summary;
}

}  // namespace homarpc::bench
