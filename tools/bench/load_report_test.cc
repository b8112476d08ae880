// Tests for tools/bench/load_report.cc: hand-made LoadReports in, exact table rows, ratios,
// JSON lines and data file text out. Nothing runs.
#include "tools/bench/load_report.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/workload.h"

namespace homarpc::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMicro = 1000;
constexpr int64_t kSecond = 1000 * 1000 * 1000;

// `count` calls of `latency_us` each, started at `start_ns`.
std::vector<CallRecord> Calls(int count, int64_t latency_us, uint64_t request_bytes,
                              uint64_t response_bytes, int64_t start_ns = 0) {
  std::vector<CallRecord> calls;
  for (int i = 0; i < count; ++i) {
    calls.push_back(CallRecord{start_ns, latency_us * kMicro, request_bytes, response_bytes});
  }
  return calls;
}

void Append(std::vector<CallRecord>& to, const std::vector<CallRecord>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

// 100 calls whose nearest-rank p50, p99 and p99.9 are p50_us, p99_us and p999_us.
std::vector<CallRecord> Tail(int64_t p50_us, int64_t p99_us, int64_t p999_us,
                             uint64_t request_bytes = 64, uint64_t response_bytes = 64) {
  std::vector<CallRecord> calls = Calls(98, p50_us, request_bytes, response_bytes);
  Append(calls, Calls(1, p99_us, request_bytes, response_bytes));
  Append(calls, Calls(1, p999_us, request_bytes, response_bytes));
  return calls;
}

StreamSpec Stream(const std::string& name, uint64_t request_bytes, uint64_t response_bytes) {
  StreamSpec stream;
  stream.name = name;
  stream.request_bytes = request_bytes;
  stream.response_bytes = response_bytes;
  return stream;
}

StreamReport StreamOf(const std::string& name, std::vector<CallRecord> calls) {
  StreamReport report;
  report.name = name;
  report.started = calls.size();
  report.calls = std::move(calls);
  return report;
}

// A report of one client running one stream.
LoadReport OneStream(const std::string& scenario, const std::string& system,
                     const std::string& label, StreamSpec spec, std::vector<CallRecord> calls) {
  LoadReport report;
  report.system = system;
  report.point.scenario = scenario;
  report.point.label = label;
  report.point.duration_ns = kSecond;
  report.point.clients = {ClientSpec{"", {spec}}};
  ClientReport client;
  client.measure_ns = kSecond;
  client.streams.push_back(StreamOf(spec.name, std::move(calls)));
  report.clients.push_back(std::move(client));
  return report;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// ---- shared ----

TEST(LoadReport, RatioTextIsTwoDecimalsOrADash) {
  EXPECT_EQ(RatioText(1, 4), "0.25x");
  EXPECT_EQ(RatioText(3, 2), "1.50x");
  EXPECT_EQ(RatioText(1, 0), "-");
}

TEST(LoadReport, GatherStreamMergesClientsAndCountsOnlyTheWindowForRates) {
  LoadReport report;
  report.point.duration_ns = 2 * kSecond;  // used by the client without a measure_ns
  ClientReport first;
  first.measure_ns = kSecond;
  StreamReport a = StreamOf("s", Calls(3, 100, 1000, 24));
  // Completes after the window (0.9 s + 0.2 s): a sample, but not in the rate.
  Append(a.calls, Calls(1, 200 * 1000, 1000, 24, 900 * 1000 * 1000));
  a.started = 5;
  a.failed = 1;
  a.first_error = "DEADLINE_EXCEEDED: late";
  a.late_starts = 2;
  first.streams = {a, StreamOf("other", Calls(7, 1, 1, 1))};
  ClientReport second;  // no measure_ns: the point's 2 s
  StreamReport b = StreamOf("s", Calls(2, 100, 4000, 0));
  b.unfinished = 3;
  b.first_error = "UNAVAILABLE: second";
  second.streams = {b};
  report.clients = {first, second};

  const StreamTotals totals = GatherStream(report, "s");
  EXPECT_EQ(totals.calls.size(), 6u);
  EXPECT_EQ(totals.started, 7u);
  EXPECT_EQ(totals.failed, 1u);
  EXPECT_EQ(totals.unfinished, 3u);
  EXPECT_EQ(totals.late_starts, 2u);
  EXPECT_EQ(totals.window_calls, 5u);
  EXPECT_EQ(totals.first_error, "DEADLINE_EXCEEDED: late");
  // First client: 3 x 1024 B in 1 s; second: 2 x 4000 B in 2 s.
  EXPECT_DOUBLE_EQ(totals.window_payload_bps, 3 * 1024 * 8 + 2 * 4000 * 8 / 2.0);
  EXPECT_DOUBLE_EQ(totals.window_request_bps, 3 * 1000 * 8 + 2 * 4000 * 8 / 2.0);
}

TEST(LoadReport, FailureListAndCallProblems) {
  EXPECT_EQ(FailureList({}), "");
  EXPECT_EQ(FailureList({{"grpc", "w3 50%", "INTERNAL: died"}}),
            "\nFailed:\n- grpc at w3 50%: INTERNAL: died\n");

  LoadReport fine = OneStream("cpu", "grpc", "x", Stream("cpu", 64, 64), Calls(5, 10, 64, 64));
  EXPECT_EQ(CallProblems({fine}), "");
  LoadReport bad =
      OneStream("mixed", "homarpc", "mixed", Stream("small", 64, 64), Calls(5, 10, 64, 64));
  bad.clients[0].streams[0].failed = 3;
  bad.clients[0].streams[0].first_error = "CANCELLED: x";
  bad.clients[0].streams[0].unfinished = 1;
  bad.clients[0].streams[0].late_starts = 12;
  EXPECT_EQ(CallProblems({fine, bad}),
            "\nCall problems:\n- homarpc mixed small: 3 failed (first: CANCELLED: x), 1 "
            "unfinished, 12 late starts (the client fell behind the offered rate)\n");
}

// ---- unloaded ----

std::vector<LoadReport> UnloadedReports() {
  return {
      OneStream("unloaded", "grpc", "64 B", Stream("unloaded", 64, 64), Tail(40, 100, 200)),
      OneStream("unloaded", "homarpc", "64 B", Stream("unloaded", 64, 64), Tail(10, 20, 40)),
      OneStream("unloaded", "homarpc", "1 MiB", Stream("unloaded", 1 << 20, 64),
                Tail(9000, 9500, 9900)),
  };
}

TEST(LoadReport, UnloadedTableRowsAndRatios) {
  const std::string table = UnloadedTable(UnloadedReports());
  EXPECT_THAT(table, HasSubstr("| 64 B | grpc | 40.0 | 100.0 | 200.0 | 100 |\n"));
  EXPECT_THAT(table, HasSubstr("| 64 B | homarpc | 10.0 | 20.0 | 40.0 | 100 |\n"));
  EXPECT_THAT(table, HasSubstr("| 1 MiB | homarpc | 9000.0 | 9500.0 | 9900.0 | 100 |\n"));
  EXPECT_THAT(table, HasSubstr("### homarpc ÷ grpc"));
  EXPECT_THAT(table, HasSubstr("| 64 B | 0.25x | 0.20x |\n"));
  EXPECT_THAT(table, Not(HasSubstr("| 1 MiB | 0.")));  // no gRPC at 1 MiB: no ratio row
}

TEST(LoadReport, UnloadedJsonAndData) {
  EXPECT_EQ(UnloadedJson(UnloadedReports()[1]),
            "{\"scenario\":\"unloaded\",\"system\":\"homarpc\",\"label\":\"64 B\",\"size\":64,"
            "\"p50_us\":10.000,\"p99_us\":20.000,\"p999_us\":40.000,\"samples\":100,"
            "\"failed\":0,\"unfinished\":0}");
  EXPECT_EQ(UnloadedDataName("grpc"), "unloaded-grpc.dat");
  EXPECT_EQ(UnloadedData(UnloadedReports(), "homarpc"),
            "# size_bytes p50_us p99_us\n64 10.000 20.000\n1048576 9000.000 9500.000\n");
}

// ---- mixed ----

constexpr uint64_t kBulk = uint64_t{8} << 20;

// Two clients (bulk, small), or one client with both streams (shared).
LoadReport MixedReport(const std::string& system, const std::string& label, int bulk_calls,
                       std::vector<CallRecord> small) {
  LoadReport report;
  report.system = system;
  report.point.scenario = "mixed";
  report.point.label = label;
  report.point.duration_ns = kSecond;
  StreamReport bulk = StreamOf("bulk", Calls(bulk_calls, 50 * 1000, 64, kBulk));
  // Still finishing after the window: counted as a call, not in the goodput.
  Append(bulk.calls, Calls(1, 300 * 1000, 64, kBulk, 800 * 1000 * 1000));
  StreamReport small_stream = StreamOf("small", std::move(small));
  if (label == "mixed-shared") {
    report.point.clients = {ClientSpec{"", {Stream("bulk", 64, kBulk), Stream("small", 64, 64)}}};
    ClientReport client;
    client.measure_ns = kSecond;
    client.streams = {bulk, small_stream};
    report.clients = {client};
  } else {
    report.point.clients = {ClientSpec{"", {Stream("bulk", 64, kBulk)}},
                            ClientSpec{"", {Stream("small", 64, 64)}}};
    ClientReport a;
    a.measure_ns = kSecond;
    a.streams = {bulk};
    ClientReport b;
    b.measure_ns = kSecond;
    b.streams = {small_stream};
    report.clients = {a, b};
  }
  return report;
}

TEST(LoadReport, MixedGoodputCountsBulkPayloadInsideTheWindow) {
  const MixedSummary s = SummarizeMixed(MixedReport("homarpc", "mixed", 10, Tail(10, 20, 40)));
  EXPECT_EQ(s.bulk_totals.calls.size(), 11u);
  EXPECT_DOUBLE_EQ(s.bulk_goodput_gbps, 10.0 * (kBulk + 64) * 8 / 1e9);
  EXPECT_EQ(s.small.p99_ns, 20 * kMicro);
}

TEST(LoadReport, MixedTableHasARatioRowPerVariant) {
  const std::vector<LoadReport> reports = {
      MixedReport("grpc", "mixed", 8, Tail(400, 2000, 5000)),
      MixedReport("homarpc", "mixed", 10, Tail(40, 100, 250)),
      MixedReport("grpc", "mixed-shared", 8, Tail(800, 4000, 8000)),
      MixedReport("homarpc", "mixed-shared", 6, Tail(40, 200, 400)),
  };
  const std::vector<std::string> rows = Lines(MixedTable(reports));
  ASSERT_EQ(rows.size(), 2u + 6u);
  EXPECT_EQ(rows[2], "| mixed | grpc | 400.0 | 2000.0 | 5000.0 | 100 | 0.537 | 9 |");
  EXPECT_EQ(rows[3], "| mixed | homarpc | 40.0 | 100.0 | 250.0 | 100 | 0.671 | 11 |");
  EXPECT_EQ(rows[4], "| mixed | homarpc ÷ grpc | 0.10x | 0.05x | 0.05x |  | 1.25x |  |");
  EXPECT_EQ(rows[5], "| mixed-shared | grpc | 800.0 | 4000.0 | 8000.0 | 100 | 0.537 | 9 |");
  EXPECT_EQ(rows[6], "| mixed-shared | homarpc | 40.0 | 200.0 | 400.0 | 100 | 0.403 | 7 |");
  EXPECT_EQ(rows[7], "| mixed-shared | homarpc ÷ grpc | 0.05x | 0.05x | 0.05x |  | 0.75x |  |");
}

TEST(LoadReport, MixedJson) {
  EXPECT_EQ(MixedJson(MixedReport("homarpc", "mixed", 10, Tail(40, 100, 250))),
            "{\"scenario\":\"mixed\",\"system\":\"homarpc\",\"label\":\"mixed\","
            "\"small_p50_us\":40.000,\"small_p99_us\":100.000,\"small_p999_us\":250.000,"
            "\"small_samples\":100,\"small_late_starts\":0,\"small_failed\":0,"
            "\"bulk_goodput_gbps\":0.671,\"bulk_calls\":11,\"bulk_failed\":0,\"unfinished\":0}");
}

TEST(LoadReport, StealGoesIntoTheJsonAndANoteWhenKnown) {
  LoadReport known = MixedReport("homarpc", "mixed", 10, Tail(40, 100, 250));
  known.steal_fraction = 0.1234;
  EXPECT_EQ(MixedJson(known),
            "{\"scenario\":\"mixed\",\"system\":\"homarpc\",\"label\":\"mixed\","
            "\"steal_pct\":12.340,"
            "\"small_p50_us\":40.000,\"small_p99_us\":100.000,\"small_p999_us\":250.000,"
            "\"small_samples\":100,\"small_late_starts\":0,\"small_failed\":0,"
            "\"bulk_goodput_gbps\":0.671,\"bulk_calls\":11,\"bulk_failed\":0,\"unfinished\":0}");
  const LoadReport unknown = MixedReport("grpc", "mixed", 10, Tail(40, 100, 250));
  LoadReport idle = MixedReport("grpc", "mixed-shared", 10, Tail(40, 100, 250));
  idle.steal_fraction = 0.0;
  EXPECT_EQ(StealNote({}), "");
  EXPECT_EQ(StealNote({unknown}), "");
  EXPECT_EQ(StealNote({unknown, known, idle}),
            "\nSteal (the share of the machine's CPU time its CPUs were ready to run but the host "
            "ran other guests or its own work, while each point measured): homarpc mixed 12.3%, "
            "grpc mixed-shared 0.0%\n");
}

TEST(LoadReport, MixedCdfKeepsEverySampleUpTo2000) {
  std::vector<CallRecord> small = Calls(1, 30, 64, 64);
  Append(small, Calls(1, 10, 64, 64));
  Append(small, Calls(2, 20, 64, 64));
  EXPECT_EQ(MixedCdfName("mixed-shared", "grpc"), "mixed-shared-grpc.cdf");
  EXPECT_EQ(MixedCdf(MixedReport("grpc", "mixed", 1, small)),
            "# latency_us cumulative_fraction\n10.000 0.250000\n20.000 0.500000\n"
            "20.000 0.750000\n30.000 1.000000\n");
  EXPECT_EQ(MixedCdf(MixedReport("grpc", "mixed", 1, {})), "# latency_us cumulative_fraction\n");
}

TEST(LoadReport, MixedCdfThinsToEvenlySpacedRanks) {
  std::vector<CallRecord> small;
  for (int i = 4001; i >= 1; --i) Append(small, Calls(1, i, 64, 64));  // unsorted on purpose
  const std::vector<std::string> lines = Lines(MixedCdf(MixedReport("grpc", "mixed", 1, small)));
  ASSERT_EQ(lines.size(), 1u + 2000u);
  EXPECT_EQ(lines[1], "3.000 0.000750");        // rank ceil(4001 / 2000) = 3
  EXPECT_EQ(lines[2], "5.000 0.001250");        // rank ceil(2 * 4001 / 2000) = 5
  EXPECT_EQ(lines[2000], "4001.000 1.000000");  // the last rank is the maximum
}

// ---- workload ----

// Buckets (0, 100] and (100, 1000]; every call answers 64 B.
const std::vector<uint64_t> kUppers = {100, 1000};

LoadReport WorkloadReport(const std::string& system, int64_t small_us, int64_t large_us) {
  StreamSpec spec = Stream("w3-c0", 100, 64);
  spec.workload = "w3";
  std::vector<CallRecord> calls = Calls(100, small_us, 100, 64);
  Append(calls, Calls(100, large_us, 1000, 64));
  // Two clients, each with its own stream name: the second's calls are in the same buckets.
  LoadReport report = OneStream("workload", system, "w3 50%", spec, calls);
  report.point.settings.link_mbps = 1000;
  report.point.clients.push_back(report.point.clients[0]);
  report.point.clients[1].streams[0].name = "w3-c1";
  ClientReport second;
  second.measure_ns = kSecond;
  second.streams.push_back(StreamOf("w3-c1", Calls(100, small_us, 100, 64)));
  // Completed after the window: a slowdown sample, not achieved load.
  Append(second.streams[0].calls, Calls(1, large_us, 1000, 64, kSecond));
  second.streams[0].late_starts = 4;
  report.clients.push_back(second);
  return report;
}

std::vector<WorkloadSummary> WorkloadSummaries() {
  const UnloadedLatency reference({{100, 10 * kMicro}, {1000, 100 * kMicro}});
  const UnloadedLatency grpc_own({{100, 20 * kMicro}, {1000, 200 * kMicro}});
  return {SummarizeWorkload(WorkloadReport("grpc", 80, 600), "w3", 0.5, kUppers, reference,
                            "homarpc", grpc_own),
          SummarizeWorkload(WorkloadReport("homarpc", 20, 300), "w3", 0.5, kUppers, reference,
                            "homarpc", reference)};
}

TEST(LoadReport, WorkloadSlowdownAgainstTheReferenceAndOwn) {
  const std::vector<WorkloadSummary> s = WorkloadSummaries();
  ASSERT_EQ(s[0].buckets.size(), 2u);
  EXPECT_EQ(s[0].buckets[0].calls, 200u);
  EXPECT_EQ(s[0].buckets[1].calls, 101u);
  EXPECT_DOUBLE_EQ(s[0].buckets[0].p99, 8.0);
  EXPECT_DOUBLE_EQ(s[0].own_buckets[0].p99, 4.0);
  EXPECT_DOUBLE_EQ(s[0].buckets[1].p50, 6.0);
  EXPECT_DOUBLE_EQ(s[1].buckets[1].p99, 3.0);
  // Request payload inside the windows: 100 x 100 B + 100 x 1000 B, and 100 x 100 B, in 1 s
  // each, of a 1000 Mbit/s link.
  EXPECT_DOUBLE_EQ(s[1].achieved_load, (110000.0 + 10000.0) * 8 / 1e9);
  EXPECT_EQ(s[1].totals.late_starts, 4u);
}

TEST(LoadReport, WorkloadTableRows) {
  const std::vector<std::string> rows = Lines(WorkloadTable(WorkloadSummaries()));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0], "### w3 at 50% load");
  EXPECT_EQ(rows[1],
            "Offered 50% of 1000 Mbit/s in request payload; achieved: grpc 0.1%, homarpc 0.1%. "
            "Late starts: grpc 4, homarpc 4. Slowdown = latency ÷ homarpc's unloaded latency "
            "at the same size; \"own\" divides by the system's own.");
  EXPECT_EQ(rows[2],
            "| size ≤ | grpc calls | grpc p50 | grpc p99 | grpc p99 own | homarpc calls | "
            "homarpc p50 | homarpc p99 | p99 homarpc ÷ grpc |");
  EXPECT_EQ(rows[4], "| 100 B | 200 | 8.00 | 8.00 | 4.00 | 200 | 2.00 | 2.00 | 0.25x |");
  EXPECT_EQ(rows[5], "| 1000 B | 101 | 6.00 | 6.00 | 3.00 | 101 | 3.00 | 3.00 | 0.50x |");
}

