// report: homarpc-bench's Markdown output, one table per scenario.
//
// A row per (size, concurrency, system), grouped by size so the systems at one point sit
// together. Performance is only claimed as ratios measured side by side in one run, so every
// row carries its ratio to the floor at the same point: the floor system (Result::is_floor)
// with the lowest p50 there. "p50 ÷ floor" above 1 means slower than the floor; "RPC/s ÷
// floor" below 1 means less throughput. Floors get ratios too, which shows e.g. what blocking
// costs against busy polling. Pure formatting, any thread.
#ifndef HOMARPC_TOOLS_BENCH_REPORT_H_
#define HOMARPC_TOOLS_BENCH_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/bench/result.h"

namespace homarpc::bench {

// A point that produced no Result: skipped by the system, or failed.
struct PointNote {
  std::string system;
  uint64_t size = 0;
  int64_t concurrency = 0;
  std::string text;  // the skip reason or the error
};

// The floor row `results` holds for `row`'s scenario, size and concurrency (lowest p50 among
// floors), or nullptr when no floor ran there.
const Result* FloorFor(const std::vector<Result>& results, const Result& row);

// "64 B", "1 KiB", "16 MiB", or the byte count when not a whole number of KiB/MiB/GiB.
std::string FormatSize(uint64_t bytes);

// The Markdown section for one scenario: a "## name" heading, the description and
// `settings_line`, the table of `results` (in the given order), then the skipped and failed
// points.
std::string MarkdownReport(absl::string_view scenario, absl::string_view description,
                           absl::string_view settings_line, const std::vector<Result>& results,
                           const std::vector<PointNote>& skipped,
                           const std::vector<PointNote>& failed);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_REPORT_H_
