// Tests of machine_cpu.h: the machine's CPU time and the hypervisor's steal from /proc/stat.
#include "tools/bench/machine_cpu.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace homarpc::bench {
namespace {

TEST(MachineCpu, ParsesTheMachinesStealFromProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice: guest time is already in
  // user, so the total stops at steal.
  absl::StatusOr<MachineCpuSample> sample = ParseProcStatCpu(
      "cpu  100 5 40 800 3 1 2 49 7 0\ncpu0 50 2 20 400 1 0 1 25 3 0\nintr 1 2\n");
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->total_ticks, 1000);
  EXPECT_EQ(sample->steal_ticks, 49);
  // A per-CPU line is not the machine's.
  EXPECT_FALSE(ParseProcStatCpu("cpu0 50 2 20 400 1 0 1 25\n").ok());
  EXPECT_FALSE(ParseProcStatCpu("cpu  100 5 40 800 3 1 2\n").ok());
  EXPECT_FALSE(ParseProcStatCpu("cpu  100 5 40 800 3 1 2 x\n").ok());
  EXPECT_FALSE(ParseProcStatCpu("cpu  100 5 40 800 3 1 2 -4\n").ok());
  EXPECT_FALSE(ParseProcStatCpu("").ok());
}

TEST(MachineCpu, StealFractionIsStealOverAllTimeBetweenSamples) {
  const MachineCpuSample before{1000, 49};
  const std::optional<double> steal = StealFraction(before, MachineCpuSample{1400, 149});
  ASSERT_TRUE(steal.has_value());
  EXPECT_DOUBLE_EQ(*steal, 0.25);
  EXPECT_FALSE(StealFraction(before, before).has_value());
  absl::StatusOr<MachineCpuSample> now = SampleMachineCpu();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_GT(now->total_ticks, 0);
  EXPECT_LE(now->steal_ticks, now->total_ticks);
}

TEST(MachineCpu, StealMeterGivesAFractionOnceTimePassed) {
  const StealMeter meter;
  // Burn a few clock ticks of CPU so that the machine's counters move.
  volatile uint64_t sink = 0;
  std::optional<double> steal;
  for (int round = 0; round < 1000 && !steal.has_value(); ++round) {
    for (int i = 0; i < 1000000; ++i) sink = sink + i;
    steal = meter.Fraction();
  }
  ASSERT_TRUE(steal.has_value());
  EXPECT_GE(*steal, 0.0);
  EXPECT_LE(*steal, 1.0);
}

TEST(MachineCpu, AddStealExtraAddsAPercentageOnlyWhenKnown) {
  std::vector<Extra> extras;
  AddStealExtra(std::nullopt, &extras);
  EXPECT_TRUE(extras.empty());
  AddStealExtra(0.125, &extras);
  ASSERT_EQ(extras.size(), 1u);
  EXPECT_EQ(extras[0].key, "steal_pct");
  EXPECT_EQ(extras[0].text, Extra::Double("x", 12.5).text);
  EXPECT_FALSE(extras[0].is_string);
}

}  // namespace
}  // namespace homarpc::bench
