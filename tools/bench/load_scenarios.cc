// load_scenarios: builds the load scenarios' points, runs them for every selected system
// through RunLoadPoint(), and prints / writes what load_report.h makes of the reports (see
// load_scenarios.h).
//
// Runs on main()'s thread, which has no other threads (RunLoadPoint forks); the systems are
// only constructed here — gRPC and homarpc start inside the forked processes.
//
// DESIGN NOTES
// - Systems run back to back at each point (the same offered load, seeds included, for
//   both), so a drift of the machine over the run shows up between points, not between the
//   two columns of one row.
// - workload: the unloaded calibration is measured once per (workload, system) and reused for
//   every --loads value (it does not depend on the load). One point per calibration size:
//   the streams of one client run at the same time, so sizes in one point would queue behind
//   each other. Each calibration point is short — about kCalibrationCalls calls at the link
//   rate, at least kCalibrationMinNanos, never longer than --duration_ms — since its median is
//   all slowdown needs. The floor and the warmup matter for short messages: with 20 ms and 3
//   warmup calls a point had ~50-270 samples on a noisy 2-core VM, and one (36 B) read a p50
//   of 404 us between neighbours of 83 and 117 us (2026-12-02), a reference 4x too high.
// - workload's slowdown reference is homarpc's calibration when homarpc ran (load_scenarios.h
//   says why); a system whose calibration produced nothing cannot have slowdowns, and its
//   loaded points are reported as failed.
#include "tools/bench/load_scenarios.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/bench/load_report.h"
#include "tools/bench/report.h"
#include "tools/bench/rpc_scenarios.h"
#include "tools/bench/workload.h"

namespace homarpc::bench {
namespace {

constexpr char kUnloaded[] = "unloaded";
constexpr char kMixed[] = "mixed";
constexpr char kMixedShared[] = "mixed-shared";
constexpr char kWorkload[] = "workload";
constexpr char kCpu[] = "cpu";

constexpr int64_t kNanosPerMilli = 1000 * 1000;
// Every load scenario answers small calls with this many payload bytes.
constexpr uint64_t kSmallBytes = 64;
// Calibration: about this many calls per size, each point lasting at least / at most this.
constexpr int64_t kCalibrationCalls = 40;
constexpr int64_t kCalibrationMinNanos = 500 * kNanosPerMilli;
constexpr int64_t kCalibrationMaxNanos = 2000 * kNanosPerMilli;
// Calibration calls measure one idle round trip. Warmup: up to kCalibrationWarmup calls (the
// loops learn that calls come back to back), but no more than ~100 ms of them, and at least 3.
constexpr int kCalibrationWarmup = 50;
constexpr int64_t kCalibrationWarmupNanos = 100 * kNanosPerMilli;

struct ScenarioInfo {
  const char* name;
  const char* description;
};

constexpr ScenarioInfo kScenarios[] = {
    {kUnloaded,
     "Round-trip latency by request size on the idle network, one call at a time (64 B "
     "responses): the denominators of slowdown. homarpc against gRPC C++; ratios are "
     "homarpc ÷ grpc."},
    {kMixed,
     "Small 64 B calls at a fixed rate while bulk fetches keep the server's link busy: "
     "`mixed` from two client hosts, `mixed-shared` both streams over one channel. Small-call "
     "latency and bulk goodput, homarpc against gRPC C++."},
    {kWorkload,
     "W1-W5 request sizes, open-loop Poisson arrivals from every client host at a fraction of "
     "the link rate, 64 B responses: slowdown (latency ÷ unloaded latency) by size bucket, "
     "homarpc against gRPC C++."},
    {kCpu,
     "CPU time per 64 B unary RPC at a fixed rate, client and server processes' own "
     "accounting, homarpc against gRPC C++."},
};

std::vector<uint64_t> DefaultUnloadedSizes() {
  // 64 B .. 4 MiB by powers of 4, and 8 MiB.
  std::vector<uint64_t> sizes;
  for (uint64_t size = 64; size <= (uint64_t{4} << 20); size *= 4) sizes.push_back(size);
  sizes.push_back(uint64_t{8} << 20);
  return sizes;
}

StreamSpec ClosedLoop(absl::string_view name, uint64_t request_bytes, uint64_t response_bytes,
                      int in_flight) {
  StreamSpec stream;
  stream.name = std::string(name);
  stream.arrival = Arrival::kClosedLoop;
  stream.in_flight = in_flight;
  stream.request_bytes = request_bytes;
  stream.response_bytes = response_bytes;
  return stream;
}

StreamSpec FixedRate(absl::string_view name, double rate_per_sec) {
  StreamSpec stream;
  stream.name = std::string(name);
  stream.arrival = Arrival::kFixedRate;
  stream.rate_per_sec = rate_per_sec;
  stream.request_bytes = kSmallBytes;
  stream.response_bytes = kSmallBytes;
  return stream;
}

// The whole run of one scenario: its systems, the failures so far, output helpers.
class Runner {
 public:
  explicit Runner(const LoadOptions& options) : options_(options) {
    hosts_ = options.client_netns;
    if (hosts_.empty()) hosts_ = {"", ""};  // loopback: every "host" is this namespace
    const std::vector<std::string> names =
        options.systems.empty() ? std::vector<std::string>{kGrpcSystem, kHomarpcSystem}
                                : options.systems;
    for (const std::string& name : names) {
      if (name == kGrpcSystem) {
        systems_.push_back(MakeGrpcLoadSystem(options.callback_handlers));
      } else if (name == kHomarpcSystem) {
        systems_.push_back(
            MakeHomarpcLoadSystem(options.homarpc_inline_handlers, options.callback_handlers));
      } else {
        failures_.push_back({name, options.scenario, "unknown system (known: grpc, homarpc)"});
      }
    }
  }

