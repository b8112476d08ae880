// Tests of runtime/transport_args: the transport-level channel arguments shared by channels
// and servers.
#include "runtime/transport_args.h"

#include <gtest/gtest.h>

namespace homarpc::internal {
namespace {

TEST(TransportArgs, AbsentKeysKeepTheDefaults) {
  UdpTransportOptions options;
  const transport::Config defaults;
  ASSERT_TRUE(ApplyTransportArgs(ChannelArguments(), &options).ok());
  EXPECT_EQ(options.endpoint.config.poll_usecs, defaults.poll_usecs);
  EXPECT_EQ(options.endpoint.config.mtu, defaults.mtu);
  EXPECT_TRUE(options.endpoint.config.use_path_mtu);  // each peer's route MTU
  EXPECT_EQ(options.endpoint.config.link_mbps, defaults.link_mbps);
  EXPECT_FALSE(options.endpoint.config.pace_local);  // data to this host is not paced
  EXPECT_TRUE(options.endpoint.config.direct_send);
  EXPECT_EQ(options.endpoint.io.kind, transport::IoKind::kAuto);
  EXPECT_EQ(options.caller_sockets, static_cast<uint32_t>(kDefaultCallerSockets));
}

TEST(TransportArgs, MtuZeroMeansTheRoutesMtu) {
  ChannelArguments args;
  args.SetInt(kArgMtu, 0);
  UdpTransportOptions options;
  ASSERT_TRUE(ApplyTransportArgs(args, &options).ok());
  EXPECT_TRUE(options.endpoint.config.use_path_mtu);
}

TEST(TransportArgs, EveryKeyIsApplied) {
  ChannelArguments args;
  args.SetInt(kArgSpinMicros, 0);
  args.SetInt(kArgMtu, 9000);
  args.SetInt(kArgLinkMbps, 0);
  args.SetString(kArgIoBackend, "epoll");
  args.SetInt(kArgCallerSockets, 0);
  args.SetInt(kArgPaceLocal, 1);
  args.SetInt(kArgDirectSend, 0);
  UdpTransportOptions options;
  ASSERT_TRUE(ApplyTransportArgs(args, &options).ok());
  EXPECT_EQ(options.caller_sockets, 0u);
  EXPECT_TRUE(options.endpoint.config.pace_local);
  EXPECT_FALSE(options.endpoint.config.direct_send);
  EXPECT_EQ(options.endpoint.config.poll_usecs, 0u);
  EXPECT_EQ(options.endpoint.config.mtu, 9000u);
  EXPECT_FALSE(options.endpoint.config.use_path_mtu);  // a fixed MTU for every peer
  EXPECT_EQ(options.endpoint.config.link_mbps, 0u);
  EXPECT_EQ(options.endpoint.io.kind, transport::IoKind::kEpoll);
}

TEST(TransportArgs, ALinkRateFitsTheTransportToIt) {
  ChannelArguments args;
  args.SetInt(kArgLinkMbps, 150);
  UdpTransportOptions options;
  ASSERT_TRUE(ApplyTransportArgs(args, &options).ok());
  const transport::Config& c = options.endpoint.config;
  EXPECT_EQ(c.max_incoming, 18750u);  // 1 ms of 150 Mbit/s (transport::Config::FitToLink)
  EXPECT_EQ(c.unsched_bytes, 18750u);
  EXPECT_GT(c.resend_ticks, transport::Config().resend_ticks);

  // A fixed jumbo MTU on a slow link: four of its packets incoming, one unscheduled.
  args.SetInt(kArgMtu, 9000);
  args.SetInt(kArgLinkMbps, 10);
  options = UdpTransportOptions();
  ASSERT_TRUE(ApplyTransportArgs(args, &options).ok());
  EXPECT_EQ(options.endpoint.config.max_incoming, 36000u);
  EXPECT_EQ(options.endpoint.config.unsched_bytes,
            transport::Config::PayloadPerPacketAt(9000, /*ipv6=*/true));
}

TEST(TransportArgs, BadValuesAreRejectedNamingTheKey) {
  struct Case {
    const char* key;
    int value;
  };
  for (const Case& c : {Case{kArgSpinMicros, -1}, Case{kArgMtu, -1}, Case{kArgMtu, 100},
                        Case{kArgLinkMbps, -5}, Case{kArgPaceLocal, 2},
                        Case{kArgPaceLocal, -1}, Case{kArgDirectSend, 2},
                        Case{kArgCallerSockets, -1},
                        Case{kArgCallerSockets, kMaxCallerSockets + 1}}) {
    ChannelArguments args;
    args.SetInt(c.key, c.value);
    UdpTransportOptions options;
    absl::Status s = ApplyTransportArgs(args, &options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key << "=" << c.value;
    // The MTU floor is the transport config's own check, which names its field.
    EXPECT_TRUE(s.message().find(c.key) != absl::string_view::npos ||
                s.message().find("mtu") != absl::string_view::npos)
        << s;
  }
  ChannelArguments args;
  args.SetString(kArgIoBackend, "dpdk");
  UdpTransportOptions options;
  absl::Status s = ApplyTransportArgs(args, &options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dpdk"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace homarpc::internal
