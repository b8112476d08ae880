// Tests of machine_cpu.h: the hypervisor's steal from /proc/stat, and the interruption probe.
#include "tools/bench/machine_cpu.h"

#include <gtest/gtest.h>
#include <sched.h>

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

TEST(MachineCpu, SummarizesOneCpusGaps) {
  // 4 gaps in a probe of 2 ms, given out of order.
  const CpuInterruptions c = SummarizeGaps(1, 2000000, {20000, 3000, 18000, 19000});
  EXPECT_EQ(c.cpu, 1);
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.total_nanos, 60000);
  EXPECT_EQ(c.median_nanos, 18000);  // the lower middle of an even count
  EXPECT_EQ(c.longest_nanos, 20000);
  EXPECT_DOUBLE_EQ(c.per_second(), 2000);
  EXPECT_DOUBLE_EQ(c.lost_fraction(), 0.03);
  const CpuInterruptions odd = SummarizeGaps(0, 1000000, {5000, 9000, 7000});
  EXPECT_EQ(odd.median_nanos, 7000);

  const CpuInterruptions none = SummarizeGaps(0, 1000000, {});
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.median_nanos, 0);
  EXPECT_DOUBLE_EQ(none.per_second(), 0);
  EXPECT_DOUBLE_EQ(SummarizeGaps(0, 0, {}).per_second(), 0);  // no probe time: no division
}

TEST(MachineCpu, FormatsTheProbeOnOneLine) {
  EXPECT_EQ(FormatInterruptions({}), "not measured");
  EXPECT_EQ(FormatInterruptions({SummarizeGaps(0, 2000000, {20000, 3000, 18000, 19000}),
                                 SummarizeGaps(1, 2000000, {})}),
            "cpu0 2000/s, median 18.0 us, 3.0% of the time; cpu1 0/s");
}

TEST(MachineCpu, ProbesEveryCpuThisProcessMayUse) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const std::vector<CpuInterruptions> cpus = ProbeCpuInterruptions(20000000, 2000);
  ASSERT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&allowed));
  for (const CpuInterruptions& c : cpus) {
    EXPECT_TRUE(CPU_ISSET(c.cpu, &allowed)) << c.cpu;
    EXPECT_EQ(c.probe_nanos, 20000000);
    // Each gap is over the threshold and inside the probe (which may overrun by one gap).
    EXPECT_GE(c.total_nanos, c.count * 2000);
    if (c.count > 0) EXPECT_GT(c.median_nanos, 2000);
    EXPECT_LE(c.median_nanos, c.longest_nanos);
  }
}

}  // namespace
}  // namespace homarpc::bench
