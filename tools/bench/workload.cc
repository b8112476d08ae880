// workload: the W1-W5 message-size distributions and the arithmetic of the `workload`
// scenario (see workload.h). Owned by the load-scenario code; pure functions and immutable
// values, no threads of its own (a WorkloadSizes is used by one thread).
//
// DESIGN NOTES
// - Sampling: a draw is u in [0, 1) from the top 53 bits of one std::mt19937_64 output
//   (u = (x >> 11) * 2^-53), then SizeAt(u). std::uniform_real_distribution and
//   std::generate_canonical are not specified bit for bit (libstdc++ and libc++ differ, and
//   some versions of generate_canonical can return 1.0); the shift is exact and the same
//   everywhere, so a seed names one sequence on every build.
// - Parsing normalises the last fraction to exactly 1.0 once it is within 1e-6 of it, so a
//   draw u in [1 - 1e-6, 1) still finds a length and MeanBytes() weighs the steps to 1.
// - Decile boundaries use Quantile(i / 10.0): i / 10.0 is correctly rounded, so it is the very
//   double that "0.3" in a CDF file parses to, and a CDF step landing exactly on a decile is
//   found by an exact comparison (0.1 * 3 would be 0.30000000000000004 and miss it).
#include "tools/bench/workload.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/bench/stats.h"
#include "tools/bench/workloads/builtin.h"

namespace homarpc::bench {
namespace {

constexpr double kLastFractionTolerance = 1e-6;

absl::Status LineError(absl::string_view name, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("workload ", name, ": line ", line, ": ", what));
}

// stats.h's nearest rank (rank = ceil(ppm * n / 1e6), 1-based) over doubles.
double NearestRankDouble(absl::Span<const double> sorted, uint32_t parts_per_million) {
  assert(!sorted.empty());
  const uint64_t n = sorted.size();
  const uint64_t rank = (uint64_t{parts_per_million} * n + 999999) / 1000000;
  return sorted[std::max<uint64_t>(rank, 1) - 1];
}

}  // namespace

absl::StatusOr<Workload> Workload::Parse(absl::string_view name, absl::string_view text) {
  Workload workload;
  workload.name_ = std::string(name);
  int line_number = 0;
  int last_point_line = 0;
  for (absl::string_view raw_line : absl::StrSplit(text, '\n')) {
    ++line_number;
    // Blank lines (a trailing newline makes one) and `#` comments carry no point.
    const absl::string_view line = absl::StripAsciiWhitespace(raw_line);
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    CdfPoint point;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &point.length) ||
        !absl::SimpleAtod(fields[1], &point.fraction)) {
      return LineError(
          name, line_number,
          absl::StrCat("malformed line '", line, "' (want '<length> <cumulative fraction>')"));
    }
    if (point.length == 0) return LineError(name, line_number, "length 0 (lengths start at 1)");
    // Written so that NaN fails too.
    if (!(point.fraction >= 0 && point.fraction <= 1)) {
      return LineError(name, line_number,
                       absl::StrCat("fraction ", fields[1], " is outside [0, 1]"));
    }
    if (!workload.points_.empty()) {
      const CdfPoint& previous = workload.points_.back();
      if (point.length <= previous.length) {
        return LineError(name, line_number,
                         absl::StrCat("length ", point.length, " is not above the previous ",
                                      previous.length, " (lengths must strictly increase)"));
      }
      if (point.fraction < previous.fraction) {
        return LineError(name, line_number,
                         absl::StrCat("fraction ", fields[1], " is below the previous ",
                                      previous.fraction, " (fractions must not decrease)"));
      }
    }
    workload.points_.push_back(point);
    last_point_line = line_number;
  }
  if (workload.points_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", name, ": no points (", line_number,
                     " lines, none of the form '<length> <cumulative fraction>')"));
  }
  CdfPoint& last = workload.points_.back();
  if (std::fabs(last.fraction - 1.0) > kLastFractionTolerance) {
    return LineError(name, last_point_line,
                     absl::StrCat("the last fraction is ", last.fraction, ", not 1"));
  }
  last.fraction = 1.0;
  return workload;
}

absl::StatusOr<Workload> Workload::BuiltIn(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const workloads_internal::BuiltInCdf& cdf : workloads_internal::BuiltInCdfs()) {
    if (cdf.name == lower) return Parse(cdf.name, cdf.text);
  }
  return absl::NotFoundError(absl::StrCat("unknown workload '", name,
                                          "' (known: ", absl::StrJoin(BuiltInNames(), ", "), ")"));
}

std::vector<std::string> Workload::BuiltInNames() {
  std::vector<std::string> names;
  for (const workloads_internal::BuiltInCdf& cdf : workloads_internal::BuiltInCdfs()) {
    names.emplace_back(cdf.name);
  }
  return names;
}

uint64_t Workload::SizeAt(double u) const {
  if (points_.empty()) return 0;
  const auto it =
      std::upper_bound(points_.begin(), points_.end(), u,
                       [](double value, const CdfPoint& point) { return value < point.fraction; });
  // Only u >= 1 (outside the contract) finds no fraction above it: answer the largest length.
  return it == points_.end() ? points_.back().length : it->length;
}

double Workload::MeanBytes() const {
  double mean = 0;
  double previous = 0;
  for (const CdfPoint& point : points_) {
    mean += static_cast<double>(point.length) * (point.fraction - previous);
    previous = point.fraction;
  }
  return mean;
}

uint64_t Workload::MaxBytes() const { return points_.empty() ? 0 : points_.back().length; }

uint64_t Workload::Quantile(double q) const {
  if (points_.empty()) return 0;
  const auto it =
      std::lower_bound(points_.begin(), points_.end(), q,
                       [](const CdfPoint& point, double value) { return point.fraction < value; });
  return it == points_.end() ? points_.back().length : it->length;
}

