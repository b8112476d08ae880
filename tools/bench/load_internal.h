// load_internal: the pieces of load_driver.cc and load_harness.cc that their tests reach
// directly — the open-loop arrival schedule, spec validation, the ClientReport wire format and
// the /proc parsing behind ProcessCpu. Not a contract for the systems or scenarios (load.h is).
//
// Pure code, no threads: an ArrivalSchedule is used by one thread; the functions are
// thread-safe.
#ifndef HOMARPC_TOOLS_BENCH_LOAD_INTERNAL_H_
#define HOMARPC_TOOLS_BENCH_LOAD_INTERNAL_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/load.h"

namespace homarpc::bench::load_internal {

// When an open-loop stream's calls are due, as offsets from the measuring start. kFixedRate:
// k / rate (k = 1, 2, ...), computed from k, so a period that is not a whole number of
// nanoseconds does not drift. kPoisson: the sum of k exponential gaps of mean 1 / rate (summed
// in double precision), drawn with std::mt19937_64 and inverse-transform sampling written out
// here (std::exponential_distribution's algorithm is the library's choice), so one seed gives
// the same schedule with any standard library. The generator is seeded with a mix of `seed`,
// not `seed` itself: WorkloadSizes draws a stream's sizes from mt19937_64(seed), and the k-th
// gap must not be a function of the same number as the k-th size. `rate_per_sec` must be > 0
// (ValidateClient checks it).
class ArrivalSchedule {
 public:
  ArrivalSchedule(Arrival arrival, double rate_per_sec, uint64_t seed);
  // The next call's offset in nanoseconds; non-decreasing.
  int64_t NextOffsetNanos();

 private:
  const bool poisson_;
  const double mean_gap_ns_;
  std::mt19937_64 rng_;
  double offset_ns_ = 0;  // kPoisson
  uint64_t count_ = 0;    // kFixedRate
};

// INVALID_ARGUMENT naming the stream for what DriveStreams cannot run: no streams, an empty or
// repeated stream name, rate <= 0 (or not finite) for an open-loop stream, in_flight < 1 for a
// closed-loop one, an unknown workload; and for the point: duration_ns <= 0, drain_ns < 0,
// warmup_calls < 0, call_timeout_ns < 0.
absl::Status ValidateClient(const LoadPoint& point, const ClientSpec& client);

// The report a client process sends back: its status, then (when OK) the ClientReport, call
// records as one raw array per stream (CallRecord is plain data; both ends are this binary).
std::string EncodeClientReport(const absl::StatusOr<ClientReport>& report);
// INTERNAL for short or inconsistent input; otherwise the status or report that was encoded.
absl::StatusOr<ClientReport> DecodeClientReport(absl::string_view bytes);

// CPU accounting of a process, as /proc shows it.
struct CpuSample {
  int64_t cpu_ns = 0;                // utime + stime of every thread, dead ones included
  int64_t involuntary_switches = 0;  // nonvoluntary_ctxt_switches summed over live threads
};
// utime + stime in clock ticks from the text of /proc/<pid>/stat (fields 14 and 15, counted
// after the parenthesised command name, which may itself hold spaces and parentheses).
absl::StatusOr<int64_t> ParseStatCpuTicks(absl::string_view stat);
// The nonvoluntary_ctxt_switches value from the text of /proc/<pid>[/task/<tid>]/status.
absl::StatusOr<int64_t> ParseInvoluntarySwitches(absl::string_view status);
// Reads both for process `pid`. /proc/<pid>/stat already sums every thread's CPU time (the
// thread group's), but /proc/<pid>/status counts only the main thread's switches, so those are
// summed over /proc/<pid>/task/*/status.
absl::StatusOr<CpuSample> SampleProcessCpu(int pid);

}  // namespace homarpc::bench::load_internal

#endif  // HOMARPC_TOOLS_BENCH_LOAD_INTERNAL_H_