TEST(LoadReport, WorkloadJsonAndData) {
  const std::vector<WorkloadSummary> s = WorkloadSummaries();
  const std::string json = WorkloadJson(s[0], "w3 50%");
  EXPECT_THAT(json, HasSubstr("{\"scenario\":\"workload\",\"system\":\"grpc\",\"label\":\"w3 "
                              "50%\",\"point\":\"load\",\"workload\":\"w3\",\"load\":0.500,"
                              "\"link_mbps\":1000,\"achieved_load\":0.001,\"calls\":301,"
                              "\"failed\":0,\"unfinished\":0,\"late_starts\":4,"
                              "\"reference\":\"homarpc\",\"buckets\":[{\"upper_bytes\":100,"
                              "\"calls\":200,\"p50_slowdown\":8.000,\"p99_slowdown\":8.000,"
                              "\"p99_slowdown_own\":4.000,\"p50_us\":80.000,\"p99_us\":80.000},"
                              "{\"upper_bytes\":1000,"));
  EXPECT_THAT(json, HasSubstr("]}"));
  // A summary keeps its report's steal, and the line carries it before the buckets.
  LoadReport stolen = WorkloadReport("homarpc", 20, 300);
  stolen.steal_fraction = 0.05;
  const UnloadedLatency reference({{100, 10 * kMicro}, {1000, 100 * kMicro}});
  EXPECT_THAT(WorkloadJson(SummarizeWorkload(stolen, "w3", 0.5, kUppers, reference, "homarpc",
                                             reference),
                           "w3 50%"),
              HasSubstr("\"reference\":\"homarpc\",\"steal_pct\":5.000,\"buckets\":["));
  EXPECT_EQ(WorkloadDataName("w3", 0.8, "grpc"), "workload-w3-80-grpc.dat");
  EXPECT_EQ(WorkloadData(s[1]),
            "# bucket_upper_bytes p50_slowdown p99_slowdown calls\n100 2.000 2.000 200\n"
            "1000 3.000 3.000 101\n");
}

