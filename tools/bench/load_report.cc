// load_report: tables, JSON lines and data files of the load scenarios (see load_report.h).
#include "tools/bench/load_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/bench/machine_cpu.h"
#include "tools/bench/report.h"
#include "tools/bench/result.h"
#include "tools/bench/rpc_scenarios.h"

namespace homarpc::bench {
namespace {

// At most this many lines in a CDF data file (gnuplot draws them; more adds nothing visible).
constexpr uint64_t kMaxCdfPoints = 2000;

double Micros(int64_t nanos) { return static_cast<double>(nanos) / 1000; }

// One JSON object from fields in order (result.h's style: numbers bare, strings quoted; an
// Extra that is not a string is written as it is, which lets a field hold an array).
std::string JsonObject(const std::vector<Extra>& fields) {
  std::string out = "{";
  for (const Extra& field : fields) {
    if (out.size() > 1) out += ",";
    absl::StrAppend(&out, JsonQuote(field.key), ":",
                    field.is_string ? JsonQuote(field.text) : field.text);
  }
  out += "}";
  return out;
}

std::vector<Extra> Head(const LoadReport& report) {
  std::vector<Extra> fields = {Extra::String("scenario", report.point.scenario),
                               Extra::String("system", report.system),
                               Extra::String("label", report.point.label)};
  AddStealExtra(report.steal_fraction, &fields);
  return fields;
}

// The first stream of the point's first client: the one stream of unloaded, cpu and a
// calibration point.
const StreamSpec* FirstStream(const LoadReport& report) {
  if (report.point.clients.empty() || report.point.clients[0].streams.empty()) return nullptr;
  return &report.point.clients[0].streams[0];
}

// The report of `system` in `reports` with the same point label as `like`, or nullptr.
const LoadReport* Partner(const std::vector<LoadReport>& reports, absl::string_view system,
                          const LoadReport& like) {
  for (const LoadReport& report : reports) {
    if (report.system == system && report.point.label == like.point.label) return &report;
  }
  return nullptr;
}

// Stream names of a report, each once, in first-appearance order.
std::vector<std::string> StreamNames(const LoadReport& report) {
  std::vector<std::string> names;
  for (const ClientSpec& client : report.point.clients) {
    for (const StreamSpec& stream : client.streams) {
      if (std::find(names.begin(), names.end(), stream.name) == names.end()) {
        names.push_back(stream.name);
      }
    }
  }
  return names;
}

std::string Us(int64_t nanos) { return absl::StrFormat("%.1f", Micros(nanos)); }

}  // namespace

// ---- Shared ----

namespace {

// The streams of `report` for which `take(name)` is true, gathered.
template <typename Take>
StreamTotals Gather(const LoadReport& report, Take take) {
  StreamTotals totals;
  for (const ClientReport& client : report.clients) {
    const int64_t window_ns = client.measure_ns > 0 ? client.measure_ns : report.point.duration_ns;
    for (const StreamReport& one : client.streams) {
      if (!take(one.name)) continue;
      totals.started += one.started;
      totals.failed += one.failed;
      totals.unfinished += one.unfinished;
      totals.late_starts += one.late_starts;
      if (totals.first_error.empty()) totals.first_error = one.first_error;
      uint64_t payload = 0;
      uint64_t request = 0;
      for (const CallRecord& call : one.calls) {
        totals.calls.push_back(call);
        if (call.start_ns + call.latency_ns > window_ns) continue;
        ++totals.window_calls;
        payload += call.request_bytes + call.response_bytes;
        request += call.request_bytes;
      }
      if (window_ns > 0) {
        totals.window_payload_bps += static_cast<double>(payload) * 8e9 / window_ns;
        totals.window_request_bps += static_cast<double>(request) * 8e9 / window_ns;
      }
    }
  }
  return totals;
}

}  // namespace

StreamTotals GatherStream(const LoadReport& report, absl::string_view stream) {
  return Gather(report, [stream](const std::string& name) { return name == stream; });
}

StreamTotals GatherAllStreams(const LoadReport& report) {
  return Gather(report, [](const std::string&) { return true; });
}

LatencySummary CallLatency(absl::Span<const CallRecord> calls) {
  std::vector<int64_t> latencies;
  latencies.reserve(calls.size());
  for (const CallRecord& call : calls) latencies.push_back(call.latency_ns);
  return Summarize(std::move(latencies));
}

std::string RatioText(double numerator, double denominator) {
  if (denominator <= 0) return "-";
  return absl::StrFormat("%.2fx", numerator / denominator);
}

std::string FailureList(const std::vector<LoadFailure>& failures) {
  if (failures.empty()) return "";
  std::string out = "\nFailed:\n";
  for (const LoadFailure& failure : failures) {
    absl::StrAppend(&out, "- ", failure.system, " at ", failure.label, ": ", failure.error, "\n");
  }
  return out;
}

std::string CallProblems(const std::vector<LoadReport>& reports) {
  std::string lines;
  for (const LoadReport& report : reports) {
    for (const std::string& name : StreamNames(report)) {
      const StreamTotals totals = GatherStream(report, name);
      std::vector<std::string> parts;
      if (totals.failed > 0) {
        parts.push_back(absl::StrCat(totals.failed, " failed (first: ", totals.first_error, ")"));
      }
      if (totals.unfinished > 0) parts.push_back(absl::StrCat(totals.unfinished, " unfinished"));
      if (totals.late_starts > 0) {
        parts.push_back(absl::StrCat(totals.late_starts,
                                     " late starts (the client fell behind the offered rate)"));
      }
      if (parts.empty()) continue;
      absl::StrAppend(&lines, "- ", report.system, " ", report.point.label, " ", name, ": ",
                      absl::StrJoin(parts, ", "), "\n");
    }
  }
  if (lines.empty()) return "";
  return absl::StrCat("\nCall problems:\n", lines);
}

std::string StealNote(const std::vector<LoadReport>& reports) {
  std::vector<std::string> parts;
  for (const LoadReport& report : reports) {
    if (!report.steal_fraction.has_value()) continue;
    parts.push_back(absl::StrFormat("%s %s %.1f%%", report.system, report.point.label,
                                    *report.steal_fraction * 100));
  }
  if (parts.empty()) return "";
  return absl::StrCat(
      "\nSteal (the share of the machine's CPU time its CPUs were ready to run but the host ran "
      "other guests or its own work, while each point measured): ",
      absl::StrJoin(parts, ", "), "\n");
}

// ---- unloaded ----

namespace {

uint64_t RequestSize(const LoadReport& report) {
  const StreamSpec* stream = FirstStream(report);
  return stream == nullptr ? 0 : stream->request_bytes;
}

StreamTotals FirstStreamTotals(const LoadReport& report) {
  const StreamSpec* stream = FirstStream(report);
  return stream == nullptr ? StreamTotals() : GatherStream(report, stream->name);
}

}  // namespace

std::string UnloadedJson(const LoadReport& report) {
  const StreamTotals totals = FirstStreamTotals(report);
  const LatencySummary latency = CallLatency(totals.calls);
  std::vector<Extra> fields = Head(report);
  fields.push_back(Extra::Int("size", static_cast<int64_t>(RequestSize(report))));
  fields.push_back(Extra::Double("p50_us", Micros(latency.p50_ns)));
  fields.push_back(Extra::Double("p99_us", Micros(latency.p99_ns)));
  fields.push_back(Extra::Double("p999_us", Micros(latency.p999_ns)));
  fields.push_back(Extra::Int("samples", static_cast<int64_t>(latency.count)));
  fields.push_back(Extra::Int("failed", static_cast<int64_t>(totals.failed)));
  fields.push_back(Extra::Int("unfinished", static_cast<int64_t>(totals.unfinished)));
  return JsonObject(fields);
}

std::string UnloadedTable(const std::vector<LoadReport>& reports) {
  std::string out =
      "| size | system | p50 us | p99 us | p99.9 us | samples |\n"
      "|---:|---|---:|---:|---:|---:|\n";
  std::string ratios;
  for (const LoadReport& report : reports) {
    const LatencySummary latency = CallLatency(FirstStreamTotals(report).calls);
    absl::StrAppend(&out, "| ", FormatSize(RequestSize(report)), " | ", report.system, " | ",
                    Us(latency.p50_ns), " | ", Us(latency.p99_ns), " | ", Us(latency.p999_ns),
                    " | ", latency.count, " |\n");
    if (report.system != kHomarpcSystem) continue;
    const LoadReport* grpc = Partner(reports, kGrpcSystem, report);
    if (grpc == nullptr) continue;
    const LatencySummary base = CallLatency(FirstStreamTotals(*grpc).calls);
    absl::StrAppend(&ratios, "| ", FormatSize(RequestSize(report)), " | ",
                    RatioText(latency.p50_ns, base.p50_ns), " | ",
                    RatioText(latency.p99_ns, base.p99_ns), " |\n");
  }
  if (reports.empty()) out += "| (no results) ||||||\n";
  if (!ratios.empty()) {
    absl::StrAppend(&out, "\n### ", kHomarpcSystem, " ÷ ", kGrpcSystem,
                    "\n\n| size | p50 | p99 |\n|---:|---:|---:|\n", ratios);
  }
  return out;
}

std::string UnloadedDataName(absl::string_view system) {
  return absl::StrCat("unloaded-", system, ".dat");
}

std::string UnloadedData(const std::vector<LoadReport>& reports, absl::string_view system) {
  std::string out = "# size_bytes p50_us p99_us\n";
  for (const LoadReport& report : reports) {
    if (report.system != system) continue;
    const LatencySummary latency = CallLatency(FirstStreamTotals(report).calls);
    absl::StrAppendFormat(&out, "%d %.3f %.3f\n", RequestSize(report), Micros(latency.p50_ns),
                          Micros(latency.p99_ns));
  }
  return out;
}

// ---- mixed ----

MixedSummary SummarizeMixed(const LoadReport& report) {
  MixedSummary summary;
  summary.small_totals = GatherStream(report, "small");
  summary.bulk_totals = GatherStream(report, "bulk");
  summary.small = CallLatency(summary.small_totals.calls);
  summary.bulk_goodput_gbps = summary.bulk_totals.window_payload_bps / 1e9;
  return summary;
}

std::string MixedJson(const LoadReport& report) {
  const MixedSummary s = SummarizeMixed(report);
  std::vector<Extra> fields = Head(report);
  fields.push_back(Extra::Double("small_p50_us", Micros(s.small.p50_ns)));
  fields.push_back(Extra::Double("small_p99_us", Micros(s.small.p99_ns)));
  fields.push_back(Extra::Double("small_p999_us", Micros(s.small.p999_ns)));
  fields.push_back(Extra::Int("small_samples", static_cast<int64_t>(s.small.count)));
  fields.push_back(
      Extra::Int("small_late_starts", static_cast<int64_t>(s.small_totals.late_starts)));
  fields.push_back(Extra::Int("small_failed", static_cast<int64_t>(s.small_totals.failed)));
  fields.push_back(Extra::Double("bulk_goodput_gbps", s.bulk_goodput_gbps));
  fields.push_back(Extra::Int("bulk_calls", static_cast<int64_t>(s.bulk_totals.calls.size())));
  fields.push_back(Extra::Int("bulk_failed", static_cast<int64_t>(s.bulk_totals.failed)));
  fields.push_back(Extra::Int(
      "unfinished", static_cast<int64_t>(s.small_totals.unfinished + s.bulk_totals.unfinished)));
  return JsonObject(fields);
}

std::string MixedTable(const std::vector<LoadReport>& reports) {
  std::string out =
      "| variant | system | small p50 us | small p99 us | small p99.9 us | small calls | "
      "bulk Gbit/s | bulk calls |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|\n";
  std::vector<std::string> variants;
  for (const LoadReport& report : reports) {
    if (std::find(variants.begin(), variants.end(), report.point.label) == variants.end()) {
      variants.push_back(report.point.label);
    }
  }
  for (const std::string& variant : variants) {
    for (const LoadReport& report : reports) {
      if (report.point.label != variant) continue;
      const MixedSummary s = SummarizeMixed(report);
      absl::StrAppendFormat(&out, "| %s | %s | %s | %s | %s | %d | %.3f | %d |\n", variant,
                            report.system, Us(s.small.p50_ns), Us(s.small.p99_ns),
                            Us(s.small.p999_ns), s.small.count, s.bulk_goodput_gbps,
                            s.bulk_totals.calls.size());
    }
    const LoadReport* homarpc = nullptr;
    const LoadReport* grpc = nullptr;
    for (const LoadReport& report : reports) {
      if (report.point.label != variant) continue;
      if (report.system == kHomarpcSystem && homarpc == nullptr) homarpc = &report;
      if (report.system == kGrpcSystem && grpc == nullptr) grpc = &report;
    }
    if (homarpc == nullptr || grpc == nullptr) continue;
    const MixedSummary h = SummarizeMixed(*homarpc);
    const MixedSummary g = SummarizeMixed(*grpc);
    absl::StrAppend(&out, "| ", variant, " | ", kHomarpcSystem, " ÷ ", kGrpcSystem, " | ",
                    RatioText(h.small.p50_ns, g.small.p50_ns), " | ",
                    RatioText(h.small.p99_ns, g.small.p99_ns), " | ",
                    RatioText(h.small.p999_ns, g.small.p999_ns), " |  | ",
                    RatioText(h.bulk_goodput_gbps, g.bulk_goodput_gbps), " |  |\n");
  }
  if (reports.empty()) out += "| (no results) ||||||||\n";
  return out;
}

std::string MixedCdfName(absl::string_view label, absl::string_view system) {
  return absl::StrCat(label, "-", system, ".cdf");
}

std::string MixedCdf(const LoadReport& report) {
  const StreamTotals small = GatherStream(report, "small");
  std::vector<int64_t> sorted;
  sorted.reserve(small.calls.size());
  for (const CallRecord& call : small.calls) sorted.push_back(call.latency_ns);
  std::sort(sorted.begin(), sorted.end());
  std::string out = "# latency_us cumulative_fraction\n";
  const uint64_t n = sorted.size();
  const uint64_t points = std::min(n, kMaxCdfPoints);
  for (uint64_t k = 1; k <= points; ++k) {
    // Rank ceil(k * n / points): every rank when n <= kMaxCdfPoints, the last one always n.
    const uint64_t rank = (k * n + points - 1) / points;
    absl::StrAppendFormat(&out, "%.3f %.6f\n", Micros(sorted[rank - 1]),
                          static_cast<double>(rank) / static_cast<double>(n));
  }
  return out;
}

// ---- workload ----

std::vector<std::pair<uint64_t, int64_t>> CalibrationPoints(
    const std::vector<LoadReport>& calibration) {
  std::vector<std::pair<uint64_t, int64_t>> points;
  for (const LoadReport& report : calibration) {
    const StreamTotals totals = FirstStreamTotals(report);
    if (totals.calls.empty()) continue;
    points.emplace_back(RequestSize(report), CallLatency(totals.calls).p50_ns);
  }
  return points;
}

std::string CalibrationJson(const LoadReport& report, absl::string_view workload) {
  const StreamTotals totals = FirstStreamTotals(report);
  const LatencySummary latency = CallLatency(totals.calls);
  std::vector<Extra> fields = Head(report);
  fields.push_back(Extra::String("point", "calibration"));
  fields.push_back(Extra::String("workload", workload));
  fields.push_back(Extra::Int("size", static_cast<int64_t>(RequestSize(report))));
  fields.push_back(Extra::Double("p50_us", Micros(latency.p50_ns)));
  fields.push_back(Extra::Double("p99_us", Micros(latency.p99_ns)));
  fields.push_back(Extra::Int("samples", static_cast<int64_t>(latency.count)));
  return JsonObject(fields);
}

WorkloadSummary SummarizeWorkload(const LoadReport& report, absl::string_view workload, double load,
                                  absl::Span<const uint64_t> bucket_uppers,
                                  const UnloadedLatency& reference,
                                  absl::string_view reference_system, const UnloadedLatency& own) {
  WorkloadSummary summary;
  summary.system = report.system;
  summary.workload = std::string(workload);
  summary.load = load;
  summary.link_mbps = report.point.settings.link_mbps;
  summary.totals = GatherAllStreams(report);
  if (summary.link_mbps > 0) {
    summary.achieved_load =
        summary.totals.window_request_bps / (static_cast<double>(summary.link_mbps) * 1e6);
  }
  summary.reference = std::string(reference_system);
  summary.buckets = SlowdownByBucket(summary.totals.calls, bucket_uppers, reference);
  summary.own_buckets = SlowdownByBucket(summary.totals.calls, bucket_uppers, own);
  summary.steal_fraction = report.steal_fraction;
  return summary;
}

std::string WorkloadJson(const WorkloadSummary& summary, absl::string_view label) {
  std::vector<Extra> fields = {
      Extra::String("scenario", "workload"),
      Extra::String("system", summary.system),
      Extra::String("label", label),
      Extra::String("point", "load"),
      Extra::String("workload", summary.workload),
      Extra::Double("load", summary.load),
      Extra::Int("link_mbps", summary.link_mbps),
      Extra::Double("achieved_load", summary.achieved_load),
      Extra::Int("calls", static_cast<int64_t>(summary.totals.calls.size())),
      Extra::Int("failed", static_cast<int64_t>(summary.totals.failed)),
      Extra::Int("unfinished", static_cast<int64_t>(summary.totals.unfinished)),
      Extra::Int("late_starts", static_cast<int64_t>(summary.totals.late_starts)),
      Extra::String("reference", summary.reference)};
  AddStealExtra(summary.steal_fraction, &fields);
  std::vector<std::string> buckets;
  for (size_t i = 0; i < summary.buckets.size(); ++i) {
    const BucketSlowdown& b = summary.buckets[i];
    const double own_p99 = i < summary.own_buckets.size() ? summary.own_buckets[i].p99 : 0;
    buckets.push_back(JsonObject(
        {Extra::Int("upper_bytes", static_cast<int64_t>(b.upper_inclusive)),
         Extra::Int("calls", static_cast<int64_t>(b.calls)), Extra::Double("p50_slowdown", b.p50),
         Extra::Double("p99_slowdown", b.p99), Extra::Double("p99_slowdown_own", own_p99),
         Extra::Double("p50_us", Micros(b.p50_latency_ns)),
         Extra::Double("p99_us", Micros(b.p99_latency_ns))}));
  }
  fields.push_back(Extra{"buckets", absl::StrCat("[", absl::StrJoin(buckets, ","), "]"), false});
  return JsonObject(fields);
}

namespace {

std::string LoadPercent(double load) { return absl::StrCat(std::llround(load * 100)); }

}  // namespace

std::string WorkloadTable(const std::vector<WorkloadSummary>& summaries) {
  if (summaries.empty()) return "";
  const WorkloadSummary& first = summaries[0];
  std::string out =
      absl::StrCat("### ", first.workload, " at ", LoadPercent(first.load), "% load\n\n");
  std::vector<std::string> achieved;
  std::vector<std::string> late;
  for (const WorkloadSummary& s : summaries) {
    achieved.push_back(absl::StrFormat("%s %.1f%%", s.system, s.achieved_load * 100));
    late.push_back(absl::StrCat(s.system, " ", s.totals.late_starts));
  }
  absl::StrAppend(&out, "Offered ", LoadPercent(first.load), "% of ", first.link_mbps,
                  " Mbit/s in request payload; achieved: ", absl::StrJoin(achieved, ", "),
                  ". Late starts: ", absl::StrJoin(late, ", "), ". Slowdown = latency ÷ ",
                  first.reference,
                  "'s unloaded latency at the same size; \"own\" divides by the system's own.\n\n");

  const WorkloadSummary* homarpc = nullptr;
  const WorkloadSummary* grpc = nullptr;
  std::string header = "| size ≤ |";
  std::string align = "|---:|";
  for (const WorkloadSummary& s : summaries) {
    absl::StrAppend(&header, " ", s.system, " calls | ", s.system, " p50 | ", s.system, " p99 |");
    align += "---:|---:|---:|";
    if (s.system != s.reference) {
      absl::StrAppend(&header, " ", s.system, " p99 own |");
      align += "---:|";
    }
    if (s.system == kHomarpcSystem && homarpc == nullptr) homarpc = &s;
    if (s.system == kGrpcSystem && grpc == nullptr) grpc = &s;
  }
  if (homarpc != nullptr && grpc != nullptr) {
    absl::StrAppend(&header, " p99 ", kHomarpcSystem, " ÷ ", kGrpcSystem, " |");
    align += "---:|";
  }
  absl::StrAppend(&out, header, "\n", align, "\n");
  for (size_t i = 0; i < first.buckets.size(); ++i) {
    absl::StrAppend(&out, "| ", FormatSize(first.buckets[i].upper_inclusive), " |");
    for (const WorkloadSummary& s : summaries) {
      if (i >= s.buckets.size()) {
        out += " - | - | - |";
        if (s.system != s.reference) out += " - |";
        continue;
      }
      const BucketSlowdown& b = s.buckets[i];
      absl::StrAppendFormat(&out, " %d | %.2f | %.2f |", b.calls, b.p50, b.p99);
      if (s.system != s.reference) {
        absl::StrAppendFormat(&out, " %.2f |",
                              i < s.own_buckets.size() ? s.own_buckets[i].p99 : 0.0);
      }
    }
    if (homarpc != nullptr && grpc != nullptr) {
      const bool both = i < homarpc->buckets.size() && i < grpc->buckets.size();
      absl::StrAppend(&out, " ",
                      both ? RatioText(homarpc->buckets[i].p99, grpc->buckets[i].p99) : "-", " |");
    }
    out += "\n";
  }
  return out;
}

std::string WorkloadDataName(absl::string_view workload, double load, absl::string_view system) {
  return absl::StrCat("workload-", workload, "-", LoadPercent(load), "-", system, ".dat");
}

std::string WorkloadData(const WorkloadSummary& summary) {
  std::string out = "# bucket_upper_bytes p50_slowdown p99_slowdown calls\n";
  for (const BucketSlowdown& b : summary.buckets) {
    absl::StrAppendFormat(&out, "%d %.3f %.3f %d\n", b.upper_inclusive, b.p50, b.p99, b.calls);
  }
  return out;
}

// ---- Every call ----

std::string CallsDataName(absl::string_view scenario, absl::string_view label,
                          absl::string_view system) {
  std::string safe(label);
  for (char& c : safe) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '_';
  }
  return absl::StrCat(scenario, "-", safe, "-", system, ".calls");
}