  const std::vector<std::unique_ptr<LoadSystem>>& systems() const { return systems_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  const LoadOptions& options() const { return options_; }
  const std::vector<LoadFailure>& failures() const { return failures_; }

  void Fail(absl::string_view system, absl::string_view label, absl::string_view error) {
    std::fprintf(stderr, "homarpc-bench: FAILED %s at %s: %s\n", std::string(system).c_str(),
                 std::string(label).c_str(), std::string(error).c_str());
    failures_.push_back({std::string(system), std::string(label), std::string(error)});
  }

  // A point of this scenario with the options' phases and settings; clients and sizes to fill.
  LoadPoint NewPoint(absl::string_view label) const {
    LoadPoint point;
    point.scenario = options_.scenario;
    point.label = std::string(label);
    point.warmup_calls = options_.warmup_calls;
    point.duration_ns = options_.duration_ms * kNanosPerMilli;
    point.settings = options_.settings;
    return point;
  }

  std::optional<LoadReport> Run(const LoadSystem& system, const LoadPoint& point) {
    std::fprintf(stderr, "homarpc-bench: running %s at %s %s\n", system.name().c_str(),
                 point.scenario.c_str(), point.label.c_str());
    absl::StatusOr<LoadReport> report = RunLoadPoint(system, point);
    if (!report.ok()) {
      Fail(system.name(), point.label, report.status().ToString());
      return std::nullopt;
    }
    if (!options_.calls_dir.empty()) {
      WriteFile(options_.calls_dir, CallsDataName(point.scenario, point.label, system.name()),
                CallsData(*report));
    }
    return *std::move(report);
  }

  // Prints `line` with --json and appends it to --json_out's file; a failure to write that
  // fails the run (once), not a point.
  void Json(const std::string& line) {
    if (options_.json) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
    if (options_.json_out == nullptr || json_out_failed_) return;
    std::fprintf(options_.json_out, "%s\n", line.c_str());
    if (std::fflush(options_.json_out) != 0 || std::ferror(options_.json_out)) {
      json_out_failed_ = true;
      Fail("-", "--json_out", "cannot write the JSON lines");
    }
  }

  // Writes DIR/name when --data_dir is set; a failure to write fails the run (not a point).
  void Data(const std::string& name, const std::string& text) {
    if (!options_.data_dir.empty()) WriteFile(options_.data_dir, name, text);
  }

  // The Markdown section's head: heading, description, settings.
  std::string Heading() const;

 private:
  // Writes DIR/name (creating DIR); a failure to write fails the run (not a point).
  void WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out) Fail("-", name, absl::StrCat("cannot write ", path.string()));
  }

