// Tests of transport/sched.h: the names and the scheduler slice of homarpc's threads, and how
// often a spinning thread yields its CPU.
#include "transport/sched.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
#include "transport/address.h"
#include "transport/buffer.h"
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
// yield returning after `yield_nanos`.
int CountYields(YieldPolicy* policy, int64_t* now, int rounds, int64_t step,
                int64_t yield_nanos) {
  int yields = 0;
  for (int i = 0; i < rounds; ++i) {
    if (policy->ShouldYield(*now)) {
      ++yields;
      policy->OnYield(*now, *now + yield_nanos);
      *now += yield_nanos;
    }
    *now += step;
  }
  return yields;
}

TEST(YieldPolicyTest, AloneItYieldsOnlyToProbe) {
  YieldPolicy policy;
  int64_t now = 1000000;
  // Yields that return at once (1 us): nobody else wants the CPU.
  EXPECT_EQ(CountYields(&policy, &now, 10 * YieldPolicy::kProbeRounds, 1500, 1000), 10);
  EXPECT_FALSE(policy.contended(now));
}

TEST(YieldPolicyTest, AYieldThatRanSomebodyElseMakesEveryRoundYield) {
  YieldPolicy policy;
  int64_t now = 1000000;
  ASSERT_EQ(CountYields(&policy, &now, YieldPolicy::kProbeRounds - 1, 1500, 1000), 0);
  // The probe's yield keeps this thread off the CPU for 20 us: another thread ran here.
  ASSERT_EQ(CountYields(&policy, &now, 1, 1500, 20000), 1);
  EXPECT_TRUE(policy.contended(now));
  // Every round yields now, even when those yields return at once.
  EXPECT_EQ(CountYields(&policy, &now, 50, 1500, 1000), 50);
}

TEST(YieldPolicyTest, ContentionIsForgottenAfterTheHold) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + 20000);
  now += 20000;
  ASSERT_TRUE(policy.contended(now));
  now += YieldPolicy::kHoldNanos;  // nothing yielded for longer than the hold
  EXPECT_FALSE(policy.contended(now));
  EXPECT_EQ(CountYields(&policy, &now, 4 * YieldPolicy::kProbeRounds, 1500, 1000), 4);
}

TEST(YieldPolicyTest, ContentionSeenAgainExtendsTheHold) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + 20000);
  now += 20000;
  // Just before the hold ends, another yield runs somebody else: the hold starts again.
  now += YieldPolicy::kHoldNanos - 1000;
  ASSERT_TRUE(policy.ShouldYield(now));
  policy.OnYield(now, now + 20000);
  now += 20000 + YieldPolicy::kHoldNanos / 2;
  EXPECT_TRUE(policy.contended(now));
  EXPECT_TRUE(policy.ShouldYield(now));
}

TEST(YieldPolicyTest, OnlyAYieldLongerThanTheThresholdCountsAsContention) {
  YieldPolicy policy;
  int64_t now = 1000000;
  policy.OnYield(now, now + YieldPolicy::kContendedNanos);  // a slow system call, no more
  EXPECT_FALSE(policy.contended(now + YieldPolicy::kContendedNanos));
  policy.OnYield(now, now + YieldPolicy::kContendedNanos + 1);
  EXPECT_TRUE(policy.contended(now + YieldPolicy::kContendedNanos + 1));
}

}  // namespace
}  // namespace homarpc::transport