std::string CallsData(const LoadReport& report) {
  std::string out = "# client stream start_us latency_us request_bytes response_bytes\n";
  for (size_t client = 0; client < report.clients.size(); ++client) {
    for (const StreamReport& stream : report.clients[client].streams) {
      for (const CallRecord& call : stream.calls) {
        absl::StrAppendFormat(&out, "%d %s %.1f %.1f %d %d\n", client, stream.name,
                              call.start_ns / 1e3, call.latency_ns / 1e3, call.request_bytes,
                              call.response_bytes);
      }
    }
  }
  return out;
}

// ---- cpu ----

CpuSummary SummarizeCpu(const LoadReport& report) {
  CpuSummary summary;
  summary.totals = GatherAllStreams(report);
  summary.calls = summary.totals.window_calls;
  int64_t client_ns = 0;
  int64_t server_ns = 0;
  for (const ProcessCpu& cpu : report.cpu) {
    if (cpu.role == "server") {
      server_ns += cpu.cpu_ns;
      summary.server_involuntary_switches += cpu.involuntary_switches;
    } else {
      client_ns += cpu.cpu_ns;
      summary.client_involuntary_switches += cpu.involuntary_switches;
    }
  }
  if (summary.calls > 0) {
    const double calls = static_cast<double>(summary.calls);
    summary.client_us_per_rpc = Micros(client_ns) / calls;
    summary.server_us_per_rpc = Micros(server_ns) / calls;
    summary.total_us_per_rpc = Micros(client_ns + server_ns) / calls;
  }
  return summary;
}

