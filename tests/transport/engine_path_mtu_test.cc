// Protocol tests of per-peer packet sizes (Config::use_path_mtu), on the manual-clock harness
// (engine_harness.h), whose hosts report a path MTU per destination: each peer's DATA packets
// are sized for the MTU of the route to it, capped at max_path_mtu; a peer whose route is
// unknown, or every peer when use_path_mtu is off, gets Config::mtu; the sink is asked once
// per peer; a receiver takes packets of any size; after larger packets are lost (a RESEND, a
// restart) the peer gets Config::mtu packets from then on; and a direct send stays within
// Config::mtu whatever the path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/transport/engine_harness.h"
#include "transport/config.h"
#include "transport/engine.h"

namespace homarpc::transport {
namespace {

using testing::Bytes;
using testing::Captured;
using testing::Host;
using testing::Net;
using testing::Str;
using testing::Unpaced;
using wire::PacketType;

constexpr uint32_t kPayload1500 = 1500 - 28 - 56;  // IPv4/UDP headers, Homa DATA header
constexpr uint32_t kPayload9000 = 9000 - 28 - 56;

// The payload lengths of the DATA packets in `host`'s outbox, in order.
std::vector<uint32_t> DataLengths(const Host* host) {
  std::vector<uint32_t> out;
  for (const Captured& c : host->OfType(PacketType::kData)) {
    out.push_back(static_cast<uint32_t>(c.Decoded().payload.size()));
  }
  return out;
}

struct PathMtuTest : public ::testing::Test {
  explicit PathMtuTest(Config c = Unpaced()) : net(c) {
    client = net.AddHost("10.0.0.1:40000");
    jumbo = net.AddHost("10.0.0.2:5000");
    plain = net.AddHost("10.0.0.3:5000");
    for (Host* server : {jumbo, plain}) {
      server->auto_respond = [](const std::string& req) { return Buffer::CopyOf(req); };
    }
  }
  Net net;
  Host* client;
  Host* jumbo;  // reached over a 9000-byte route
  Host* plain;  // a route the sink knows nothing about
};

TEST_F(PathMtuTest, EachPeerGetsPacketsSizedForItsRoute) {
  // Given: the client's route to `jumbo` has a 9000-byte MTU; to `plain` it reports none.
  client->routes[jumbo->address()].mtu = 9000;
  jumbo->routes[client->address()].mtu = 9000;
  // When: the same 20000-byte request goes to each (within unsched_bytes: no grants needed).
  Buffer a = Bytes(20000, 1), b = Bytes(20000, 2);
  const std::string want_a = Str(a), want_b = Str(b);
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), std::move(a), 1).ok());
  // Then: 8916-byte packets to the jumbo route...
  EXPECT_EQ(DataLengths(client),
            (std::vector<uint32_t>{kPayload9000, kPayload9000, 20000 - 2 * kPayload9000}));
  net.Flush(client);
  ASSERT_TRUE(client->engine().SendRequest(plain->address(), std::move(b), 2).ok());
  // ... and Config::mtu's 1416-byte packets where the route is unknown.
  std::vector<uint32_t> want_plain(14, kPayload1500);
  want_plain.push_back(20000 - 14 * kPayload1500);
  EXPECT_EQ(DataLengths(client), want_plain);
  net.Settle();
  // Both requests arrive whole and both echoes come back; the jumbo server answers in
  // 8916-byte packets too (its route back reports 9000), the plain one in 1416-byte ones.
  ASSERT_EQ(jumbo->requests.size(), 1u);
  EXPECT_EQ(jumbo->requests[0].bytes, want_a);
  ASSERT_EQ(plain->requests.size(), 1u);
  EXPECT_EQ(plain->requests[0].bytes, want_b);
  ASSERT_EQ(client->responses.size(), 2u);
  for (const auto& r : client->responses) {
    ASSERT_TRUE(r.result.ok());
    EXPECT_EQ(*r.result, r.cookie == 1 ? want_a : want_b);
  }
  EXPECT_EQ(jumbo->engine().stats().packets_sent[static_cast<uint8_t>(PacketType::kData)], 3u);
  EXPECT_EQ(plain->engine().stats().packets_sent[static_cast<uint8_t>(PacketType::kData)], 15u);
}

TEST_F(PathMtuTest, RouteMtuIsCappedAtMaxPathMtu) {
  // Given: a loopback-like route of 64 KiB; the cap (max_path_mtu) is 9000 by default.
  client->routes[jumbo->address()].mtu = 65536;
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Bytes(30000), 0).ok());
  // Then: packets of the capped size, not one 30000-byte datagram.
  EXPECT_EQ(DataLengths(client), (std::vector<uint32_t>{kPayload9000, kPayload9000,
                                                        kPayload9000, 30000 - 3 * kPayload9000}));
}

TEST_F(PathMtuTest, SinkIsAskedOncePerPeer) {
  client->routes[jumbo->address()].mtu = 9000;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Bytes(100), 0).ok());
    ASSERT_TRUE(client->engine().SendRequest(plain->address(), Bytes(100), 0).ok());
  }
  EXPECT_EQ(client->route_queries, 2);
}

