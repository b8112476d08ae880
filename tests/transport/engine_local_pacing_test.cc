// Protocol tests of Config::pace_local on the manual-clock harness (engine_harness.h), whose
// hosts report a route per destination: DATA to a peer on this host (Route::local) goes out
// as soon as it is granted and is not counted in the pacer's NIC backlog, so it neither waits
// for the clock nor delays a remote peer's paced data; grants still bound it; a remote or
// unknown route is paced as before; pace_local = true paces local peers too; and the route is
// asked for even when path MTUs are off.
#include <gtest/gtest.h>

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
using wire::PacketType;

constexpr uint32_t kPayload1500 = 1500 - 28 - 56;  // IPv4/UDP headers, Homa DATA header

// A slow, paced link (1 Gbit/s, a 1416-byte packet takes ~12 us) where Homa's 5 us backlog
// limit alone decides: a paced sender hands over only a packet or two before the clock moves.
Config Paced() {
  Config c;
  c.link_mbps = 1000;
  c.min_nic_est_backlog_bytes = 0;
  return c;
}

size_t DataPackets(const Host& host) { return host.OfType(PacketType::kData).size(); }

uint64_t DataBytes(const Host& host) {
  uint64_t n = 0;
  for (const Captured& c : host.OfType(PacketType::kData)) n += c.Decoded().payload.size();
  return n;
}

struct LocalPacingTest : public ::testing::Test {
  explicit LocalPacingTest(Config c = Paced()) : net(c) {
    client = net.AddHost("10.0.0.1:40000");
    local = net.AddHost("10.0.0.1:5000");   // the client's own address: same host
    remote = net.AddHost("10.0.0.2:5000");  // another host
    client->routes[local->address()] = Route{1500, true};
    local->routes[client->address()] = Route{1500, true};
    client->routes[remote->address()] = Route{1500, false};
    for (Host* server : {local, remote}) {
      server->auto_respond = [](const std::string& req) { return Buffer::CopyOf(req); };
    }
  }
  Net net;
  Host* client;
  Host* local;
  Host* remote;
};

TEST_F(LocalPacingTest, LocalPeerGetsItsUnscheduledBytesAtOnce) {
  // When: a 40000-byte request (all of it unscheduled) goes to a peer on this host.
  ASSERT_TRUE(client->engine().SendRequest(local->address(), Bytes(40000), 0).ok());
  // Then: every packet is handed over before the clock moves (29 of 1416 bytes or less).
  EXPECT_EQ(DataPackets(*client), 29u);
  EXPECT_EQ(DataBytes(*client), 40000u);
  EXPECT_EQ(client->engine().stats().unpaced_peers, 1u);
}

TEST_F(LocalPacingTest, RemotePeerIsStillPaced) {
  ASSERT_TRUE(client->engine().SendRequest(remote->address(), Bytes(40000), 0).ok());
  EXPECT_LT(DataPackets(*client), 4u);  // ~5 us of backlog: the first packet and what fits
  EXPECT_EQ(client->engine().stats().unpaced_peers, 0u);
  // The rest follows as the clock moves.
  net.Run(int64_t{1000} * 1000);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_TRUE(client->responses[0].result.ok());
}

TEST_F(LocalPacingTest, UnknownRouteIsPaced) {
  Host* other = net.AddHost("10.0.0.3:5000");  // the sink reports nothing for it
  ASSERT_TRUE(client->engine().SendRequest(other->address(), Bytes(40000), 0).ok());
  EXPECT_LT(DataPackets(*client), 4u);
}

TEST_F(LocalPacingTest, LocalDataDoesNotHoldBackARemotePeer) {
  // Given: what a remote request alone gets out before the clock moves...
  ASSERT_TRUE(client->engine().SendRequest(remote->address(), Bytes(40000), 0).ok());
  const size_t alone = DataPackets(*client);
  client->outbox.clear();
  // ... with another host, after a local transfer of the same size.
  Net other(Paced());
  Host* c2 = other.AddHost("10.0.0.1:40000");
  c2->routes[local->address()] = Route{1500, true};
  ASSERT_TRUE(c2->engine().SendRequest(local->address(), Bytes(40000), 0).ok());
  ASSERT_EQ(DataPackets(*c2), 29u);
  ASSERT_TRUE(c2->engine().SendRequest(remote->address(), Bytes(40000), 1).ok());
  // Then: the remote request's first burst is as large as when it was alone: the local
  // bytes were not counted in the NIC backlog.
  EXPECT_EQ(DataPackets(*c2) - 29u, alone);
}

