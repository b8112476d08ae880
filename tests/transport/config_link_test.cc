// Tests for Config::FitToLink (transport/config.h): loss-recovery timers and bytes in flight
// on slow links.
#include "gtest/gtest.h"
#include "transport/config.h"

namespace homarpc::transport {
namespace {

TEST(FitToLinkTest, LeavesFastLinksAndUnpacedAlone) {
  for (uint32_t mbps : {0u, 3200u, 25000u}) {
    Config config;
    config.link_mbps = mbps;
    const Config before = config;
    config.FitToLink();
    EXPECT_EQ(config.resend_ticks, before.resend_ticks) << mbps;
    EXPECT_EQ(config.resend_interval, before.resend_interval) << mbps;
    EXPECT_EQ(config.timeout_ticks, before.timeout_ticks) << mbps;
    EXPECT_EQ(config.max_incoming, before.max_incoming) << mbps;
    EXPECT_EQ(config.unsched_bytes, before.unsched_bytes) << mbps;
    EXPECT_EQ(config.fifo_grant_increment, before.fifo_grant_increment) << mbps;
    EXPECT_TRUE(config.Validate().ok()) << mbps;
  }
}

TEST(FitToLinkTest, WaitsForTheQueueToDrainOnASlowLink) {
  Config config;  // 1 ms ticks
  config.link_mbps = 10;
  config.FitToLink();
  // 128 KiB at 10 Mbit/s drains in 104.9 ms: RESEND after 105 ticks, abort after ten of them.
  EXPECT_EQ(config.resend_ticks, 105u);
  EXPECT_EQ(config.resend_interval, 105u);
  EXPECT_EQ(config.timeout_ticks, 1050u);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(FitToLinkTest, ScalesWithTheRate) {
  Config config;
  config.link_mbps = 100;  // 10.5 ms of queue
  config.FitToLink();
  EXPECT_EQ(config.resend_ticks, 11u);
  EXPECT_EQ(config.timeout_ticks, 110u);
}

TEST(FitToLinkTest, NeverShortensLongerSettings) {
  Config config;
  config.link_mbps = 10;
  config.resend_ticks = 500;
  config.resend_interval = 500;
  config.timeout_ticks = 20000;
  config.FitToLink();
  EXPECT_EQ(config.resend_ticks, 500u);
  EXPECT_EQ(config.resend_interval, 500u);
  EXPECT_EQ(config.timeout_ticks, 20000u);
}

TEST(FitToLinkTest, LetsInAMillisecondOfASlowLink) {
  Config config;
  config.link_mbps = 1000;  // 125000 bytes a millisecond
  config.FitToLink();
  EXPECT_EQ(config.resend_ticks, Config().resend_ticks);  // fast enough for the timers
  EXPECT_EQ(config.max_incoming, 125000u);
  EXPECT_EQ(config.unsched_bytes, 40000u);  // already less than a millisecond
  EXPECT_TRUE(config.Validate().ok());

  config = Config();
  config.link_mbps = 150;
  config.FitToLink();
  EXPECT_EQ(config.max_incoming, 18750u);
  EXPECT_EQ(config.unsched_bytes, 18750u);
  EXPECT_EQ(config.fifo_grant_increment, 18750u / 2);  // a FIFO grant stays within it
  EXPECT_TRUE(config.Validate().ok());
}

TEST(FitToLinkTest, FifoGrantsShrinkOnlyBelowTheirDefault) {
  Config config;
  config.link_mbps = 1000;
  config.FitToLink();
  EXPECT_EQ(config.fifo_grant_increment, 50000u);  // half of 125000 is more
  config = Config();
  config.link_mbps = 10;
  config.FitToLink();
  EXPECT_EQ(config.fifo_grant_increment, config.max_incoming / 2);
}

TEST(FitToLinkTest, ResendRoundsKeepTheirSizeWhenMaxIncomingShrinks) {
  Config config;
  EXPECT_EQ(config.ResendBudget(), config.max_incoming);  // 400000
  config.link_mbps = 150;
  config.FitToLink();
  ASSERT_EQ(config.max_incoming, 18750u);
  // What the queue drains in one resend interval (FitToLink's timers), not 18750.
  EXPECT_EQ(config.ResendBudget(), Config::kSlowLinkQueueBytes);
}

TEST(FitToLinkTest, KeepsAPacketUnscheduledAndFourIncoming) {
  Config config;
  config.link_mbps = 10;  // 1250 bytes a millisecond: less than a packet
  config.FitToLink();
  EXPECT_EQ(config.unsched_bytes, config.PayloadPerPacket(/*ipv6=*/true));  // the smaller
  EXPECT_EQ(config.max_incoming, config.max_path_mtu);  // a jumbo packet may arrive: 9000
  EXPECT_TRUE(config.Validate().ok());

  config = Config();
  config.link_mbps = 10;
  config.use_path_mtu = false;
  config.FitToLink();
  EXPECT_EQ(config.max_incoming, 4 * config.mtu);  // 6000
  EXPECT_TRUE(config.Validate().ok());
}

TEST(FitToLinkTest, NeverRaisesSmallerByteLimits) {
  Config config;
  config.link_mbps = 1000;
  config.max_incoming = 20000;
  config.unsched_bytes = 5000;
  config.FitToLink();
  EXPECT_EQ(config.max_incoming, 20000u);
  EXPECT_EQ(config.unsched_bytes, 5000u);
}

}  // namespace
}  // namespace homarpc::transport
