// engine_direct_test: the engine's side of direct sends (transport/loop.cc, DESIGN NOTES) on a
// manual clock: the packet another thread builds (BuildDirectPacket) is the one SendRequest
// would have sent, an adopted request or response completes as a sent one would, a lost direct
// packet is recovered by the usual timers, and RetransmitDirect sends a refused one again.
#include <gtest/gtest.h>

#include <string>

#include "tests/transport/engine_harness.h"
#include "transport/engine.h"
#include "transport/wire.h"

namespace homarpc::transport {
namespace {

using testing::Captured;
using testing::Host;
using testing::Net;

constexpr char kClient[] = "10.0.0.1:1000";
constexpr char kServer[] = "10.0.0.2:2000";

// What the test thread does for a direct send: the route, an id, the header; the payload is
// appended as the backend would (header + payload bytes, one datagram).
Captured BuildDirect(Host* from, const Address& to, RpcId id, const std::string& payload) {
  Engine::DirectRoute route;
  EXPECT_TRUE(from->engine().GetDirectRoute(to, &route));
  OutPacket packet;
  from->engine().BuildDirectPacket(to, route, id, static_cast<uint32_t>(payload.size()), &packet);
  Captured c;
  c.dest = packet.dest;
  c.priority = packet.priority;
  c.bytes.assign(packet.header, packet.header + packet.header_len);
  c.bytes.insert(c.bytes.end(), payload.begin(), payload.end());
  return c;
}

struct EngineDirectTest : ::testing::Test {
  EngineDirectTest() {
    client = net.AddHost(kClient);
    server = net.AddHost(kServer);
    server->auto_respond = [](const std::string& request) { return Buffer::CopyOf(request); };
    // A first call through the engine teaches the client the route (and the cutoffs).
    client->engine().SendRequest(server->address(), Buffer::CopyOf("first"), 1).value();
    net.Settle();
  }
  void Deliver(Host* from, const Captured& c) {
    net.Find(c.dest)->engine().HandlePacket(from->address(), c.bytes);
  }

  Net net;
  Host* client = nullptr;
  Host* server = nullptr;
};

// Loop::RefreshRoute skips its lookups while route_epoch() stays put, so every change to a
// route it was given must move it: CUTOFFS from the peer, and the peer being forgotten.
TEST(EngineRouteEpochTest, MovesWhenCutoffsArriveOrIdlePeersAreForgotten) {
  Config config;
  config.peer_idle_secs = 1;
  Net net(config);
  Host* client = net.AddHost(kClient);
  Host* server = net.AddHost(kServer);
  server->auto_respond = [](const std::string& request) { return Buffer::CopyOf(request); };
  const uint64_t start = client->engine().route_epoch();

  // Expect: the first exchange brings the server's CUTOFFS, and the route changes with them.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer::CopyOf("a"), 1).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  Engine::DirectRoute route;
  ASSERT_TRUE(client->engine().GetDirectRoute(server->address(), &route));
  EXPECT_NE(route.cutoff_version, 0);
  const uint64_t after_cutoffs = client->engine().route_epoch();
  EXPECT_NE(after_cutoffs, start);

  // Expect: a second call changes no route, and the epoch stays.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer::CopyOf("b"), 2).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(client->engine().route_epoch(), after_cutoffs);

  // Expect: once the idle server is forgotten, its route is gone and the epoch has moved.
  net.Run(3 * kNanosPerSecond);
  EXPECT_FALSE(client->engine().GetDirectRoute(server->address(), &route));
  EXPECT_NE(client->engine().route_epoch(), after_cutoffs);
}

TEST_F(EngineDirectTest, DirectPacketIsWhatSendRequestWouldSend) {
  const std::string payload = "one packet of request";
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer::CopyOf(payload), 2).ok());
  ASSERT_EQ(client->outbox.size(), 1u);
  const Captured normal = client->outbox.front();
  client->outbox.clear();
  const RpcId id = client->engine().ReserveClientId();
  const Captured direct = BuildDirect(client, server->address(), id, payload);

  const wire::Packet a = normal.Decoded();
  const wire::Packet b = direct.Decoded();
  EXPECT_EQ(b.type, wire::PacketType::kData);
  EXPECT_EQ(b.sender_id, id);
  EXPECT_EQ(b.sport, a.sport);
  EXPECT_EQ(b.dport, a.dport);
  EXPECT_EQ(b.data.message_length, a.data.message_length);
  EXPECT_EQ(b.data.incoming, a.data.incoming);
  EXPECT_EQ(b.data.offset, a.data.offset);
  EXPECT_EQ(b.data.cutoff_version, a.data.cutoff_version);
  EXPECT_EQ(b.data.retransmit, a.data.retransmit);
  EXPECT_EQ(direct.priority, normal.priority);
  EXPECT_EQ(b.payload.size(), a.payload.size());
  EXPECT_EQ(direct.bytes.size(), normal.bytes.size());
}

TEST_F(EngineDirectTest, AdoptedRequestCompletesWithItsResponse) {
  const std::string payload = "adopted";
  const RpcId id = client->engine().ReserveClientId();
  const Captured packet = BuildDirect(client, server->address(), id, payload);
  ASSERT_TRUE(
      client->engine().AdoptSentRequest(server->address(), id, Buffer::CopyOf(payload), 7).ok());
  EXPECT_TRUE(client->outbox.empty()) << "adopting sends nothing: the packet is out already";
  Deliver(client, packet);
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(client->responses.back().id, id);
  EXPECT_EQ(client->responses.back().cookie, 7u);
  ASSERT_TRUE(client->responses.back().result.ok());
  EXPECT_EQ(*client->responses.back().result, payload);
  EXPECT_EQ(client->engine().stats().direct_sends, 1u);
}