TEST_F(LocalPacingTest, GrantsStillBoundALocalTransfer) {
  // When: a 200000-byte request to a local peer; only unsched_bytes (40000) need no grant.
  Buffer request = Bytes(200000);
  const std::string want = Str(request);
  ASSERT_TRUE(client->engine().SendRequest(local->address(), std::move(request), 0).ok());
  // Then: the unscheduled part (rounded up to whole packets) goes at once, nothing beyond it
  // until the receiver grants.
  ASSERT_EQ(net.config().unsched_bytes, 40000u);
  EXPECT_EQ(DataBytes(*client), uint64_t{29} * kPayload1500);
  // And with grants flowing, the whole request and its echo arrive without the clock moving.
  net.Settle();
  ASSERT_EQ(local->requests.size(), 1u);
  EXPECT_EQ(local->requests[0].bytes, want);
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok());
  EXPECT_EQ(*client->responses[0].result, want);
}

TEST_F(LocalPacingTest, DataToALocalPeerCarriesNoPriorityMark) {
  // When: the same small request to the peer on this host and to the remote one.
  ASSERT_TRUE(client->engine().SendRequest(local->address(), Bytes(100), 0).ok());
  ASSERT_TRUE(client->engine().SendRequest(remote->address(), Bytes(100), 0).ok());
  // Then: only the remote peer's DATA is marked (unscheduled, so above the lowest level).
  std::vector<uint8_t> local_prios, remote_prios;
  for (const Captured& c : client->OfType(PacketType::kData)) {
    (c.dest == local->address() ? local_prios : remote_prios).push_back(c.priority);
  }
  EXPECT_EQ(local_prios, (std::vector<uint8_t>{0}));
  ASSERT_EQ(remote_prios.size(), 1u);
  EXPECT_GT(remote_prios[0], 0);
  // And the direct-send route says so too.
  Engine::DirectRoute route;
  ASSERT_TRUE(client->engine().GetDirectRoute(local->address(), &route));
  EXPECT_TRUE(route.local);
  OutPacket direct;
  client->engine().BuildDirectPacket(local->address(), route, client->engine().ReserveClientId(),
                                     100, &direct);
  EXPECT_EQ(direct.priority, 0);
  ASSERT_TRUE(client->engine().GetDirectRoute(remote->address(), &route));
  EXPECT_FALSE(route.local);
  client->engine().BuildDirectPacket(remote->address(), route,
                                     client->engine().ReserveClientId(), 100, &direct);
  EXPECT_EQ(direct.priority, remote_prios[0]);
}

struct PaceLocalTest : public LocalPacingTest {
  static Config PaceEverything() {
    Config c = Paced();
    c.pace_local = true;
    return c;
  }
  PaceLocalTest() : LocalPacingTest(PaceEverything()) {}
};

TEST_F(PaceLocalTest, PaceLocalPacesPeersOnThisHostToo) {
  ASSERT_TRUE(client->engine().SendRequest(local->address(), Bytes(40000), 0).ok());
  EXPECT_LT(DataPackets(*client), 4u);
  EXPECT_EQ(client->engine().stats().unpaced_peers, 0u);
}

TEST_F(PaceLocalTest, PaceLocalMarksPeersOnThisHostToo) {
  ASSERT_TRUE(client->engine().SendRequest(local->address(), Bytes(100), 0).ok());
  const std::vector<Captured> data = client->OfType(PacketType::kData);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_GT(data[0].priority, 0);
  Engine::DirectRoute route;
  ASSERT_TRUE(client->engine().GetDirectRoute(local->address(), &route));
  EXPECT_FALSE(route.local);
}

struct NoPathMtuTest : public LocalPacingTest {
  static Config NoPathMtu() {
    Config c = Paced();
    c.use_path_mtu = false;
    return c;
  }
  NoPathMtuTest() : LocalPacingTest(NoPathMtu()) {}
};

TEST_F(NoPathMtuTest, RouteIsAskedOnlyWhetherThePeerIsLocal) {
  // Given: a local route with a jumbo MTU, which use_path_mtu = false ignores.
  client->routes[local->address()] = Route{9000, true};
  ASSERT_TRUE(client->engine().SendRequest(local->address(), Bytes(3000), 0).ok());
  // Then: Config::mtu packets, all at once.
  std::vector<uint32_t> lengths;
  for (const Captured& c : client->OfType(PacketType::kData)) {
    lengths.push_back(static_cast<uint32_t>(c.Decoded().payload.size()));
  }
  EXPECT_EQ(lengths, (std::vector<uint32_t>{kPayload1500, kPayload1500, 3000 - 2 * kPayload1500}));
  EXPECT_EQ(client->route_queries, 1);
  EXPECT_EQ(client->engine().stats().unpaced_peers, 1u);
}

}  // namespace
}  // namespace homarpc::transport
