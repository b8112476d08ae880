// machine_cpu: what the machine itself does to a benchmark's CPUs.
//
// Steal, from /proc/stat, while a benchmark point measured: the share of time this virtual
// machine's CPUs were ready to run but did not, because the host ran other guests or its own
// work (on a VM whose idle CPUs halt, also the wait for a halted CPU to be resumed). It can move tails more than anything in the
// systems measured (tools/bench/README.md has measurements), so the harnesses record it beside
// every point (harness.h: the extra steal_pct; load.h: LoadReport::steal_fraction).
//
// Interruptions, measured by a probe: one thread per CPU spins reading the monotonic clock and
// records every gap above a threshold, i.e. every time something (the timer tick, an
// interrupt, the hypervisor running something else on that virtual CPU) took the CPU from a
// thread that never gave it up. Steal does not see all of these (on the PVM guests this project
// runs on, /proc/stat's steal stays at 0 while each CPU loses ~1450 slices of ~18 us a
// second). A call of D us on the critical path is hit with probability ~D x rate, so the rate
// and the typical gap bound every tail: above ~1/rate (7 us at 1450/s) a p99 carries one gap.
#ifndef HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_
#define HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_

#include <cstdint>
#include <optional>
#include <string>
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

// One CPU's interruptions over a probe.
struct CpuInterruptions {
  int cpu = 0;
  int64_t probe_nanos = 0;    // how long the probe spun
  int64_t count = 0;          // gaps above the threshold
  int64_t total_nanos = 0;    // their sum
  int64_t median_nanos = 0;   // the middle one (0 without gaps)
  int64_t longest_nanos = 0;  // 0 without gaps

  double per_second() const;
  double lost_fraction() const;  // total_nanos / probe_nanos
};

// Summarises one CPU's gaps (nanoseconds, any order; sorted here) over a probe of
// `probe_nanos`.
CpuInterruptions SummarizeGaps(int cpu, int64_t probe_nanos, std::vector<int64_t> gaps);

// Spins one thread pinned to each CPU this process may run on, all at once, for `probe_nanos`,
// and returns each CPU's gaps above `threshold_nanos`, by CPU number. A CPU whose thread could
// not be pinned is left out (its gaps would be some other CPU's).
std::vector<CpuInterruptions> ProbeCpuInterruptions(int64_t probe_nanos, int64_t threshold_nanos);

// "cpu0 1453/s, median 18.4 us, 3.3% of the time; cpu1 ...": one line for a report.
std::string FormatInterruptions(const std::vector<CpuInterruptions>& cpus);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_MACHINE_CPU_H_
