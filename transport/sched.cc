// sched: see sched.h.
#include "transport/sched.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>

#include "transport/clock.h"
#include "transport/errors.h"
#include "transport/log.h"

namespace homarpc::transport {
namespace {

// The kernel's struct sched_attr, first version (48 bytes). Its header,
// <linux/sched/types.h>, cannot be included next to glibc's <sched.h> (both define
// sched_param), and glibc 2.36 has no wrapper for the call.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

}  // namespace

bool RequestShortSlice(uint64_t slice_nanos) {
  // Only for SCHED_OTHER threads: a real-time policy set by the application stays.
  if (sched_getscheduler(0) != SCHED_OTHER) return false;
  SchedAttr attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, 0);  // sched_setattr sets nice too: keep it
  if (errno != 0) return false;
  attr.sched_nice = nice;
  attr.sched_runtime = slice_nanos;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

uint64_t ThisThreadsSliceNanos() {
  SchedAttr attr{};
  attr.size = sizeof(attr);
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) return 0;
  return attr.sched_runtime;
}

bool NameThisThread(absl::string_view name) {
  char buffer[kMaxThreadNameBytes + 1] = {};
  const size_t n = std::min(name.size(), kMaxThreadNameBytes);
  std::copy_n(name.data(), n, buffer);
  return prctl(PR_SET_NAME, buffer, 0, 0, 0) == 0;
}

bool MoveToAnotherCpu() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  const int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed) || CPU_COUNT(&allowed) < 2) {
    return false;
  }
  cpu_set_t others = allowed;
  CPU_CLR(here, &others);
  if (sched_setaffinity(0, sizeof(others), &others) != 0) return false;
  const int there = sched_getcpu();
  if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      HOMARPC_LOG(WARNING) << "could not restore a thread's CPU affinity after moving it: "
                           << ErrnoToStatus(errno, "sched_setaffinity").message();
    }
    return false;
  }
  return there != here;
}

uint64_t ThisThreadsTimerSlackNanos() {
  const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  return slack < 0 ? 0 : static_cast<uint64_t>(slack);
}

bool SetTimerSlack(uint64_t slack_nanos) {
  // 0 would mean "the thread's default", not "none": the smallest real slack is 1 ns.
  return prctl(PR_SET_TIMERSLACK, std::max<uint64_t>(slack_nanos, 1), 0, 0, 0) == 0;
}

void YieldPolicy::OnYield(int64_t before, int64_t after) {
  if (after - before <= kContendedNanos) return;
  contended_until_ = after + kHoldNanos;
  if (long_yields_ == 0 || after - long_yields_since_ > kNapWindowNanos) {
    long_yields_ = 0;
    off_cpu_nanos_ = 0;
    long_yields_since_ = after;
  }
  ++long_yields_;
  off_cpu_nanos_ += after - before;
  if (long_yields_ >= kNapMinLongYields && off_cpu_nanos_ >= kNapOffCpuNanos &&
      (last_nap_ == 0 || after - last_nap_ >= nap_interval_)) {
    if (!nap_due_) nap_due_since_ = after;
    nap_due_ = true;
  }
}

bool YieldPolicy::TakeNap(int64_t now) {
  if (!nap_due_) return false;
  nap_due_ = false;
  // Due, but the thread had work until now: the contention it was due for is old news.
  if (now - nap_due_since_ > kNapWindowNanos) return false;
  long_yields_ = 0;
  off_cpu_nanos_ = 0;
  // Wanted again this soon after the last one: that nap (or move) found no idle CPU, or a
  // wake-up put the thread back beside the other. Back off.
  if (last_nap_ != 0 && now - last_nap_ < 2 * nap_interval_) {
    nap_interval_ = std::min(2 * nap_interval_, kMaxNapIntervalNanos);
  } else {
    nap_interval_ = kMinNapIntervalNanos;
  }
  last_nap_ = now;
  ++naps_;
  return true;
}

bool YieldPolicy::ShouldYield(int64_t now, int64_t idle_since) {
  if (idle_since != wait_since_) {
    // A new wait: bank the idle time the last one had since the last probe.
    idle_banked_ += std::max<int64_t>(0, last_round_ - std::max(wait_since_, last_probe_));
    wait_since_ = idle_since;
  }
  last_round_ = now;
  if (now < contended_until_) {
    // Every round yields: each counts as a probe.
    last_probe_ = now;
    idle_banked_ = 0;
    return true;
  }
  const int64_t waited = now - std::max(idle_since, last_probe_);
  if (waited < kProbeIdleNanos && idle_banked_ + waited < kProbeIdleBudgetNanos) return false;
  last_probe_ = now;
  idle_banked_ = 0;
  return true;
}

void YieldPolicy::MaybeYield(int64_t now, int64_t idle_since) {
  if (!ShouldYield(now, idle_since)) return;
  const Clock* clock = MonotonicClock::Get();
  const int64_t before = clock->NowNanos();
  std::this_thread::yield();
  OnYield(before, clock->NowNanos());
}

}  // namespace homarpc::transport
