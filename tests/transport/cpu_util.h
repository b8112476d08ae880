// cpu_util: CPU affinity helpers for tests of threads that move between CPUs (sched_test,
// loop_spin_test).
#ifndef HOMARPC_TESTS_TRANSPORT_CPU_UTIL_H_
#define HOMARPC_TESTS_TRANSPORT_CPU_UTIL_H_

#include <sched.h>

#include <initializer_list>

#include "gtest/gtest.h"

namespace homarpc::transport {

// The first two CPUs this process may run on, or false where it may run on one only (or the
// mask does not fit a cpu_set_t: more than CPU_SETSIZE CPUs).
inline bool TwoAllowedCpus(int* first, int* second) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    *(found == 0 ? first : second) = cpu;
    ++found;
  }
  return found == 2;
}

inline cpu_set_t CpuSet(std::initializer_list<int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

inline cpu_set_t ThisThreadsAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return set;
}

// Puts the calling thread on `cpu` and leaves it free to run on `allowed` again.
inline void PlaceOn(int cpu, const cpu_set_t& allowed) {
  const cpu_set_t one = CpuSet({cpu});
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  ASSERT_EQ(sched_getcpu(), cpu);
  ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
}

}  // namespace homarpc::transport

#endif  // HOMARPC_TESTS_TRANSPORT_CPU_UTIL_H_
