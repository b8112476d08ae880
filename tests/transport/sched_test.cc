// Tests of transport/sched.h: the names and the scheduler slice of homarpc's threads, and how
// often a spinning thread yields its CPU, and when it naps.
#include "transport/sched.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/transport/cpu_util.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/clock.h"
#include "transport/endpoint.h"
#include "transport/message_bytes.h"

namespace homarpc::transport {
namespace {

std::string ReadComm(const std::string& path) {
  std::ifstream in(path);
  std::string name;
  std::getline(in, name);
  return name;
}

std::string ThisThreadsName() {
  return ReadComm(absl::StrCat("/proc/self/task/", syscall(SYS_gettid), "/comm"));
}

// Every thread of this process by name, from /proc/self/task/*/comm.
std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/task"), closedir);
  if (dir == nullptr) return names;
  while (const dirent* entry = readdir(dir.get())) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    names.push_back(ReadComm(absl::StrCat("/proc/self/task/", entry->d_name, "/comm")));
  }
  return names;
}

TEST(Sched, NameThisThreadNamesOnlyTheCallingThread) {
  const std::string before = ThisThreadsName();
  std::string named;
  std::string long_named;
  std::thread thread([&] {
    ASSERT_TRUE(NameThisThread("hrpc-test"));
    named = ThisThreadsName();
    // Linux keeps 15 bytes: a longer name is cut, not refused.
    ASSERT_TRUE(NameThisThread("hrpc-a-name-longer-than-fifteen"));
    long_named = ThisThreadsName();
  });
  thread.join();
  EXPECT_EQ(named, "hrpc-test");
  EXPECT_EQ(long_named, "hrpc-a-name-lon");
  EXPECT_EQ(long_named.size(), kMaxThreadNameBytes);
  EXPECT_EQ(ThisThreadsName(), before);
}

TEST(Sched, EndpointLoopThreadsAreNamedByTheirIndex) {
  // A server's handler and a client's completion both run on a loop thread: record the name
  // of the thread each ran on.
  EndpointOptions options;
  options.io.bind_address = Address::Loopback4(0);
  options.config.timeout_ticks = 5000;  // a failure guard for a loaded, sanitized CI machine
  std::string handler_thread;
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  auto server = Endpoint::Create(options, [&handler_thread, self](IncomingRequest request) {
    handler_thread = ThisThreadsName();
    Buffer payload = std::move(request.payload);
    self->load()->Reply(request, std::move(payload));
  });
  ASSERT_TRUE(server.ok()) << server.status();
  self->store(server->get());
  auto client = Endpoint::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  std::string completion_thread;
  absl::Notification done;
  (*client)->SendRequest((*server)->local_address(), MessageBytes(Buffer(8)),
                         [&](absl::StatusOr<Buffer> response) {
                           EXPECT_TRUE(response.ok()) << response.status();
                           completion_thread = ThisThreadsName();
                           done.Notify();
                         });
  done.WaitForNotification();
  EXPECT_EQ(handler_thread, "hrpc-loop0");
  EXPECT_EQ(completion_thread, "hrpc-loop0");
  // And a process-wide look: both endpoints' loops carry the name.
  int loops = 0;
  for (const std::string& name : ThreadNames()) loops += name == "hrpc-loop0" ? 1 : 0;
  EXPECT_GE(loops, 2);
  client->reset();
  server->reset();
}

TEST(Sched, TimerSlackIsTheCallingThreadsOwn) {
  const uint64_t own = ThisThreadsTimerSlackNanos();
  ASSERT_GT(own, 0u) << "PR_GET_TIMERSLACK failed";
  std::atomic<uint64_t> other_before{0}, other_after{0};
  absl::Notification set, checked;
  std::thread other([&] {
    other_before.store(ThisThreadsTimerSlackNanos());  // inherited from the creator
    set.WaitForNotification();
    other_after.store(ThisThreadsTimerSlackNanos());
    checked.Notify();
  });
  EXPECT_TRUE(SetTimerSlack(4'000'000));  // not ASSERT: `other` must be joined
  EXPECT_EQ(ThisThreadsTimerSlackNanos(), 4'000'000u);
  set.Notify();
  checked.WaitForNotification();
  other.join();
  EXPECT_EQ(other_before.load(), own);
  EXPECT_EQ(other_after.load(), own) << "another thread's slack changed";
  ASSERT_TRUE(SetTimerSlack(own));
  EXPECT_EQ(ThisThreadsTimerSlackNanos(), own);
}