  const LoadOptions& options_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<LoadSystem>> systems_;
  std::vector<LoadFailure> failures_;
  bool json_out_failed_ = false;
};

std::string Runner::Heading() const {
  utsname host{};
  uname(&host);
  const RunSettings& s = options_.settings;
  std::string where;
  if (s.server_netns.empty()) {
    where = "Loopback (server and client processes in this network namespace)";
  } else {
    const char* rate = std::getenv("HOMARPC_TESTBED_RATE");
    where = absl::StrCat("Testbed: server in ", s.server_netns, " at ", s.server_host,
                         ", client hosts ", absl::StrJoin(hosts_, ", "),
                         " (tools/testbed.sh, rate ", rate == nullptr ? "?" : rate, ")");
  }
  return absl::StrFormat(
      "## %s\n\n%s\n\nPer point: %d ms measuring after %d warmup calls per stream. Server "
      "handlers: %s API on both systems. homarpc: %s executor=%s. %s, %d CPUs, %s %s.\n\n",
      options_.scenario, LoadScenarioDescription(options_.scenario), options_.duration_ms,
      options_.warmup_calls, options_.callback_handlers ? "callback" : "sync",
      DescribeHomarpcSettings(s), options_.homarpc_inline_handlers ? "inline" : "pool", where,
      std::thread::hardware_concurrency(), host.sysname, host.release);
}

// ---- unloaded ----

std::string RunUnloaded(Runner& runner) {
  const LoadOptions& options = runner.options();
  const std::vector<uint64_t> sizes =
      options.sizes.empty() ? DefaultUnloadedSizes() : options.sizes;
  std::vector<LoadReport> reports;
  for (uint64_t size : sizes) {
    for (const auto& system : runner.systems()) {
      LoadPoint point = runner.NewPoint(FormatSize(size));
      point.clients = {ClientSpec{runner.hosts()[0],
                                  {ClosedLoop(kUnloaded, size, kSmallBytes, /*in_flight=*/1)}}};
      point.max_message_bytes = std::max(size, kSmallBytes);
      std::optional<LoadReport> report = runner.Run(*system, point);
      if (!report.has_value()) continue;
      runner.Json(UnloadedJson(*report));
      reports.push_back(*std::move(report));
    }
  }
  for (const auto& system : runner.systems()) {
    runner.Data(UnloadedDataName(system->name()), UnloadedData(reports, system->name()));
  }
  return absl::StrCat(UnloadedTable(reports), CallProblems(reports), StealNote(reports));
}

// ---- mixed ----

std::string RunMixed(Runner& runner) {
  const LoadOptions& options = runner.options();
  const StreamSpec bulk =
      ClosedLoop("bulk", kSmallBytes, options.bulk_bytes, options.bulk_in_flight);
  const StreamSpec small = FixedRate("small", options.small_rate);
  std::vector<std::pair<std::string, std::vector<ClientSpec>>> variants;
  if (runner.hosts().size() >= 2) {
    variants.push_back(
        {kMixed, {ClientSpec{runner.hosts()[0], {bulk}}, ClientSpec{runner.hosts()[1], {small}}}});
  } else {
    for (const auto& system : runner.systems()) {
      runner.Fail(system->name(), kMixed,
                  "needs two client hosts (tools/testbed.sh --hosts=3 or more)");
    }
  }
  variants.push_back({kMixedShared, {ClientSpec{runner.hosts()[0], {bulk, small}}}});

  std::vector<LoadReport> reports;
  for (const auto& [label, clients] : variants) {
    for (const auto& system : runner.systems()) {
      LoadPoint point = runner.NewPoint(label);
      point.clients = clients;
      point.max_message_bytes = std::max(options.bulk_bytes, kSmallBytes);
      std::optional<LoadReport> report = runner.Run(*system, point);
      if (!report.has_value()) continue;
      runner.Json(MixedJson(*report));
      runner.Data(MixedCdfName(label, system->name()), MixedCdf(*report));
      reports.push_back(*std::move(report));
    }
  }
  return absl::StrCat(MixedTable(reports), CallProblems(reports), StealNote(reports));
}

// ---- workload ----

// One calibration call's expected time: request and a small response at the link rate, plus
// a fixed 200 us.
double CalibrationCallNanos(uint64_t size, int64_t link_mbps) {
  const double wire_ns = static_cast<double>(size + kSmallBytes) * 8 * 1000 /
                         static_cast<double>(std::max<int64_t>(link_mbps, 1));
  return wire_ns + 200 * 1000;
}

// How long one calibration point measures `size`: about kCalibrationCalls calls, within the
// bounds above and never longer than a loaded point.
int64_t CalibrationNanos(uint64_t size, int64_t link_mbps, int64_t duration_ns) {
  const int64_t want =
      static_cast<int64_t>(CalibrationCallNanos(size, link_mbps) * kCalibrationCalls);
  return std::min(std::clamp(want, kCalibrationMinNanos, kCalibrationMaxNanos), duration_ns);
}

// Warmup calls before a calibration point: as many as fit in kCalibrationWarmupNanos.
int CalibrationWarmupCalls(uint64_t size, int64_t link_mbps) {
  const double fit = kCalibrationWarmupNanos / CalibrationCallNanos(size, link_mbps);
  return static_cast<int>(std::clamp<double>(fit, 3, kCalibrationWarmup));
}

std::string RunWorkload(Runner& runner) {
  const LoadOptions& options = runner.options();
  const int64_t link_mbps = options.settings.link_mbps;
  if (link_mbps <= 0) {
    for (const auto& system : runner.systems()) {
      runner.Fail(system->name(), kWorkload,
                  "no link rate: the offered load is a fraction of it (--link_mbps or --testbed)");
    }
    return "";
  }
  const int clients = static_cast<int>(runner.hosts().size());
  std::string out;
  std::vector<LoadReport> all_reports;  // for CallProblems and StealNote
  for (const std::string& name : options.workloads) {
    absl::StatusOr<Workload> parsed = Workload::BuiltIn(name);
    if (!parsed.ok()) {
      for (const auto& system : runner.systems()) {
        runner.Fail(system->name(), name, parsed.status().ToString());
      }
      continue;
    }
    const Workload& workload = *parsed;
    const std::vector<uint64_t> uppers = DecileBucketUppers(workload);

    // The unloaded calibration, per system.
    std::map<std::string, std::optional<UnloadedLatency>> unloaded;
    for (const auto& system : runner.systems()) {
      std::vector<LoadReport> calibration;
      for (uint64_t size : CalibrationSizes(workload)) {
        LoadPoint point = runner.NewPoint(absl::StrCat(name, " calibration ", FormatSize(size)));
        point.clients = {
            ClientSpec{runner.hosts()[0], {ClosedLoop("calibration", size, kSmallBytes, 1)}}};
        point.warmup_calls =
            std::min(options.warmup_calls, CalibrationWarmupCalls(size, link_mbps));
        point.duration_ns = CalibrationNanos(size, link_mbps, point.duration_ns);
        point.max_message_bytes = std::max(size, kSmallBytes);
        std::optional<LoadReport> report = runner.Run(*system, point);
        if (!report.has_value()) continue;
        runner.Json(CalibrationJson(*report, name));
        calibration.push_back(*std::move(report));
      }
      std::vector<std::pair<uint64_t, int64_t>> points = CalibrationPoints(calibration);
      if (!points.empty()) unloaded[system->name()].emplace(std::move(points));
    }
    const bool homarpc_reference = unloaded.count(kHomarpcSystem) > 0;

    for (size_t l = 0; l < options.loads.size(); ++l) {
      const double load = options.loads[l];
      const std::string label = absl::StrCat(name, " ", std::llround(load * 100), "%");
      const double rate = PoissonRatePerClient(workload, load, link_mbps, clients);
      std::vector<WorkloadSummary> summaries;
      for (const auto& system : runner.systems()) {
        const auto own = unloaded.find(system->name());
        if (own == unloaded.end()) {
          runner.Fail(system->name(), label, "no unloaded calibration, so no slowdown");
          continue;
        }
        LoadPoint point = runner.NewPoint(label);
        for (int c = 0; c < clients; ++c) {
          StreamSpec stream;
          stream.name = absl::StrCat(name, "-c", c);  // unique in the point
          stream.arrival = Arrival::kPoisson;
          stream.rate_per_sec = rate;
          stream.workload = name;
          // The same seeds for every system: the same offered sequence of sizes and gaps.
          stream.seed = 1000 * (l + 1) + static_cast<uint64_t>(c) + 1;
          stream.request_bytes = workload.points().front().length;
          stream.response_bytes = kSmallBytes;
          point.clients.push_back(ClientSpec{runner.hosts()[c], {stream}});
        }
        point.max_message_bytes = std::max(workload.MaxBytes(), kSmallBytes);
        std::optional<LoadReport> report = runner.Run(*system, point);
        if (!report.has_value()) continue;
        const std::string reference =
            homarpc_reference ? std::string(kHomarpcSystem) : system->name();
        WorkloadSummary summary = SummarizeWorkload(
            *report, name, load, uppers, *unloaded.at(reference), reference, *own->second);
        runner.Json(WorkloadJson(summary, label));
        runner.Data(WorkloadDataName(name, load, system->name()), WorkloadData(summary));
        summaries.push_back(std::move(summary));
        all_reports.push_back(*std::move(report));
      }
      if (!summaries.empty()) absl::StrAppend(&out, WorkloadTable(summaries), "\n");
    }
  }
  return absl::StrCat(out, CallProblems(all_reports), StealNote(all_reports));
}

// ---- cpu ----

std::string RunCpu(Runner& runner) {
  const LoadOptions& options = runner.options();
  std::vector<LoadReport> reports;
  for (const auto& system : runner.systems()) {
    LoadPoint point = runner.NewPoint(absl::StrFormat("64 B at %.0f/s", options.cpu_rate));
    point.clients = {ClientSpec{runner.hosts()[0], {FixedRate("cpu", options.cpu_rate)}}};
    point.max_message_bytes = kSmallBytes;
    std::optional<LoadReport> report = runner.Run(*system, point);
    if (!report.has_value()) continue;
    runner.Json(CpuJson(*report));
    reports.push_back(*std::move(report));
  }
  return absl::StrCat(CpuTable(reports), CallProblems(reports), StealNote(reports));
}

}  // namespace

