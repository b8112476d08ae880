// machine_cpu: the whole machine's CPU time from /proc/stat, for the hypervisor's steal while a
// benchmark point measured: the share of time this virtual machine's CPUs were ready to run but
// did not, because the host ran other guests or its own work (on a VM whose idle CPUs halt,
// also the wait for a halted CPU to be resumed). It can move tails more than anything in the
// systems measured (tools/bench/README.md has measurements), so the harnesses record it beside
// every point (harness.h: the extra steal_pct; load.h: LoadReport::steal_fraction).
#ifndef HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_
#define HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/result.h"

namespace homarpc::bench {

// From the "cpu " line of /proc/stat, in clock ticks: what the kernel spent (user, nice,
// system, idle, iowait, irq, softirq) plus steal. guest and guest_nice are already inside user
// and nice, so they are not added again.
struct MachineCpuSample {
  int64_t total_ticks = 0;
  int64_t steal_ticks = 0;
};

// INTERNAL when the text has no "cpu " line, or it has fewer than the eight fields up to steal
// (kernels before 2.6.11), or one of them is not a non-negative number.
absl::StatusOr<MachineCpuSample> ParseProcStatCpu(absl::string_view proc_stat);
// Reads /proc/stat.
absl::StatusOr<MachineCpuSample> SampleMachineCpu();
// Steal as a fraction of all CPU time between two samples; nullopt when no time passed.
std::optional<double> StealFraction(const MachineCpuSample& before,
                                    const MachineCpuSample& after);

// Samples at construction; Fraction() is the steal since then (nullopt when either sample
// could not be read, or no clock tick has passed). For a harness that wants steal as context and must not fail for it.
class StealMeter {
 public:
  StealMeter();
  std::optional<double> Fraction() const;

 private:
  absl::StatusOr<MachineCpuSample> start_;
};

// Appends the extra "steal_pct" (the fraction as a percentage) to `extras` when the fraction
// is known: the one key both harnesses' JSON lines carry it under.
void AddStealExtra(const std::optional<double>& steal_fraction, std::vector<Extra>* extras);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_