namespace {

double OfferedRate(const LoadReport& report) {
  const StreamSpec* stream = FirstStream(report);
  return stream == nullptr ? 0 : stream->rate_per_sec;
}

}  // namespace

std::string CpuJson(const LoadReport& report) {
  const CpuSummary s = SummarizeCpu(report);
  std::vector<Extra> fields = Head(report);
  fields.push_back(Extra::Double("rate", OfferedRate(report)));
  fields.push_back(Extra::Int("calls", static_cast<int64_t>(s.calls)));
  fields.push_back(Extra::Double("client_us_per_rpc", s.client_us_per_rpc));
  fields.push_back(Extra::Double("server_us_per_rpc", s.server_us_per_rpc));
  fields.push_back(Extra::Double("total_us_per_rpc", s.total_us_per_rpc));
  fields.push_back(Extra::Int("client_involuntary_switches", s.client_involuntary_switches));
  fields.push_back(Extra::Int("server_involuntary_switches", s.server_involuntary_switches));
  fields.push_back(Extra::Int("failed", static_cast<int64_t>(s.totals.failed)));
  fields.push_back(Extra::Int("late_starts", static_cast<int64_t>(s.totals.late_starts)));
  return JsonObject(fields);
}

std::string CpuTable(const std::vector<LoadReport>& reports) {
  std::string out =
      "| system | rate/s | calls | client us/RPC | server us/RPC | total us/RPC | involuntary "
      "switches client / server |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  const LoadReport* homarpc = nullptr;
  const LoadReport* grpc = nullptr;
  for (const LoadReport& report : reports) {
    const CpuSummary s = SummarizeCpu(report);
    absl::StrAppendFormat(&out, "| %s | %.0f | %d | %.2f | %.2f | %.2f | %d / %d |\n",
                          report.system, OfferedRate(report), s.calls, s.client_us_per_rpc,
                          s.server_us_per_rpc, s.total_us_per_rpc, s.client_involuntary_switches,
                          s.server_involuntary_switches);
    if (report.system == kHomarpcSystem && homarpc == nullptr) homarpc = &report;
    if (report.system == kGrpcSystem && grpc == nullptr) grpc = &report;
  }
  if (reports.empty()) out += "| (no results) |||||||\n";
  if (homarpc != nullptr && grpc != nullptr) {
    const CpuSummary h = SummarizeCpu(*homarpc);
    const CpuSummary g = SummarizeCpu(*grpc);
    absl::StrAppend(&out, "| ", kHomarpcSystem, " ÷ ", kGrpcSystem, " |  |  | ",
                    RatioText(h.client_us_per_rpc, g.client_us_per_rpc), " | ",
                    RatioText(h.server_us_per_rpc, g.server_us_per_rpc), " | ",
                    RatioText(h.total_us_per_rpc, g.total_us_per_rpc), " |  |\n");
  }
  return out;
}

}  // namespace homarpc::bench
