// machine_cpu: see machine_cpu.h.
#include "tools/bench/machine_cpu.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transport/clock.h"

namespace homarpc::bench {

absl::StatusOr<MachineCpuSample> ParseProcStatCpu(absl::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "cpu ")) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    constexpr size_t kSteal = 7;
    if (fields.size() <= kSteal) return absl::InternalError("short cpu line in /proc/stat");
    MachineCpuSample sample;
    for (size_t i = 0; i <= kSteal; ++i) {
      int64_t ticks = 0;
      if (!absl::SimpleAtoi(fields[i], &ticks) || ticks < 0) {
        return absl::InternalError("malformed cpu line in /proc/stat");
      }
      sample.total_ticks += ticks;
      if (i == kSteal) sample.steal_ticks = ticks;
    }
    return sample;
  }
  return absl::InternalError("no cpu line in /proc/stat");
}

absl::StatusOr<MachineCpuSample> SampleMachineCpu() {
  std::ifstream in("/proc/stat");
  if (!in) return absl::UnavailableError("cannot open /proc/stat");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseProcStatCpu(text.str());
}

std::optional<double> StealFraction(const MachineCpuSample& before,
                                    const MachineCpuSample& after) {
  const int64_t total = after.total_ticks - before.total_ticks;
  if (total <= 0) return std::nullopt;
  const int64_t steal = std::max<int64_t>(after.steal_ticks - before.steal_ticks, 0);
  return static_cast<double>(steal) / static_cast<double>(total);
}

StealMeter::StealMeter() : start_(SampleMachineCpu()) {}

std::optional<double> StealMeter::Fraction() const {
  if (!start_.ok()) return std::nullopt;
  const absl::StatusOr<MachineCpuSample> now = SampleMachineCpu();
  if (!now.ok()) return std::nullopt;
  return StealFraction(*start_, *now);
}

void AddStealExtra(const std::optional<double>& steal_fraction, std::vector<Extra>* extras) {
  if (steal_fraction.has_value()) {
    extras->push_back(Extra::Double("steal_pct", *steal_fraction * 100));
  }
}

double CpuInterruptions::per_second() const {
  return probe_nanos > 0 ? static_cast<double>(count) * 1e9 / static_cast<double>(probe_nanos)
                         : 0;
}

double CpuInterruptions::lost_fraction() const {
  return probe_nanos > 0 ? static_cast<double>(total_nanos) / static_cast<double>(probe_nanos)
                         : 0;
}

CpuInterruptions SummarizeGaps(int cpu, int64_t probe_nanos, std::vector<int64_t> gaps) {
  CpuInterruptions out;
  out.cpu = cpu;
  out.probe_nanos = probe_nanos;
  out.count = static_cast<int64_t>(gaps.size());
  if (gaps.empty()) return out;
  std::sort(gaps.begin(), gaps.end());
  for (int64_t gap : gaps) out.total_nanos += gap;
  out.median_nanos = gaps[(gaps.size() - 1) / 2];
  out.longest_nanos = gaps.back();
  return out;
}

namespace {

// The probe on one CPU: pins the calling thread there, then spins. False when it cannot pin.
bool ProbeOneCpu(int cpu, int64_t probe_nanos, int64_t threshold_nanos,
                 std::vector<int64_t>* gaps) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) return false;
  const transport::Clock* clock = transport::MonotonicClock::Get();
  gaps->reserve(8192);
  const int64_t start = clock->NowNanos();
  int64_t previous = start;
  for (;;) {
    const int64_t now = clock->NowNanos();
    if (now - previous > threshold_nanos) gaps->push_back(now - previous);
    previous = now;
    if (now - start >= probe_nanos) return true;
  }
}

}  // namespace

std::vector<CpuInterruptions> ProbeCpuInterruptions(int64_t probe_nanos,
                                                    int64_t threshold_nanos) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  std::vector<std::vector<int64_t>> gaps(cpus.size());
  std::vector<char> pinned(cpus.size(), 0);
  std::vector<std::thread> threads;
  threads.reserve(cpus.size());
  for (size_t i = 0; i < cpus.size(); ++i) {
    threads.emplace_back([&, i] {
      pinned[i] = ProbeOneCpu(cpus[i], probe_nanos, threshold_nanos, &gaps[i]) ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<CpuInterruptions> out;
  for (size_t i = 0; i < cpus.size(); ++i) {
    if (pinned[i]) out.push_back(SummarizeGaps(cpus[i], probe_nanos, std::move(gaps[i])));
  }
  return out;
}

std::string FormatInterruptions(const std::vector<CpuInterruptions>& cpus) {
  if (cpus.empty()) return "not measured";
  return absl::StrJoin(cpus, "; ", [](std::string* out, const CpuInterruptions& c) {
    absl::StrAppend(out, "cpu", c.cpu, " ", absl::StrFormat("%.0f", c.per_second()), "/s");
    if (c.count > 0) {
      absl::StrAppend(out, absl::StrFormat(", median %.1f us, %.1f%% of the time",
                                           static_cast<double>(c.median_nanos) / 1e3,
                                           c.lost_fraction() * 100));
    }
  });
}

}  // namespace homarpc::bench