TEST(LoadReport, CallsDataListsEveryCallOfEveryClientAndStream) {
  LoadReport report;
  report.system = "homarpc";
  ClientReport a;
  a.streams.push_back(StreamOf("small", Calls(2, 40, 64, 64, 1500)));
  a.streams.push_back(StreamOf("bulk", Calls(1, 9000, 64, 8 << 20, 2 * kMicro)));
  ClientReport b;
  b.streams.push_back(StreamOf("small", {}));  // a stream with no completed call: no line
  b.streams.push_back(StreamOf("w3", Calls(1, 123, 36, 64, 7 * kSecond)));
  report.clients = {a, b};
  EXPECT_EQ(CallsData(report),
            "# client stream start_us latency_us request_bytes response_bytes\n"
            "0 small 1.5 40.0 64 64\n"
            "0 small 1.5 40.0 64 64\n"
            "0 bulk 2.0 9000.0 64 8388608\n"
            "1 w3 7000000.0 123.0 36 64\n");
  EXPECT_EQ(CallsData(LoadReport{}),
            "# client stream start_us latency_us request_bytes response_bytes\n");
}

TEST(LoadReport, CallsDataNameKeepsOnlySafeCharactersOfTheLabel) {
  EXPECT_EQ(CallsDataName("cpu", "64 B at 5000/s", "grpc"), "cpu-64_B_at_5000_s-grpc.calls");
  EXPECT_EQ(CallsDataName("workload", "w3 50%", "homarpc"), "workload-w3_50_-homarpc.calls");
  EXPECT_EQ(CallsDataName("mixed", "../x", "grpc"), "mixed-.._x-grpc.calls");
}

