// Tests for tools/bench/result.cc, report.cc and harness.cc's BuildResult: the JSON keys, the
// floor ratios and the numbers derived from raw samples.
#include "tools/bench/report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/harness.h"
#include "tools/bench/result.h"
#include "tools/bench/transport_echo.h"

namespace homarpc::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Result MakeRow(const std::string& system, bool is_floor, uint64_t size, double p50_us, double rps) {
  Result row;
  row.scenario = "transport-echo";
  row.system = system;
  row.is_floor = is_floor;
  row.size = size;
  row.concurrency = 1;
  row.p50_us = p50_us;
  row.p99_us = p50_us * 2;
  row.p999_us = p50_us * 3;
  row.rps = rps;
  row.samples = 1000;
  return row;
}

TEST(Report, JsonLineHasTheFixedKeysInOrderThenExtras) {
  Result row = MakeRow("udp-floor", true, 64, 4.5, 200000);
  row.goodput_gbps = 0.2048;
  row.extras.push_back(Extra::Int("client_peak_rss_kb", 3000));
  row.extras.push_back(Extra::String("note", "a \"quoted\"\nline"));
  EXPECT_EQ(ToJsonLine(row),
            "{\"scenario\":\"transport-echo\",\"system\":\"udp-floor\",\"size\":64,"
            "\"concurrency\":1,\"p50_us\":4.500,\"p99_us\":9.000,\"p999_us\":13.500,"
            "\"rps\":200000.0,\"goodput_gbps\":0.2048,\"samples\":1000,"
            "\"client_peak_rss_kb\":3000,\"note\":\"a \\\"quoted\\\"\\nline\"}");
}

TEST(Report, NonFiniteExtraBecomesJsonNull) {
  Result row = MakeRow("x", false, 64, 1, 1);
  row.extras.push_back(Extra::Double("ratio", 1.0 / 0.0));
  EXPECT_THAT(ToJsonLine(row), HasSubstr("\"ratio\":null"));
}

TEST(Report, FloorIsTheFastestFloorAtTheSamePoint) {
  std::vector<Result> rows = {
      MakeRow("udp-floor", true, 64, 5, 200000),           // the best floor at 64 B
      MakeRow("udp-floor-blocking", true, 64, 55, 18000),  // a slower floor
      MakeRow("homarpc", false, 64, 10, 100000),
      MakeRow("homarpc", false, 1024, 12, 80000),  // no floor ran at 1 KiB
  };
  EXPECT_EQ(FloorFor(rows, rows[2]), &rows[0]);
  EXPECT_EQ(FloorFor(rows, rows[1]), &rows[0]);  // floors are compared to the best floor too
  EXPECT_EQ(FloorFor(rows, rows[3]), nullptr);
}

TEST(Report, MarkdownRowsCarryRatiosVsFloor) {
  std::vector<Result> rows = {
      MakeRow("udp-floor", true, 64, 5, 200000),
      MakeRow("homarpc", false, 64, 10, 100000),
  };
  const std::string table = MarkdownReport("transport-echo", "desc", "settings", rows,
                                           {{"tcp-floor", 64, 1, "too small"}}, {});
  EXPECT_THAT(table, HasSubstr("## transport-echo"));
  // homarpc: p50 10 / 5 = 2.00x; RPC/s 100000 / 200000 = 0.50x.
  EXPECT_THAT(table, HasSubstr("| 64 B | 1 | homarpc | 10.0 | 20.0 | 30.0 | 100000 | 0.000 | "
                               "1000 | udp-floor | 2.00x | 0.50x |"));
  EXPECT_THAT(table, HasSubstr("| 64 B | 1 | udp-floor | 5.0 |"));
  EXPECT_THAT(table, HasSubstr("Skipped:\n- tcp-floor at 64 B x1: too small"));
  EXPECT_THAT(table, Not(HasSubstr("Failed:")));
}

TEST(Report, FormatSizeUsesBinaryUnitsOnlyWhenExact) {
  EXPECT_EQ(FormatSize(64), "64 B");
  EXPECT_EQ(FormatSize(1024), "1 KiB");
  EXPECT_EQ(FormatSize(65000), "65000 B");
  EXPECT_EQ(FormatSize(16 << 20), "16 MiB");
  EXPECT_EQ(FormatSize(1536), "1536 B");
}

TEST(Report, BuildResultDerivesRatesFromSamples) {
  Point point;
  point.scenario = "transport-echo";
  point.size = 1000;
  point.concurrency = 2;
  ClientSamples samples;
  for (int64_t i = 1; i <= 100; ++i) samples.latencies_ns.push_back(i * 1000);  // 1..100 us
  samples.payload_bytes = 100 * 2000;  // 100 RPCs, 1000 bytes each way
  samples.elapsed_ns = 50'000'000;     // 50 ms
  samples.extras.push_back(Extra::Int("lost_replies", 0));
  Result result = BuildResult(point, "udp-floor", true, samples);
  EXPECT_EQ(result.samples, 100u);
  EXPECT_DOUBLE_EQ(result.p50_us, 50);
  EXPECT_DOUBLE_EQ(result.p99_us, 99);
  EXPECT_DOUBLE_EQ(result.p999_us, 100);
  EXPECT_DOUBLE_EQ(result.rps, 2000);            // 100 RPCs / 0.05 s
  EXPECT_DOUBLE_EQ(result.goodput_gbps, 0.032);  // 1.6e6 bits / 5e7 ns
  EXPECT_EQ(result.concurrency, 2);
  EXPECT_TRUE(result.is_floor);
  ASSERT_NE(result.FindExtra("lost_replies"), nullptr);
  // 1..100 us: p50 50 us, so 70..100 us (31 samples) took 20 us more.
  const Extra* stalled = result.FindExtra("stalled_pct");
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ(stalled->text, "31.000");
  // Not for bulk points, whose own spread exceeds the margin: p50 of 1..100 ms is 50 ms.
  ClientSamples bulk;
  for (int64_t i = 1; i <= 100; ++i) bulk.latencies_ns.push_back(i * 1'000'000);
  EXPECT_EQ(BuildResult(point, "udp-floor", true, bulk).FindExtra("stalled_pct"), nullptr);
}

TEST(Report, TransportEchoShapeIsEchoThenAck) {
  EXPECT_EQ(TransportEchoResponseBytes(64), 64u);
  EXPECT_EQ(TransportEchoResponseBytes(kFullEchoMaxBytes), kFullEchoMaxBytes);
  EXPECT_EQ(TransportEchoResponseBytes(kFullEchoMaxBytes + 1), kAckBytes);
  EXPECT_EQ(TransportEchoResponseBytes(16 << 20), kAckBytes);
}

}  // namespace
}  // namespace homarpc::bench
