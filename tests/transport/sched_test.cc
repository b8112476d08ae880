// Tests of transport/sched.h: the names and the scheduler slice of homarpc's threads.
#include "transport/sched.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/address.h"
#include "transport/endpoint.h"

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

TEST(Sched, AnEndpointsLoopThreadIsNamedByItsIndex) {
  EndpointOptions options;
  options.io.bind_address = Address::Loopback4(0);
  auto endpoint = Endpoint::Create(options);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  // The loop names itself on its own thread, which may not have run yet when Create()
  // returns: look until the name shows, for up to 2 s (a failure guard, not a timing).
  bool found = false;
  for (int attempt = 0; attempt < 2000 && !found; ++attempt) {
    for (const std::string& name : ThreadNames()) found = found || name == "hrpc-loop0";
    if (!found) usleep(1000);
  }
  EXPECT_TRUE(found);
  endpoint->reset();
}

TEST(Sched, RequestShortSliceSetsTheSliceAndKeepsNice) {
  bool accepted = false;
  int policy = -1;
  int nice_before = 0;
  int nice_after = 0;
  uint64_t slice = 0;
  std::thread thread([&] {
    // setpriority(PRIO_PROCESS, 0) sets the calling thread's nice on Linux.
    ASSERT_EQ(setpriority(PRIO_PROCESS, 0, 5), 0);
    nice_before = getpriority(PRIO_PROCESS, 0);
    accepted = RequestShortSlice(300 * 1000);
    policy = sched_getscheduler(0);
    nice_after = getpriority(PRIO_PROCESS, 0);
    slice = ThisThreadsSliceNanos();
  });
  thread.join();
  if (!accepted) GTEST_SKIP() << "this kernel has no sched_setattr for SCHED_OTHER threads";
  EXPECT_EQ(policy, SCHED_OTHER);
  EXPECT_EQ(nice_before, 5);
  EXPECT_EQ(nice_after, 5);
  if (slice != 300 * 1000) {
    GTEST_SKIP() << "this kernel ignores a SCHED_OTHER thread's slice (Linux < 6.12): " << slice
                 << " ns";
  }
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

}  // namespace
}  // namespace homarpc::transport
