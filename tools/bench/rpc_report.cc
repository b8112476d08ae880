// rpc_report: ratio table of one system against a baseline (see rpc_report.h).
#include "tools/bench/rpc_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/report.h"

namespace homarpc::bench {
namespace {

std::string Ratio(double numerator, double denominator) {
  if (denominator <= 0) return "-";
  return absl::StrFormat("%.2fx", numerator / denominator);
}

const Result* Find(const std::vector<Result>& results, absl::string_view system,
                   const Result& at) {
  for (const Result& row : results) {
    if (row.system == system && row.scenario == at.scenario && row.size == at.size &&
        row.concurrency == at.concurrency) {
      return &row;
    }
  }
  return nullptr;
}

}  // namespace

std::string RatioTable(const std::vector<Result>& results, absl::string_view system,
                       absl::string_view baseline) {
  std::string rows;
  for (const Result& row : results) {
    if (row.system != system) continue;
    const Result* base = Find(results, baseline, row);
    if (base == nullptr) continue;
    absl::StrAppendFormat(&rows, "| %s | %d | %s | %s | %s | %s |\n", FormatSize(row.size),
                          row.concurrency, Ratio(row.p50_us, base->p50_us),
                          Ratio(row.p99_us, base->p99_us), Ratio(row.p999_us, base->p999_us),
                          Ratio(row.rps, base->rps));
  }
  if (rows.empty()) return "";
  return absl::StrCat("\n### ", system, " ÷ ", baseline,
                      "\n\n| size | conc | p50 | p99 | p99.9 | RPC/s |\n"
                      "|---:|---:|---:|---:|---:|---:|\n",
                      rows);
}

}  // namespace homarpc::bench
