// rpc_report: the "homarpc ÷ grpc" table printed under the RPC scenarios' Markdown report.
//
// The main table (report.h) divides p50 and RPC/s by the point's fastest floor: gRPC in
// throughput, a raw UDP or TCP floor at unary's points where one runs. The targets also speak of p99 (and a reader wants p99.9), so this
// table gives every latency percentile and the rate as ratios, one row per (size,
// concurrency) where both systems ran. Below 1 means homarpc is faster for latencies; above 1
// means more calls per second. Pure formatting, any thread.
#ifndef HOMARPC_TOOLS_BENCH_RPC_REPORT_H_
#define HOMARPC_TOOLS_BENCH_RPC_REPORT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/bench/result.h"

namespace homarpc::bench {

// A Markdown section "### system ÷ baseline" with columns size, conc, p50, p99, p99.9,
// RPC/s (ratios as "0.25x"), in the order `system`'s rows appear in `results`. Empty when no
// point has both.
std::string RatioTable(const std::vector<Result>& results, absl::string_view system,
                       absl::string_view baseline);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_RPC_REPORT_H_