TEST(Sched, RequestShortSliceSetsTheSliceAndKeepsNice) {
  bool accepted = false;
  int policy = -1;
  int nice_wanted = 0;
  int nice_after = 0;
  uint64_t slice = 0;
  std::thread thread([&] {
    // A nice value other than the inherited one, which sched_setattr must not reset. Raising
    // it needs no privilege (setpriority(PRIO_PROCESS, 0) sets the calling thread's on Linux).
    nice_wanted = std::min(getpriority(PRIO_PROCESS, 0) + 1, 19);
    ASSERT_EQ(setpriority(PRIO_PROCESS, 0, nice_wanted), 0);
    accepted = RequestShortSlice(300 * 1000);
    policy = sched_getscheduler(0);
    nice_after = getpriority(PRIO_PROCESS, 0);
    slice = ThisThreadsSliceNanos();
  });
  thread.join();
  if (!accepted) GTEST_SKIP() << "this kernel has no sched_setattr for SCHED_OTHER threads";
  EXPECT_EQ(policy, SCHED_OTHER);
  EXPECT_EQ(nice_after, nice_wanted);
  // Linux 6.12+ reports a fair thread's slice (the default one, ~0.7-3 ms, when none was
  // asked for); older kernels report 0 and ignore the request.
  if (slice == 0) GTEST_SKIP() << "this kernel neither honours nor reports a thread's slice";
  EXPECT_EQ(slice, 300u * 1000);
}

TEST(Sched, RequestShortSliceLeavesARealTimeThreadAlone) {
  bool accepted = true;
  bool real_time = false;
  int policy_after = -1;
  std::thread thread([&] {
    sched_param param{};
    param.sched_priority = 1;
    real_time = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
    if (!real_time) return;
    accepted = RequestShortSlice();
    policy_after = sched_getscheduler(0);
  });
  thread.join();
  if (!real_time) GTEST_SKIP() << "cannot make a SCHED_FIFO thread here (needs CAP_SYS_NICE)";
  EXPECT_FALSE(accepted);
  EXPECT_EQ(policy_after, SCHED_FIFO);
}

// YieldPolicy: how often a spinning thread gives its CPU away.

// Counts the yields of `rounds` idle rounds from `now`, one every `step` nanoseconds, each
// yield returning after `yield_nanos`, the thread idle since `idle_since`.
int CountYields(YieldPolicy* policy, int64_t* now, int64_t idle_since, int rounds,
                int64_t step, int64_t yield_nanos) {
  int yields = 0;
  for (int i = 0; i < rounds; ++i) {
    if (policy->ShouldYield(*now, idle_since)) {
      ++yields;
      policy->OnYield(*now, *now + yield_nanos);
      *now += yield_nanos;
    }
    *now += step;
  }
  return yields;
}

