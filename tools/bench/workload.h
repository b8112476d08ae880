// workload: the Homa papers' message-size distributions W1-W5 and the arithmetic around them —
// drawing sizes, offered load, size buckets and slowdown — for homarpc-bench's `workload`
// scenario.
//
// The five CDFs live in tools/bench/workloads/w1.cdf .. w5.cdf (copied from the Homa papers'
// data; see that folder's README) and are compiled into the binary, so homarpc-bench reads no
// file at run time. Format: `#` comment lines; every other line `<length> <cumulative
// fraction>`, lengths strictly increasing, fractions non-decreasing and ending at 1.
//
// Pure code, no I/O; a Workload is immutable after parsing and may be shared by threads; a
// Sampler is used by one thread.
#ifndef HOMARPC_TOOLS_BENCH_WORKLOAD_H_
#define HOMARPC_TOOLS_BENCH_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tools/bench/load.h"

namespace homarpc::bench {

struct CdfPoint {
  uint64_t length = 0;
  double fraction = 0;  // fraction of messages with length <= `length`
};

class Workload {
 public:
  // Parses CDF text (format above). INVALID_ARGUMENT naming the line for: a malformed line, a
  // zero length, lengths not strictly increasing, a fraction outside [0, 1] or decreasing, the
  // last fraction not 1 (within 1e-6), no points.
  static absl::StatusOr<Workload> Parse(absl::string_view name, absl::string_view text);
  // The built-in distribution "w1".."w5" (case-insensitive); NOT_FOUND listing the names
  // otherwise.
  static absl::StatusOr<Workload> BuiltIn(absl::string_view name);
  static std::vector<std::string> BuiltInNames();  // {"w1", ..., "w5"}

  const std::string& name() const { return name_; }
  absl::Span<const CdfPoint> points() const { return points_; }
  // The size for a uniform draw u in [0, 1): the first length whose fraction is > u.
  uint64_t SizeAt(double u) const;
  // Mean message length (exact, from the CDF's steps) and the largest length.
  double MeanBytes() const;
  uint64_t MaxBytes() const;
  // The length at cumulative fraction q in (0, 1] (the first length whose fraction >= q).
  uint64_t Quantile(double q) const;

 private:
  std::string name_;
  std::vector<CdfPoint> points_;
};

// Draws sizes from a workload with a seeded generator: the same seed gives the same sequence.
class WorkloadSizes final : public SizeSource {
 public:
  WorkloadSizes(std::shared_ptr<const Workload> workload, uint64_t seed);
  uint64_t Next() override;

 private:
  std::shared_ptr<const Workload> workload_;
  std::mt19937_64 rng_;
};

// The same size every time.
class FixedSize final : public SizeSource {
 public:
  explicit FixedSize(uint64_t bytes) : bytes_(bytes) {}
  uint64_t Next() override { return bytes_; }

 private:
  uint64_t bytes_;
};

// The SizeSource for a stream: FixedSize(request_bytes) when `workload` is empty, otherwise
// the built-in distribution with the stream's seed. NOT_FOUND for an unknown workload name.
absl::StatusOr<std::unique_ptr<SizeSource>> MakeSizeSource(const StreamSpec& stream);

// Calls per second that put `load` (0..1] of a `link_mbps` link into request payload bytes of
// `workload`, split evenly over `clients` client processes: per client,
// load * link_mbps * 1e6 / 8 / MeanBytes / clients.
double PoissonRatePerClient(const Workload& workload, double load, int64_t link_mbps,
                            int clients);

// Size buckets for slowdown, as the Homa papers draw them: boundaries at the workload's
// deciles of message count (Quantile(0.1), ..., Quantile(1.0)), duplicates merged, so each
// bucket holds about 10% of the messages (fewer buckets where one length holds more).
// Bucket i covers (upper[i-1], upper[i]] (bucket 0 from 0).
std::vector<uint64_t> DecileBucketUppers(const Workload& workload);

// Unloaded latency by size, measured at a few sizes; Interpolate() answers any size by linear
// interpolation between the nearest measured sizes (clamped at both ends).
class UnloadedLatency {
 public:
  // Points need not be sorted; sizes must be distinct (later duplicates ignored); not empty.
  explicit UnloadedLatency(std::vector<std::pair<uint64_t, int64_t>> size_to_latency_ns);
  int64_t Interpolate(uint64_t size) const;

 private:
  std::vector<std::pair<uint64_t, int64_t>> points_;  // sorted by size
};

// The sizes at which to measure unloaded latency for `workload`: each bucket's upper bound and
// the workload's smallest length (what Interpolate() needs to cover every draw well).
std::vector<uint64_t> CalibrationSizes(const Workload& workload);

// Slowdown per size bucket. For every call, slowdown = latency / unloaded.Interpolate(size)
// (at least 1.0 is NOT enforced: a loaded call may beat the unloaded median).
struct BucketSlowdown {
  uint64_t lower_exclusive = 0;
  uint64_t upper_inclusive = 0;
  uint64_t calls = 0;
  double p50 = 0;  // nearest-rank percentiles of the bucket's slowdowns; 0 when calls == 0
  double p99 = 0;
  int64_t p50_latency_ns = 0;  // and of the bucket's raw latencies
  int64_t p99_latency_ns = 0;
};
std::vector<BucketSlowdown> SlowdownByBucket(absl::Span<const CallRecord> calls,
                                             absl::Span<const uint64_t> bucket_uppers,
                                             const UnloadedLatency& unloaded);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_WORKLOAD_H_