TEST(LoadReport, CalibrationPointsAreEachSizesMedian) {
  const std::vector<LoadReport> calibration = {
      OneStream("workload", "homarpc", "c", Stream("calibration", 8, 64), Tail(12, 30, 90, 8)),
      OneStream("workload", "homarpc", "c", Stream("calibration", 4096, 64), {}),  // no calls
      OneStream("workload", "homarpc", "c", Stream("calibration", 65536, 64),
                Tail(70, 100, 300, 65536)),
  };
  const std::vector<std::pair<uint64_t, int64_t>> expected = {{8, 12 * kMicro},
                                                              {65536, 70 * kMicro}};
  EXPECT_EQ(CalibrationPoints(calibration), expected);
  EXPECT_EQ(CalibrationJson(calibration[0], "w3"),
            "{\"scenario\":\"workload\",\"system\":\"homarpc\",\"label\":\"c\","
            "\"point\":\"calibration\",\"workload\":\"w3\",\"size\":8,\"p50_us\":12.000,"
            "\"p99_us\":30.000,\"samples\":100}");
}

// ---- cpu ----

LoadReport CpuReport(const std::string& system, int64_t server_ms, int64_t client_ms) {
  StreamSpec spec = Stream("cpu", 64, 64);
  spec.rate_per_sec = 5000;
  std::vector<CallRecord> calls = Calls(1000, 30, 64, 64);
  // Completed in the drain, after the CPU sample: not counted.
  Append(calls, Calls(1, 30, 64, 64, kSecond));
  LoadReport report = OneStream("cpu", system, "64 B at 5000/s", spec, calls);
  report.cpu = {ProcessCpu{"server", server_ms * 1000 * 1000, 4},
                ProcessCpu{"client0", client_ms * 1000 * 1000, 3}};
  return report;
}