TEST(YieldPolicyTest, ShortWaitsProbeOnlyOncePerIdleBudget) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // A ping-pong: 1000 waits of 13 idle rounds 1.5 us apart (18 us of idle each, under the
  // probe time), each ended by work. Counting rounds, a probe came every 16 of them (~800
  // yields); now one comes each time the idle time since the last one adds up to the budget
  // (the first in the 12th wait: 11 x 18 us banked and 2 us more), 18 ms / 200 us in all.
  static_assert(13 * 1500 < YieldPolicy::kProbeIdleNanos);
  static_assert(11 * 18000 < YieldPolicy::kProbeIdleBudgetNanos &&
                12 * 18000 >= YieldPolicy::kProbeIdleBudgetNanos);
  int yields = 0;
  std::vector<int> yielding_waits;
  for (int wait = 0; wait < 1000; ++wait) {
    const int64_t idle_since = now;
    const int n = CountYields(&policy, &now, idle_since, 13, 1500, 1000);
    if (n > 0) yielding_waits.push_back(wait);
    yields += n;
    now += 5000;  // the work
  }
  EXPECT_EQ(yields, 1000 * 18000 / YieldPolicy::kProbeIdleBudgetNanos);
  ASSERT_FALSE(yielding_waits.empty());
  EXPECT_EQ(yielding_waits[0], 11);
  // The rest of a wait that probed counts toward the next probe from the probe on, not from
  // the wait's beginning (counting it whole, the last yield came in wait 990).
  EXPECT_EQ(yielding_waits.back(), 998);
  EXPECT_FALSE(policy.contended(now));
}

TEST(YieldPolicyTest, ALongWaitProbesOncePerProbeTime) {
  YieldPolicy policy;
  int64_t now = 1000000;
  const int64_t idle_since = now;
  // Yields that return at once (1 us): nobody else wants the CPU. Rounds 1 us apart for
  // 10.5 probe times: probes at 1, 2, ... 10 probe times into the wait.
  const int rounds = static_cast<int>(10.5 * YieldPolicy::kProbeIdleNanos / 1000) - 10;
  EXPECT_EQ(CountYields(&policy, &now, idle_since, rounds, 1000, 1000), 10);
  EXPECT_EQ(now - idle_since, static_cast<int64_t>(10.5 * YieldPolicy::kProbeIdleNanos));
  EXPECT_FALSE(policy.contended(now));
}

TEST(YieldPolicyTest, AYieldThatRanSomebodyElseMakesEveryRoundYield) {
  YieldPolicy policy;
  int64_t now = 1000000;
  const int64_t idle_since = now;
  // Idle rounds 1 us apart up to just before the probe time: none yields.
  ASSERT_EQ(CountYields(&policy, &now, idle_since, YieldPolicy::kProbeIdleNanos / 1000, 1000,
                        1000),
            0);
  // The probe's yield keeps this thread off the CPU for 20 us: another thread ran here.
  ASSERT_EQ(CountYields(&policy, &now, idle_since, 1, 1000, 20000), 1);
  EXPECT_TRUE(policy.contended(now));
  // Every round yields now, even when those yields return at once, and even in a wait that
  // has only just begun.
  EXPECT_EQ(CountYields(&policy, &now, idle_since, 50, 1500, 1000), 50);
  EXPECT_EQ(CountYields(&policy, &now, /*idle_since=*/now, 5, 1500, 1000), 5);
}

TEST(YieldPolicyTest, ContentionIsForgottenAfterTheHold) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + 20000);
  now += 20000;
  ASSERT_TRUE(policy.contended(now));
  now += YieldPolicy::kHoldNanos;  // nothing yielded for longer than the hold
  EXPECT_FALSE(policy.contended(now));
  // A short wait yields no more; a long one probes again.
  EXPECT_EQ(CountYields(&policy, &now, /*idle_since=*/now, 10, 1500, 1000), 0);
  EXPECT_EQ(CountYields(&policy, &now, /*idle_since=*/now, 50, 1000, 1000), 2);
}

TEST(YieldPolicyTest, ContentionSeenAgainExtendsTheHold) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + 20000);
  now += 20000;
  // Just before the hold ends, another yield runs somebody else: the hold starts again.
  now += YieldPolicy::kHoldNanos - 1000;
  ASSERT_TRUE(policy.ShouldYield(now, /*idle_since=*/now));
  policy.OnYield(now, now + 20000);
  now += 20000 + YieldPolicy::kHoldNanos / 2;
  EXPECT_TRUE(policy.contended(now));
  EXPECT_TRUE(policy.ShouldYield(now, /*idle_since=*/now));
}

