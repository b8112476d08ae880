// Tests for SpinPolicy (transport/loop.h): when an idle loop busy-polls and for how long.
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

}  // namespace
}  // namespace homarpc::transport