WorkloadSizes::WorkloadSizes(std::shared_ptr<const Workload> workload, uint64_t seed)
    : workload_(std::move(workload)), rng_(seed) {
  assert(workload_ != nullptr);
}

uint64_t WorkloadSizes::Next() {
  // The top 53 bits make a double in [0, 1) exactly (DESIGN NOTES).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return workload_->SizeAt(u);
}

absl::StatusOr<std::unique_ptr<SizeSource>> MakeSizeSource(const StreamSpec& stream) {
  if (stream.workload.empty()) return std::make_unique<FixedSize>(stream.request_bytes);
  absl::StatusOr<Workload> workload = Workload::BuiltIn(stream.workload);
  if (!workload.ok()) return workload.status();
  return std::make_unique<WorkloadSizes>(std::make_shared<const Workload>(*std::move(workload)),
                                         stream.seed);
}

double PoissonRatePerClient(const Workload& workload, double load, int64_t link_mbps, int clients) {
  assert(clients >= 1);
  const double mean_bytes = workload.MeanBytes();
  // A rate of 0 makes DriveStreams reject the stream (rate <= 0) instead of dividing by zero.
  if (clients < 1 || mean_bytes <= 0) return 0;
  return load * static_cast<double>(link_mbps) * 1e6 / 8 / mean_bytes /
         static_cast<double>(clients);
}

std::vector<uint64_t> DecileBucketUppers(const Workload& workload) {
  std::vector<uint64_t> uppers;
  if (workload.points().empty()) return uppers;
  for (int decile = 1; decile <= 10; ++decile) {
    // The last bucket ends at the largest length even when trailing lengths have probability 0
    // (Quantile(1.0) would stop at the first length reaching 1), so every length has a bucket.
    const uint64_t upper = decile == 10 ? workload.MaxBytes() : workload.Quantile(decile / 10.0);
    if (uppers.empty() || upper > uppers.back()) uppers.push_back(upper);
  }
  return uppers;
}

UnloadedLatency::UnloadedLatency(std::vector<std::pair<uint64_t, int64_t>> size_to_latency_ns)
    : points_(std::move(size_to_latency_ns)) {
  assert(!points_.empty());
  // Stable, so among equal sizes the earliest given comes first and unique() keeps it.
  std::stable_sort(points_.begin(), points_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  points_.erase(std::unique(points_.begin(), points_.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                points_.end());
}

int64_t UnloadedLatency::Interpolate(uint64_t size) const {
  if (points_.empty()) return 0;
  if (size <= points_.front().first) return points_.front().second;
  if (size >= points_.back().first) return points_.back().second;
  // points_[i - 1].first < size < points_[i].first.
  const auto above =
      std::upper_bound(points_.begin(), points_.end(), size,
                       [](uint64_t value, const std::pair<uint64_t, int64_t>& point) {
                         return value < point.first;
                       });
  const auto below = std::prev(above);
  const double fraction =
      static_cast<double>(size - below->first) / static_cast<double>(above->first - below->first);
  const double latency = static_cast<double>(below->second) +
                         fraction * static_cast<double>(above->second - below->second);
  return static_cast<int64_t>(std::llround(latency));
}

std::vector<uint64_t> CalibrationSizes(const Workload& workload) {
  std::vector<uint64_t> sizes = DecileBucketUppers(workload);
  if (workload.points().empty()) return sizes;
  sizes.push_back(workload.points().front().length);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::vector<BucketSlowdown> SlowdownByBucket(absl::Span<const CallRecord> calls,
                                             absl::Span<const uint64_t> bucket_uppers,
                                             const UnloadedLatency& unloaded) {
  assert(std::is_sorted(bucket_uppers.begin(), bucket_uppers.end()));
  const size_t buckets = bucket_uppers.size();
  std::vector<std::vector<double>> slowdowns(buckets);
  std::vector<std::vector<int64_t>> latencies(buckets);
  for (const CallRecord& call : calls) {
    // Bucket i holds (upper[i-1], upper[i]]: the first upper >= the size. A call above the
    // last upper belongs to no bucket and is left out (with uppers from DecileBucketUppers of
    // the workload that drew the sizes, none is).
    const size_t bucket =
        std::lower_bound(bucket_uppers.begin(), bucket_uppers.end(), call.request_bytes) -
        bucket_uppers.begin();
    if (bucket == buckets) continue;
    // An unloaded latency of 0 (a bad calibration) would divide by zero; 1 ns keeps the
    // slowdown finite and absurdly large, which the report shows.
    const int64_t baseline = std::max<int64_t>(unloaded.Interpolate(call.request_bytes), 1);
    slowdowns[bucket].push_back(static_cast<double>(call.latency_ns) /
                                static_cast<double>(baseline));
    latencies[bucket].push_back(call.latency_ns);
  }
  std::vector<BucketSlowdown> result(buckets);
  for (size_t i = 0; i < buckets; ++i) {
    BucketSlowdown& out = result[i];
    out.lower_exclusive = i == 0 ? 0 : bucket_uppers[i - 1];
    out.upper_inclusive = bucket_uppers[i];
    out.calls = slowdowns[i].size();
    if (out.calls == 0) continue;
    std::sort(slowdowns[i].begin(), slowdowns[i].end());
    std::sort(latencies[i].begin(), latencies[i].end());
    out.p50 = NearestRankDouble(slowdowns[i], kP50);
    out.p99 = NearestRankDouble(slowdowns[i], kP99);
    out.p50_latency_ns = NearestRank(latencies[i], kP50);
    out.p99_latency_ns = NearestRank(latencies[i], kP99);
  }
  return result;
}

}  // namespace homarpc::bench