TEST_F(PathMtuTest, LostLargePacketIsResentInConfigMtuPacketsFromThenOn) {
  client->routes[jumbo->address()].mtu = 9000;
  jumbo->routes[client->address()].mtu = 9000;
  Buffer req = Bytes(4 * kPayload9000 + 100);  // within unsched_bytes: no grants involved
  const std::string want = Str(req);
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), std::move(req), 0).ok());
  // Drop the first DATA packet at offset 8916 (the second of five 8916-byte packets).
  bool dropped = false;
  std::vector<std::pair<uint32_t, uint32_t>> resent;  // (offset, length) of retransmissions
  net.Run(100 * 1000 * 1000, [&](const Host* h, const Captured& c) {
    if (h != client || c.type() != PacketType::kData) return true;
    const wire::Packet p = c.Decoded();
    if (!dropped && p.data.offset == kPayload9000) {
      dropped = true;
      return false;
    }
    if (p.data.retransmit) {
      resent.push_back({p.data.offset, static_cast<uint32_t>(p.payload.size())});
    }
    return true;
  });
  ASSERT_TRUE(dropped);
  // Expect: the server asked for exactly the lost packet's bytes, and the client resent them
  // from where that packet started, in whole Config::mtu-sized packets (the route may not
  // carry 9000-byte ones after all: larger packets were lost); the last may reach past the gap.
  std::vector<std::pair<uint32_t, uint32_t>> want_resent;
  for (uint32_t off = kPayload9000; off < 2 * kPayload9000; off += kPayload1500) {
    want_resent.push_back({off, kPayload1500});
  }
  EXPECT_EQ(resent, want_resent);
  EXPECT_EQ(client->engine().stats().path_mtu_fallbacks, 1u);
  ASSERT_EQ(jumbo->requests.size(), 1u);
  EXPECT_EQ(jumbo->requests[0].bytes, want);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(*client->responses[0].result, want);
  // And: the next request to that peer goes out in Config::mtu packets too.
  client->outbox.clear();
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Bytes(3000), 0).ok());
  EXPECT_EQ(DataLengths(client),
            (std::vector<uint32_t>{kPayload1500, kPayload1500, 3000 - 2 * kPayload1500}));
}

TEST_F(PathMtuTest, RestartAfterEveryLargePacketWasLostUsesConfigMtu) {
  client->routes[jumbo->address()].mtu = 9000;
  const Buffer req = Bytes(2 * kPayload9000);
  const std::string want = Str(req);
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Buffer::CopyOf(want), 0).ok());
  // Every DATA packet larger than Config::mtu allows is lost on the way (a smaller hop).
  net.Run(100 * 1000 * 1000, [&](const Host* h, const Captured& c) {
    return !(h == client && c.type() == PacketType::kData &&
             c.Decoded().payload.size() > kPayload1500);
  });
  // Expect: the server never heard of it, said so (RPC_UNKNOWN), and the restart in
  // Config::mtu packets got through.
  EXPECT_GE(client->engine().stats().restarts, 1u);
  EXPECT_EQ(client->engine().stats().path_mtu_fallbacks, 1u);
  ASSERT_EQ(jumbo->requests.size(), 1u);
  EXPECT_EQ(jumbo->requests[0].bytes, want);
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok());
}

TEST_F(PathMtuTest, DirectSendsStayWithinConfigMtu) {
  // A direct send is built on another thread that does not know the peer: one packet of
  // Config::mtu at most, even toward a jumbo route.
  client->routes[jumbo->address()].mtu = 9000;
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Bytes(100), 0).ok());  // peer known
  EXPECT_EQ(client->route_queries, 1);
  EXPECT_EQ(client->engine().direct_max_bytes(), kPayload1500);
}

struct PathMtuOffTest : public PathMtuTest {
  static Config Off() {
    Config c = Unpaced();
    c.use_path_mtu = false;
    c.pace_local = true;  // nor is the route needed to tell whether a peer is on this host
    return c;
  }
  PathMtuOffTest() : PathMtuTest(Off()) {}
};

TEST_F(PathMtuOffTest, EveryPeerGetsConfigMtu) {
  client->routes[jumbo->address()].mtu = 9000;
  ASSERT_TRUE(client->engine().SendRequest(jumbo->address(), Bytes(3000), 0).ok());
  EXPECT_EQ(DataLengths(client),
            (std::vector<uint32_t>{kPayload1500, kPayload1500, 3000 - 2 * kPayload1500}));
  EXPECT_EQ(client->route_queries, 0);  // not even asked
}

TEST(PathMtuConfig, MtuForPathClampsAndFallsBack) {
  Config c;
  EXPECT_EQ(c.MtuForPath(0), c.mtu);       // unknown route
  EXPECT_EQ(c.MtuForPath(9000), 9000u);
  EXPECT_EQ(c.MtuForPath(65536), 9000u);   // capped at max_path_mtu
  EXPECT_EQ(c.MtuForPath(100), 576u);      // never below IPv4's minimum
  c.max_path_mtu = 4000;
  EXPECT_EQ(c.MtuForPath(9000), 4000u);
  c.use_path_mtu = false;
  EXPECT_EQ(c.MtuForPath(9000), c.mtu);
}

TEST(PathMtuConfig, SetMtuOrRouteZeroMeansTheRoute) {
  Config c;
  c.SetMtuOrRoute(9000);
  EXPECT_EQ(c.mtu, 9000u);
  EXPECT_FALSE(c.use_path_mtu);
  EXPECT_EQ(c.MtuForPath(1500), 9000u);  // the setting, whatever the route says
  c.SetMtuOrRoute(0);
  EXPECT_TRUE(c.use_path_mtu);
  EXPECT_EQ(c.mtu, 9000u);  // still the fallback where a route is unknown
}

TEST(PathMtuConfig, ValidateChecksTheCapAndMaxIncoming) {
  Config c;
  c.max_path_mtu = 100;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c.max_path_mtu = 9000;
  c.max_incoming = 5000;  // less than one 9000-byte packet
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c.use_path_mtu = false;  // then only Config::mtu's packets must fit
  EXPECT_TRUE(c.Validate().ok());
}

}  // namespace
}  // namespace homarpc::transport
