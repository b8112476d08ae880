// load_report: what the load scenarios (load_scenarios.h) print and write — Markdown tables,
// JSON lines and the data files tools/bench-report.sh plots — made from LoadReports (load.h).
//
// Every number here is computed from the reports' call records, so the tables, the JSON and
// the data files always agree. Conventions:
//   - latencies are nearest-rank percentiles (stats.h) over every completed call of a stream,
//     all clients of the point merged; printed in microseconds;
//   - rates (bulk goodput, achieved load) count the calls that completed inside their client's
//     measuring phase (start_ns + latency_ns <= ClientReport::measure_ns, or the point's
//     duration when a client reports no measure_ns), divided by that phase: calls still
//     finishing in the drain would otherwise inflate them by up to in_flight calls' worth;
//   - ratios are "homarpc ÷ grpc", printed as "0.25x" ("-" when either side is missing or 0).
// Pure functions, no I/O, any thread.
#ifndef HOMARPC_TOOLS_BENCH_LOAD_REPORT_H_
#define HOMARPC_TOOLS_BENCH_LOAD_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tools/bench/load.h"
#include "tools/bench/stats.h"
#include "tools/bench/workload.h"

namespace homarpc::bench {

// ---- Shared ----

// A point that produced no LoadReport (RunLoadPoint failed).
struct LoadFailure {
  std::string system;
  std::string label;
  std::string error;
};

// One stream of a report, gathered over every client that runs a stream of that name.
struct StreamTotals {
  std::vector<CallRecord> calls;  // completed OK, client by client
  uint64_t started = 0;
  uint64_t failed = 0;
  uint64_t unfinished = 0;
  uint64_t late_starts = 0;
  std::string first_error;  // of the first client with one; "" if none
  // Payload bits per second of the calls that completed inside their client's measuring phase,
  // summed over the clients: request + response, and request only.
  double window_payload_bps = 0;
  double window_request_bps = 0;
  uint64_t window_calls = 0;  // the calls those rates count
};
StreamTotals GatherStream(const LoadReport& report, absl::string_view stream);
// Every stream of every client of a report, gathered as one.
StreamTotals GatherAllStreams(const LoadReport& report);

// Latency summary of `calls` (all of them).
LatencySummary CallLatency(absl::Span<const CallRecord> calls);

// "0.25x"; "-" when the denominator is not positive.
std::string RatioText(double numerator, double denominator);

// "\nFailed:\n- <system> at <label>: <error>\n..." or "" when there are none.
std::string FailureList(const std::vector<LoadFailure>& failures);

// One line per stream of `reports` that lost calls or could not keep its rate:
// "- <system> <label> <stream>: 3 failed (first: ...), 1 unfinished, 12 late starts", under a
// "\nCall problems:\n" heading; "" when every call of every stream was fine.
std::string CallProblems(const std::vector<LoadReport>& reports);
// "\nSteal (...): <system> <label> 1.2%, ...\n" for the reports whose steal_fraction is
// known, in their order; "" when none is. A point measured while the hypervisor ran other
// guests has longer tails for reasons outside both systems; this line lets a reader see that.
std::string StealNote(const std::vector<LoadReport>& reports);

// ---- unloaded: one point per (size, system), one closed-loop stream with 1 in flight ----

// {"scenario":"unloaded","system":...,"label":...,["steal_pct":...,]"size":<request bytes>,
//  "p50_us":...,"p99_us":...,"p999_us":...,"samples":...,"failed":...,"unfinished":...}
std::string UnloadedJson(const LoadReport& report);
// | size | system | p50 us | p99 us | p99.9 us | samples | then "### homarpc ÷ grpc" with
// | size | p50 | p99 | per size both ran. Rows in the order of `reports`.
std::string UnloadedTable(const std::vector<LoadReport>& reports);
// DIR/unloaded-<system>.dat: "# size_bytes p50_us p99_us", then one line per report of
// `system`, in order.
std::string UnloadedDataName(absl::string_view system);
std::string UnloadedData(const std::vector<LoadReport>& reports, absl::string_view system);

// ---- mixed: streams "small" (fixed rate, 64 B) and "bulk" (closed loop, large responses) ----

struct MixedSummary {
  LatencySummary small;
  StreamTotals small_totals;
  StreamTotals bulk_totals;
  double bulk_goodput_gbps = 0;  // bulk request + response payload, inside the window
};
MixedSummary SummarizeMixed(const LoadReport& report);
// {"scenario":"mixed","system":...,"label":...,["steal_pct":...,]"small_p50_us":...,
//  "small_p99_us":...,"small_p999_us":...,"small_samples":...,"small_late_starts":...,
//  "small_failed":...,"bulk_goodput_gbps":...,"bulk_calls":...,"bulk_failed":...,"unfinished":...}
std::string MixedJson(const LoadReport& report);
// One row per report: | variant | system | small p50 us | small p99 us | small p99.9 us |
// small calls | bulk Gbit/s | bulk calls |; after each variant's rows (variant = point.label)
// where both systems ran, a "homarpc ÷ grpc" row with the ratios of the latencies and of the
// goodput.
std::string MixedTable(const std::vector<LoadReport>& reports);
// DIR/<label>-<system>.cdf: "# latency_us cumulative_fraction", the small calls' sorted
// latencies: every sample when there are at most 2000, otherwise the samples at ranks
// ceil(k * n / 2000) for k = 1..2000; each line "<latency_us> <rank / n>".
std::string MixedCdfName(absl::string_view label, absl::string_view system);
std::string MixedCdf(const LoadReport& report);

// ---- workload: W1-W5 sizes, Poisson arrivals, slowdown by size bucket ----

// The calibration's unloaded latencies: (request size of the first stream, p50 of its calls)
// for each report that completed calls.
std::vector<std::pair<uint64_t, int64_t>> CalibrationPoints(
    const std::vector<LoadReport>& calibration);
// {"scenario":"workload","system":...,"label":...,["steal_pct":...,]"point":"calibration",
//  "workload":...,"size":...,"p50_us":...,"p99_us":...,"samples":...}
std::string CalibrationJson(const LoadReport& report, absl::string_view workload);

struct WorkloadSummary {
  std::string system;
  std::string workload;  // "w3"
  double load = 0;       // the offered fraction of the link
  int64_t link_mbps = 0;
  double achieved_load = 0;             // request payload completed inside the window / link rate
  StreamTotals totals;                  // every stream of the point (GatherAllStreams)
  std::string reference;                // whose unloaded latency `buckets` divide by
  std::vector<BucketSlowdown> buckets;  // slowdown against `reference`
  std::vector<BucketSlowdown> own_buckets;  // slowdown against this system's own unloaded
  std::optional<double> steal_fraction;     // the report's (load.h)
};
// `report` ran streams of sizes drawn from `workload` only (one per client, each with its own
// name); `load` is what they offered together.
WorkloadSummary SummarizeWorkload(const LoadReport& report, absl::string_view workload, double load,
                                  absl::Span<const uint64_t> bucket_uppers,
                                  const UnloadedLatency& reference,
                                  absl::string_view reference_system, const UnloadedLatency& own);
// {"scenario":"workload","system":...,"label":...,"point":"load","workload":...,"load":...,
//  "link_mbps":...,"achieved_load":...,"calls":...,"failed":...,"unfinished":...,
//  "late_starts":...,"reference":...,["steal_pct":...,]"buckets":[{"upper_bytes":...,"calls":...,
//  "p50_slowdown":...,"p99_slowdown":...,"p99_slowdown_own":...,"p50_us":...,"p99_us":...},...]}
std::string WorkloadJson(const WorkloadSummary& summary, absl::string_view label);
// One (workload, load)'s section: "### <w> at <load%> load", a line with the offered and
// achieved load and late starts per system and the slowdown reference, then a row per bucket:
// | size <= | then per system: calls, p50, p99 (slowdown against the reference), and for a
// system that is not the reference its p99 against its own unloaded latency; then
// "p99 homarpc ÷ grpc" when both ran. Systems in the order of `summaries`, which share one
// (workload, load) and the same buckets.
std::string WorkloadTable(const std::vector<WorkloadSummary>& summaries);
// DIR/workload-<w>-<load%>-<system>.dat: "# bucket_upper_bytes p50_slowdown p99_slowdown calls",
// one line per bucket (slowdown against the reference).
std::string WorkloadDataName(absl::string_view workload, double load, absl::string_view system);
std::string WorkloadData(const WorkloadSummary& summary);

// ---- Every call (--calls_dir) ----

// DIR/<scenario>-<label>-<system>.calls, the label's characters other than [A-Za-z0-9._] made
// '_' (so "64 B at 5000/s" becomes "64_B_at_5000_s").
std::string CallsDataName(absl::string_view scenario, absl::string_view label,
                          absl::string_view system);
// "# client stream start_us latency_us request_bytes response_bytes", then one line per
// completed call, client by client, stream by stream, in completion order: the raw material
// for looking at a tail (which calls were slow, when, and what else was in flight). start_us
// counts from the client's own measuring start (the clients start together at the harness's
// barrier, so the columns of different clients line up to within a wake-up).
std::string CallsData(const LoadReport& report);

// ---- cpu: one fixed-rate stream of 64 B calls ----

// The harness samples CPU time over the measuring phase (load.h), so the calls it is divided by
// are those that completed inside it (window_calls), not the drain's.
struct CpuSummary {
  uint64_t calls = 0;            // completed OK inside the measuring phase
  double client_us_per_rpc = 0;  // every client process's CPU time / calls
  double server_us_per_rpc = 0;
  double total_us_per_rpc = 0;
  int64_t client_involuntary_switches = 0;
  int64_t server_involuntary_switches = 0;
  StreamTotals totals;  // every stream of the point (GatherAllStreams)
};
CpuSummary SummarizeCpu(const LoadReport& report);
// {"scenario":"cpu","system":...,"label":...,["steal_pct":...,]"rate":<calls per second offered>,
//  "calls":...,"client_us_per_rpc":...,"server_us_per_rpc":...,"total_us_per_rpc":...,
//  "client_involuntary_switches":...,"server_involuntary_switches":...,"failed":...,
//  "late_starts":...}
std::string CpuJson(const LoadReport& report);
// | system | rate/s | calls | client us/RPC | server us/RPC | total us/RPC | involuntary
// switches client / server |, then a "homarpc ÷ grpc" row when both ran.
std::string CpuTable(const std::vector<LoadReport>& reports);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_LOAD_REPORT_H_