TEST(YieldPolicyTest, OnlyAYieldLongerThanTheThresholdCountsAsContention) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + YieldPolicy::kContendedNanos);  // a slow system call, no more
  EXPECT_FALSE(policy.contended(now + YieldPolicy::kContendedNanos));
  policy.OnYield(now, now + YieldPolicy::kContendedNanos + 1);
  EXPECT_TRUE(policy.contended(now + YieldPolicy::kContendedNanos + 1));
}


// Naps: a spinner that keeps finding somebody else on its CPU sleeps once, briefly.

// `count` yields from `*now`, one every `step` nanoseconds, each returning after `yield_nanos`;
// returns how many of them left a nap due (TakeNap() is asked, and so taken, after each).
int NapsAfterYields(YieldPolicy* policy, int64_t* now, int count, int64_t step,
                    int64_t yield_nanos) {
  int naps = 0;
  for (int i = 0; i < count; ++i) {
    policy->OnYield(*now, *now + yield_nanos);
    *now += yield_nanos;
    if (policy->TakeNap(*now)) ++naps;
    *now += step;
  }
  return naps;
}

TEST(YieldPolicyNapTest, ANapIsDueOnceLongYieldsTakeAQuarterOfTheWindow) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // Each yield ran somebody else for 20 us (a spinner that yields back): 49 of them, 0.98 ms
  // off the CPU, are not enough.
  static_assert(YieldPolicy::kNapOffCpuNanos == 50 * 20000);
  ASSERT_EQ(NapsAfterYields(&policy, &now, 49, 1000, 20000), 0);
  // The 50th, still inside kNapWindowNanos of the first: one nap, taken once.
  EXPECT_EQ(NapsAfterYields(&policy, &now, 1, 1000, 20000), 1);
  EXPECT_FALSE(policy.TakeNap(now));
  EXPECT_EQ(policy.naps(), 1u);
}

TEST(YieldPolicyNapTest, ANapNotTakenWithinTheWindowIsDropped) {
  YieldPolicy policy;
  int64_t now = 1000000;
  ASSERT_EQ(NapsAfterYields(&policy, &now, 49, 1000, 20000), 0);
  policy.OnYield(now, now + 20000);  // due now, but not asked for (the thread had work)
  now += 20000 + YieldPolicy::kNapWindowNanos + 1;
  EXPECT_FALSE(policy.TakeNap(now)) << "a nap due for contention long gone";
  EXPECT_EQ(policy.naps(), 0u);
}

TEST(YieldPolicyNapTest, TwoYieldsToAThreadThatKeepsTheCpuForASliceAreEnough) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // One 3 ms yield: a single stall is not contention.
  ASSERT_EQ(NapsAfterYields(&policy, &now, 1, 5000, 3000000), 0);
  EXPECT_EQ(NapsAfterYields(&policy, &now, 1, 5000, 3000000), 1);
}

TEST(YieldPolicyNapTest, ShortYieldsAndLongYieldsSpreadOutDoNotNap) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // Yields that return at once: nobody else wants the CPU.
  EXPECT_EQ(NapsAfterYields(&policy, &now, 1000, 1000, 1000), 0);
  // Long yields, 25 us each but 200 us apart (a hypervisor taking the CPU now and then, not a
  // thread sharing it): an eighth of the time, never a quarter of a window.
  EXPECT_EQ(NapsAfterYields(&policy, &now, 1000, 200000, 25000), 0);
  EXPECT_EQ(policy.naps(), 0u);
}