TEST_F(EngineDirectTest, LostDirectPacketIsRecoveredByTheTimers) {
  const std::string payload = "lost once";
  const RpcId id = client->engine().ReserveClientId();
  ASSERT_TRUE(
      client->engine().AdoptSentRequest(server->address(), id, Buffer::CopyOf(payload), 8).ok());
  // The packet never arrives: RESEND, RPC_UNKNOWN, restart, as for any lost request.
  net.Ticks(50);
  ASSERT_EQ(client->responses.size(), 2u);
  ASSERT_TRUE(client->responses.back().result.ok()) << client->responses.back().result.status();
  EXPECT_EQ(*client->responses.back().result, payload);
}

TEST_F(EngineDirectTest, RetransmitDirectSendsARefusedPacketAgainAtOnce) {
  const std::string payload = "refused by the kernel";
  const auto data_sent = [this] {
    return client->engine().stats().packets_sent[static_cast<uint8_t>(wire::PacketType::kData)];
  };
  const uint64_t sent_before = data_sent();
  const RpcId id = client->engine().ReserveClientId();
  ASSERT_TRUE(
      client->engine().AdoptSentRequest(server->address(), id, Buffer::CopyOf(payload), 9).ok());
  client->engine().RetransmitDirect(server->address(), id, /*response=*/false);
  ASSERT_EQ(client->CountType(wire::PacketType::kData), 1u);
  EXPECT_EQ(data_sent(), sent_before + 1) << "the refused packet never left: counted once";
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(*client->responses.back().result, payload);
  // Once it has moved on, a late RetransmitDirect changes nothing.
  client->engine().RetransmitDirect(server->address(), id, /*response=*/false);
  EXPECT_TRUE(client->outbox.empty());
}

TEST_F(EngineDirectTest, AdoptedResponseReachesTheClient) {
  server->auto_respond = nullptr;
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer::CopyOf("ask"), 3).ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 2u);
  const ServerRpcHandle handle = server->requests.back().handle;
  const std::string answer = "direct answer";
  const Captured packet = BuildDirect(server, handle.client, handle.id, answer);
  ASSERT_TRUE(server->engine().AdoptSentResponse(handle, Buffer::CopyOf(answer)).ok());
  EXPECT_EQ(server->engine().AdoptSentResponse(handle, Buffer::CopyOf(answer)).code(),
            absl::StatusCode::kFailedPrecondition)
      << "answered once";
  Deliver(server, packet);
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(client->responses.back().cookie, 3u);
  EXPECT_EQ(*client->responses.back().result, answer);
}

TEST_F(EngineDirectTest, DirectRequestCarriesATakenAckAndTheServerForgetsThatRpc) {
  // The fixture's first call finished: the client owes the server its ack, and the server
  // still holds that RPC (its response could need resending).
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  wire::AckEntry ack;
  ASSERT_TRUE(client->engine().TakeAck(server->address(), &ack));
  wire::AckEntry none;
  EXPECT_FALSE(client->engine().TakeAck(server->address(), &none)) << "only one was owed";

  const std::string payload = "carries an ack";
  const RpcId id = client->engine().ReserveClientId();
  Engine::DirectRoute route;
  ASSERT_TRUE(client->engine().GetDirectRoute(server->address(), &route));
  OutPacket packet;
  client->engine().BuildDirectPacket(server->address(), route, id,
                                     static_cast<uint32_t>(payload.size()), &packet, &ack);
  Captured c;
  c.dest = packet.dest;
  c.bytes.assign(packet.header, packet.header + packet.header_len);
  c.bytes.insert(c.bytes.end(), payload.begin(), payload.end());
  EXPECT_EQ(c.Decoded().data.ack.client_id, ack.client_id);
  ASSERT_TRUE(
      client->engine().AdoptSentRequest(server->address(), id, Buffer::CopyOf(payload), 5).ok());
  Deliver(client, c);
  // The ack is acted on at the server's next Reap(), once the round's packets are out: until
  // then the server holds both RPCs (engine.cc, "Acks that ride on requests").
  EXPECT_EQ(server->engine().stats().server_rpcs, 2u);
  server->engine().Reap();
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u) << "the acked first RPC is gone";
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(*client->responses.back().result, payload);
}

TEST_F(EngineDirectTest, AnAckPutBackGoesOutAtTheTick) {
  wire::AckEntry ack;
  ASSERT_TRUE(client->engine().TakeAck(server->address(), &ack));
  client->engine().PutAck(server->address(), ack);
  net.Ticks(1);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u) << "the explicit ACK freed it";
  EXPECT_EQ(client->engine().stats().packets_sent[static_cast<uint8_t>(wire::PacketType::kAck)],
            1u);
}

TEST_F(EngineDirectTest, TooLargeForOnePacketIsRefused) {
  const std::string big(client->engine().direct_max_bytes() + 1, 'x');
  const RpcId id = client->engine().ReserveClientId();
  EXPECT_EQ(client->engine().AdoptSentRequest(server->address(), id, Buffer::CopyOf(big), 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->engine().stats().client_rpcs, 0u);
}

}  // namespace
}  // namespace homarpc::transport
