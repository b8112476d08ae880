// Tests for SpinPolicy and YieldPolicy (transport/loop.h): when an idle loop busy-polls, for how
// long, and how often it yields its CPU.
#include "gtest/gtest.h"
#include "transport/loop.h"

namespace homarpc::transport {
namespace {

constexpr int64_t kSpin = 50000;       // 50 us
constexpr int64_t kBusySpin = 200000;  // 200 us

TEST(SpinPolicyTest, SpinsAtFirstWhenNothingIsKnown) {
  SpinPolicy policy(kSpin, kBusySpin);
  EXPECT_EQ(policy.Budget(/*mid_transfer=*/false, /*awaiting_responses=*/false), kSpin);
}

TEST(SpinPolicyTest, MidTransferGetsTheLongerBudget) {
  SpinPolicy policy(kSpin, kBusySpin);
  for (int i = 0; i < 100; ++i) policy.OnWorkAfterIdle(10 * kSpin);
  EXPECT_EQ(policy.Budget(true, false), kBusySpin);
  EXPECT_EQ(policy.Budget(true, true), kBusySpin);
}

TEST(SpinPolicyTest, StopsSpinningWhenWorkArrivesRarely) {
  SpinPolicy policy(kSpin, kBusySpin);
  // A request every 200 us: spinning 50 us after each one would always end in a sleep.
  for (int i = 0; i < 40; ++i) policy.OnWorkAfterIdle(200000);
  EXPECT_GT(policy.gap_average_nanos(), kSpin);
  EXPECT_EQ(policy.Budget(false, false), 0);
}

TEST(SpinPolicyTest, StillSpinsWhileAwaitingItsOwnResponses) {
  SpinPolicy policy(kSpin, kBusySpin);
  for (int i = 0; i < 40; ++i) policy.OnWorkAfterIdle(1000000);
  EXPECT_EQ(policy.Budget(false, true), kSpin);
}

TEST(SpinPolicyTest, ResumesSpinningWhenGapsShrinkAgain) {
  SpinPolicy policy(kSpin, kBusySpin);
  for (int i = 0; i < 40; ++i) policy.OnWorkAfterIdle(200000);
  ASSERT_EQ(policy.Budget(false, false), 0);
  int calls = 0;
  while (policy.Budget(false, false) == 0) {
    policy.OnWorkAfterIdle(5000);  // back-to-back calls again
    ++calls;
    ASSERT_LT(calls, 100);
  }
  // The average moves 1/8 of the way per gap, and the long gaps counted as 100 us (2 x spin):
  // from ~100 us to <= 50 us takes about six gaps.
  EXPECT_GE(calls, 4);
  EXPECT_LE(calls, 10);
  EXPECT_LE(policy.gap_average_nanos(), kSpin);
}

TEST(SpinPolicyTest, OneStallDoesNotStopABusyLoopFromSpinning) {
  SpinPolicy policy(kSpin, kBusySpin);
  for (int i = 0; i < 40; ++i) policy.OnWorkAfterIdle(10000);  // back-to-back calls
  ASSERT_EQ(policy.Budget(false, false), kSpin);
  // The client was descheduled for 5 ms once; the next call must still find the loop spinning.
  policy.OnWorkAfterIdle(5000000);
  EXPECT_EQ(policy.Budget(false, false), kSpin);
  EXPECT_LE(policy.gap_average_nanos(), kSpin);
}

TEST(SpinPolicyTest, ZeroSpinNeverSpins) {
  SpinPolicy policy(0, 0);
  EXPECT_EQ(policy.Budget(false, false), 0);
  EXPECT_EQ(policy.Budget(false, true), 0);
  EXPECT_EQ(policy.Budget(true, true), 0);
}

// YieldPolicy (transport/loop.h): how often a spinning loop gives its CPU away.

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

}  // namespace
}  // namespace homarpc::transport
