// Tests for tools/bench/rpc_report.cc: the homarpc ÷ gRPC ratio table.
#include "tools/bench/rpc_report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Result Row(const std::string& system, uint64_t size, int64_t concurrency, double p50_us,
           double rps) {
  Result row;
  row.scenario = "unary";
  row.system = system;
  row.size = size;
  row.concurrency = concurrency;
  row.p50_us = p50_us;
  // Different tail shapes per system, so that each ratio column is its own: homarpc's tail
  // is 4x and 15x its median, gRPC's 2x and 5x (p99 ratio = 2x, p999 ratio = 3x the p50's).
  row.p99_us = p50_us * (system == "homarpc" ? 4 : 2);
  row.p999_us = p50_us * (system == "homarpc" ? 15 : 5);
  row.rps = rps;
  return row;
}

TEST(RpcReport, RatiosAgainstTheBaselineAtTheSamePoint) {
  const std::vector<Result> results = {
      Row("grpc", 64, 1, 100, 10000),   Row("homarpc", 64, 1, 20, 50000),
      Row("grpc", 1024, 1, 200, 5000),  Row("homarpc", 1024, 1, 100, 10000),
      Row("grpc", 64, 32, 400, 80000),  Row("homarpc", 64, 32, 100, 320000),
  };
  const std::string table = RatioTable(results, "homarpc", "grpc");
  EXPECT_THAT(table, HasSubstr("### homarpc ÷ grpc"));
  EXPECT_THAT(table, HasSubstr("| 64 B | 1 | 0.20x | 0.40x | 0.60x | 5.00x |"));
  EXPECT_THAT(table, HasSubstr("| 1 KiB | 1 | 0.50x | 1.00x | 1.50x | 2.00x |"));
  EXPECT_THAT(table, HasSubstr("| 64 B | 32 | 0.25x | 0.50x | 0.75x | 4.00x |"));
}

TEST(RpcReport, PointsWithoutTheBaselineAreLeftOut) {
  const std::vector<Result> results = {Row("homarpc", 64, 1, 20, 50000),
                                       Row("grpc", 1024, 1, 200, 5000),
                                       Row("homarpc", 1024, 1, 100, 10000)};
  const std::string table = RatioTable(results, "homarpc", "grpc");
  EXPECT_THAT(table, HasSubstr("| 1 KiB |"));
  EXPECT_THAT(table, Not(HasSubstr("| 64 B |")));
}

TEST(RpcReport, EmptyWhenNoPointHasBoth) {
  EXPECT_EQ(RatioTable({Row("homarpc", 64, 1, 20, 50000)}, "homarpc", "grpc"), "");
  EXPECT_EQ(RatioTable({}, "homarpc", "grpc"), "");
}

TEST(RpcReport, ZeroBaselineGivesADash) {
  const std::vector<Result> results = {Row("grpc", 64, 1, 0, 0), Row("homarpc", 64, 1, 20, 5)};
  EXPECT_THAT(RatioTable(results, "homarpc", "grpc"), HasSubstr("| 64 B | 1 | - | - | - | - |"));
}

}  // namespace
}  // namespace homarpc::bench