TEST(LoadReport, CpuPerRpcAndRatios) {
  const std::vector<std::string> rows =
      Lines(CpuTable({CpuReport("grpc", 4000, 1000), CpuReport("homarpc", 1000, 500)}));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[2], "| grpc | 5000 | 1000 | 1000.00 | 4000.00 | 5000.00 | 3 / 4 |");
  EXPECT_EQ(rows[3], "| homarpc | 5000 | 1000 | 500.00 | 1000.00 | 1500.00 | 3 / 4 |");
  EXPECT_EQ(rows[4], "| homarpc ÷ grpc |  |  | 0.50x | 0.25x | 0.30x |  |");
  EXPECT_EQ(CpuJson(CpuReport("homarpc", 1000, 500)),
            "{\"scenario\":\"cpu\",\"system\":\"homarpc\",\"label\":\"64 B at 5000/s\","
            "\"rate\":5000.000,\"calls\":1000,\"client_us_per_rpc\":500.000,"
            "\"server_us_per_rpc\":1000.000,\"total_us_per_rpc\":1500.000,"
            "\"client_involuntary_switches\":3,\"server_involuntary_switches\":4,\"failed\":0,"
            "\"late_starts\":0}");
}

TEST(LoadReport, CpuWithoutCallsIsZeroNotInfinite) {
  LoadReport report = CpuReport("grpc", 10, 10);
  report.clients[0].streams[0].calls.clear();
  const CpuSummary s = SummarizeCpu(report);
  EXPECT_EQ(s.calls, 0u);
  EXPECT_EQ(s.total_us_per_rpc, 0);
}

}  // namespace
}  // namespace homarpc::bench
