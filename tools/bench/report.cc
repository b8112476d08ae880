// report: Markdown tables with floor ratios (see report.h).
#include "tools/bench/report.h"

#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace homarpc::bench {
namespace {

// Extras shown in their own column, or not at all, in the table (JSON has every extra).
bool HasOwnColumn(absl::string_view key) {
  return key == "client_peak_rss_kb" || key == "server_peak_rss_kb";
}

std::string RssMiB(const Result& row, absl::string_view key) {
  const Extra* extra = row.FindExtra(key);
  if (extra == nullptr || extra->is_string) return "?";
  double kb = 0;
  if (!absl::SimpleAtod(extra->text, &kb)) return "?";
  return absl::StrFormat("%.1f", kb / 1024);
}

// Extras without a column of their own, "key=value", zeros left out to keep the table narrow.
std::string OtherExtras(const Result& row) {
  std::vector<std::string> parts;
  for (const Extra& extra : row.extras) {
    if (HasOwnColumn(extra.key) || (!extra.is_string && extra.text == "0")) continue;
    parts.push_back(absl::StrCat(extra.key, "=", extra.text));
  }
  return absl::StrJoin(parts, " ");
}

std::string Ratio(double numerator, double denominator) {
  if (denominator <= 0) return "-";
  return absl::StrFormat("%.2fx", numerator / denominator);
}

}  // namespace

const Result* FloorFor(const std::vector<Result>& results, const Result& row) {
  const Result* best = nullptr;
  for (const Result& candidate : results) {
    if (!candidate.is_floor || candidate.scenario != row.scenario || candidate.size != row.size ||
        candidate.concurrency != row.concurrency) {
      continue;
    }
    if (best == nullptr || candidate.p50_us < best->p50_us) best = &candidate;
  }
  return best;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr std::pair<uint64_t, const char*> kUnits[] = {
      {uint64_t{1} << 30, "GiB"}, {uint64_t{1} << 20, "MiB"}, {uint64_t{1} << 10, "KiB"}};
  for (const auto& [unit, name] : kUnits) {
    if (bytes >= unit && bytes % unit == 0) return absl::StrCat(bytes / unit, " ", name);
  }
  return absl::StrCat(bytes, " B");
}

std::string MarkdownReport(absl::string_view scenario, absl::string_view description,
                           absl::string_view settings_line, const std::vector<Result>& results,
                           const std::vector<PointNote>& skipped,
                           const std::vector<PointNote>& failed) {
  std::string out =
      absl::StrCat("## ", scenario, "\n\n", description, "\n\n", settings_line, "\n\n");
  out +=
      "| size | conc | system | p50 us | p99 us | p99.9 us | RPC/s | Gbit/s | samples | floor "
      "| p50 ÷ floor | RPC/s ÷ floor | peak RSS MiB client / server | extras |\n"
      "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n";
  for (const Result& row : results) {
    const Result* floor = FloorFor(results, row);
    absl::StrAppendFormat(
        &out,
        "| %s | %d | %s | %.1f | %.1f | %.1f | %.0f | %.3f | %d | %s | %s | %s | %s / %s | %s |\n",
        FormatSize(row.size), row.concurrency, row.system, row.p50_us, row.p99_us, row.p999_us,
        row.rps, row.goodput_gbps, row.samples, floor == nullptr ? "-" : floor->system,
        floor == nullptr ? "-" : Ratio(row.p50_us, floor->p50_us),
        floor == nullptr ? "-" : Ratio(row.rps, floor->rps), RssMiB(row, "client_peak_rss_kb"),
        RssMiB(row, "server_peak_rss_kb"), OtherExtras(row));
  }
  if (results.empty()) out += "| (no results) |||||||||||||||\n";

  if (!skipped.empty()) {
    // One line per (system, reason), listing the points it covers.
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> grouped;
    for (const PointNote& note : skipped) {
      grouped[{note.system, note.text}].push_back(
          absl::StrCat(FormatSize(note.size), " x", note.concurrency));
    }
    out += "\nSkipped:\n";
    for (const auto& [key, points] : grouped) {
      absl::StrAppend(&out, "- ", key.first, " at ", absl::StrJoin(points, ", "), ": ", key.second,
                      "\n");
    }
  }
  if (!failed.empty()) {
    out += "\nFailed:\n";
    for (const PointNote& note : failed) {
      absl::StrAppend(&out, "- ", note.system, " at ", FormatSize(note.size), " x",
                      note.concurrency, ": ", note.text, "\n");
    }
  }
  return out;
}

}  // namespace homarpc::bench