TEST(YieldPolicyNapTest, NapsThatCureNothingBackOffAndTheIntervalResetsOnceTheyWork) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // Contention that never ends: a long yield every 50 us, for 3 seconds.
  std::vector<int64_t> nap_times;
  for (int i = 0; i < 60000; ++i) {
    policy.OnYield(now, now + 20000);
    now += 20000;
    if (policy.TakeNap(now)) nap_times.push_back(now);
    now += 30000;
  }
  // Naps 4, 8, 16, ... ms apart, then once a second: about 11 in 3 s, not hundreds.
  ASSERT_GE(nap_times.size(), 3u);
  EXPECT_LE(nap_times.size(), 12u);
  for (size_t i = 1; i < nap_times.size(); ++i) {
    EXPECT_GE(nap_times[i] - nap_times[i - 1], YieldPolicy::kMinNapIntervalNanos) << i;
  }
  EXPECT_GE(nap_times[2] - nap_times[1], 2 * YieldPolicy::kMinNapIntervalNanos);
  EXPECT_EQ(policy.nap_interval_nanos(), YieldPolicy::kMaxNapIntervalNanos);
  // Then quiet for longer than twice the interval: the next contention naps at once, and the
  // interval is back at its minimum.
  now += 2 * YieldPolicy::kMaxNapIntervalNanos + 1;
  EXPECT_EQ(NapsAfterYields(&policy, &now, 50, 1000, 20000), 1);
  EXPECT_EQ(policy.nap_interval_nanos(), YieldPolicy::kMinNapIntervalNanos);
}

// Real threads: two spinners confined to one CPU, each yielding through its own policy, find
// each other (or whatever else runs there) on every yield; both nap, and back off.
TEST(YieldPolicyNapTest, TwoSpinnersSharingOneCpuNapAndBackOff) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  constexpr int64_t kRunNanos = 400 * 1000 * 1000;
  YieldPolicy policies[2];
  std::vector<std::thread> threads;
  for (YieldPolicy& policy : policies) {
    threads.emplace_back([&policy, cpu] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
      const MonotonicClock* clock = MonotonicClock::Get();
      const int64_t start = clock->NowNanos();  // idle (no work) throughout
      const int64_t end = start + kRunNanos;
      for (int64_t now = clock->NowNanos(); now < end; now = clock->NowNanos()) {
        // A round's own work, ~10 us: the other thread's yield lasts at least that long.
        while (clock->NowNanos() - now < 10000) {
        }
        now = clock->NowNanos();
        if (policy.TakeNap(now)) {
          timespec nap{0, YieldPolicy::kNapNanos};
          nanosleep(&nap, nullptr);
        } else {
          policy.MaybeYield(now, start);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Without naps: none. Without the back-off: one every ~4 ms, ~100 each. With it: the first
  // at once, then 4, 8, 16, 32, 64, 128 ms apart.
  for (const YieldPolicy& policy : policies) {
    EXPECT_GE(policy.naps(), 2u);
    EXPECT_LE(policy.naps(), 10u);
  }
  EXPECT_GT(std::max(policies[0].nap_interval_nanos(), policies[1].nap_interval_nanos()),
            YieldPolicy::kMinNapIntervalNanos);
}

TEST(MoveToAnotherCpuTest, LeavesTheCpuAndRestoresTheAffinity) {
  int first = 0;
  int second = 0;
  if (!TwoAllowedCpus(&first, &second)) GTEST_SKIP() << "needs two CPUs this process may use";
  std::thread([first, second] {
    const cpu_set_t two = CpuSet({first, second});
    PlaceOn(first, two);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_TRUE(MoveToAnotherCpu()) << "the thread stayed on CPU " << first;
    const cpu_set_t after = ThisThreadsAffinity();
    EXPECT_TRUE(CPU_EQUAL(&after, &two)) << "the affinity was not restored";
  }).join();
}

TEST(MoveToAnotherCpuTest, AThreadThatMayUseOneCpuStaysAndKeepsItsAffinity) {
  int first = 0;
  int second = 0;
  if (!TwoAllowedCpus(&first, &second)) GTEST_SKIP() << "needs two CPUs this process may use";
  std::thread([second] {
    const cpu_set_t one = CpuSet({second});
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    EXPECT_FALSE(MoveToAnotherCpu());
    EXPECT_EQ(sched_getcpu(), second);
    const cpu_set_t after = ThisThreadsAffinity();
    EXPECT_TRUE(CPU_EQUAL(&after, &one));
  }).join();
}

}  // namespace
}  // namespace homarpc::transport
