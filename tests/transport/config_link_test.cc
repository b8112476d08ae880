// Tests for Config::FitTimersToLink (transport/config.h): loss-recovery timers on slow links.
#include "gtest/gtest.h"
#include "transport/config.h"

namespace homarpc::transport {
namespace {

TEST(FitTimersToLinkTest, LeavesFastLinksAndUnpacedAlone) {
  for (uint32_t mbps : {0u, 1000u, 25000u}) {
    Config config;
    config.link_mbps = mbps;
    const Config before = config;
    config.FitTimersToLink();
    EXPECT_EQ(config.resend_ticks, before.resend_ticks) << mbps;
    EXPECT_EQ(config.resend_interval, before.resend_interval) << mbps;
    EXPECT_EQ(config.timeout_ticks, before.timeout_ticks) << mbps;
    EXPECT_TRUE(config.Validate().ok()) << mbps;
  }
}

TEST(FitTimersToLinkTest, WaitsForTheQueueToDrainOnASlowLink) {
  Config config;  // 1 ms ticks
  config.link_mbps = 10;
  config.FitTimersToLink();
  // 128 KiB at 10 Mbit/s drains in 104.9 ms: RESEND after 105 ticks, abort after ten of them.
  EXPECT_EQ(config.resend_ticks, 105u);
  EXPECT_EQ(config.resend_interval, 105u);
  EXPECT_EQ(config.timeout_ticks, 1050u);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(FitTimersToLinkTest, ScalesWithTheRate) {
  Config config;
  config.link_mbps = 100;  // 10.5 ms of queue
  config.FitTimersToLink();
  EXPECT_EQ(config.resend_ticks, 11u);
  EXPECT_EQ(config.timeout_ticks, 110u);
}

TEST(FitTimersToLinkTest, NeverShortensLongerSettings) {
  Config config;
  config.link_mbps = 10;
  config.resend_ticks = 500;
  config.resend_interval = 500;
  config.timeout_ticks = 20000;
  config.FitTimersToLink();
  EXPECT_EQ(config.resend_ticks, 500u);
  EXPECT_EQ(config.resend_interval, 500u);
  EXPECT_EQ(config.timeout_ticks, 20000u);
}

}  // namespace
}  // namespace homarpc::transport