bool IsLoadScenario(absl::string_view scenario) {
  for (const ScenarioInfo& info : kScenarios) {
    if (scenario == info.name) return true;
  }
  return false;
}

std::vector<std::string> LoadScenarioNames() {
  std::vector<std::string> names;
  for (const ScenarioInfo& info : kScenarios) names.push_back(info.name);
  return names;
}

std::string LoadScenarioDescription(absl::string_view scenario) {
  for (const ScenarioInfo& info : kScenarios) {
    if (scenario == info.name) return info.description;
  }
  return "";
}

int LoadMessageLimit(const LoadPoint& point) {
  Point shape;
  shape.request_bytes = point.max_message_bytes;
  shape.response_bytes = point.max_message_bytes;
  return MessageLimitFor(shape);
}

int RunLoadScenario(const LoadOptions& options) {
  Runner runner(options);
  std::string body;
  if (options.scenario == kUnloaded) {
    body = RunUnloaded(runner);
  } else if (options.scenario == kMixed) {
    body = RunMixed(runner);
  } else if (options.scenario == kWorkload) {
    body = RunWorkload(runner);
  } else if (options.scenario == kCpu) {
    body = RunCpu(runner);
  } else {
    runner.Fail("-", options.scenario, "not a load scenario");
  }
  if (!options.json) {
    std::printf("%s%s%s", runner.Heading().c_str(), body.c_str(),
                FailureList(runner.failures()).c_str());
  }
  return runner.failures().empty() ? 0 : 1;
}

}  // namespace homarpc::bench
