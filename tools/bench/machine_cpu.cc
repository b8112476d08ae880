// machine_cpu: see machine_cpu.h.
#include "tools/bench/machine_cpu.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

}  // namespace homarpc::bench
