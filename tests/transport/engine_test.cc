// Protocol tests of the engine: each drives engines on a manual clock and asserts the packets
// they emit, step by step (see engine_harness.h).
#include "transport/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/transport/engine_harness.h"

namespace homarpc::transport {
namespace {

using testing::Bytes;
using testing::Captured;
using testing::Host;
using testing::Net;
using testing::Str;
using testing::Unpaced;  // most tests; Engine_PacerHoldsBackLongMessage covers the pacer
using wire::PacketType;

constexpr uint32_t kPayload = 1416;  // MTU 1500, IPv4/UDP

struct EngineTest : public ::testing::Test {
  explicit EngineTest(Config c = Unpaced()) : net(c) {
    client = net.AddHost("10.0.0.1:40000");
    server = net.AddHost("10.0.0.2:5000");
  }
  Net net;
  Host* client;
  Host* server;
  void EchoServer() {
    server->auto_respond = [](const std::string& req) { return Buffer::CopyOf(req); };
  }
};

TEST_F(EngineTest, Engine_SmallRpcRoundTrip) {
  EchoServer();
  Buffer req = Bytes(100);
  std::string expect = Str(req);
  auto id = client->engine().SendRequest(server->address(), std::move(req), 77);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id % 2, 0u) << "client ids are even";
  // Expect: one DATA, 100 bytes, unscheduled, at priority 6 (no cutoffs known yet).
  ASSERT_EQ(client->outbox.size(), 1u);
  wire::Packet p = client->outbox[0].Decoded();
  EXPECT_EQ(p.type, PacketType::kData);
  EXPECT_EQ(p.sender_id, *id);
  EXPECT_EQ(p.data.message_length, 100u);
  EXPECT_EQ(p.data.offset, 0u);
  EXPECT_EQ(client->outbox[0].priority, 6);
  net.Flush(client);
  // Expect: server delivered the request once, answered with DATA (id | 1) and CUTOFFS.
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(server->requests[0].bytes, expect);
  EXPECT_EQ(server->requests[0].handle.id, *id | 1);
  EXPECT_EQ(server->CountType(PacketType::kCutoffs), 1u);
  auto data = server->OfType(PacketType::kData);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].Decoded().sender_id, *id | 1);
  net.Flush(server);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].id, *id);
  EXPECT_EQ(client->responses[0].cookie, 77u);
  ASSERT_TRUE(client->responses[0].result.ok());
  EXPECT_EQ(*client->responses[0].result, expect);
  EXPECT_EQ(client->engine().stats().client_rpcs, 0u);
  // The server keeps its RPC until the client's ACK, which the next tick flushes.
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  net.Ticks(1);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  EXPECT_EQ(server->engine().stats().packets_received[0x18], 1u) << "one ACK";
}

TEST_F(EngineTest, Engine_ZeroLengthMessages) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer(), 0).ok());
  // Expect: a single empty DATA packet.
  ASSERT_EQ(client->outbox.size(), 1u);
  EXPECT_EQ(client->outbox[0].bytes.size(), wire::kDataHeaderSize);
  net.Settle();
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(server->requests[0].bytes, "");
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok());
  EXPECT_EQ(*client->responses[0].result, "");
}

TEST_F(EngineTest, Engine_LostEmptyResponseIsResentAndCounted) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer(), 0).ok());
  net.Flush(client);  // the empty request arrives and is answered at once
  ASSERT_EQ(server->requests.size(), 1u);
  // Lose the server's empty DATA packet: the client must ask for it again.
  net.Flush(server, [](const Captured& c) { return c.type() != PacketType::kData; });
  EXPECT_TRUE(client->responses.empty());
  net.Ticks(2 * net.config().resend_ticks);
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok()) << client->responses[0].result.status();
  EXPECT_EQ(*client->responses[0].result, "");
  const EngineStats stats = server->engine().stats();
  EXPECT_EQ(stats.packets_sent[static_cast<uint8_t>(PacketType::kData)], 2u);
  // Like any other retransmitted DATA packet (a netns test subtracts these from the count).
  EXPECT_EQ(stats.retransmitted_packets, 1u);
}

TEST_F(EngineTest, Engine_CutoffsSetUnscheduledPriority) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(10), 0).ok());
  net.Settle();  // the server's CUTOFFS reach the client
  client->outbox.clear();
  struct Case {
    size_t size;
    uint8_t prio;
  } cases[] = {{100, 7}, {2000, 6}, {10000, 5}, {100000, 4}};
  for (const Case& c : cases) {
    ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(c.size), 0).ok());
    ASSERT_FALSE(client->outbox.empty());
    EXPECT_EQ(client->outbox.front().priority, c.prio) << "size " << c.size;
    EXPECT_EQ(client->outbox.front().Decoded().data.cutoff_version, 1);
    client->outbox.clear();
  }
}

TEST_F(EngineTest, Engine_LargeMessageUnscheduledThenGranted) {
  EchoServer();
  const size_t size = 1 << 20;
  Buffer req = Bytes(size);
  std::string expect = Str(req);
  ASSERT_TRUE(client->engine().SendRequest(server->address(), std::move(req), 0).ok());
  // Expect: only the unscheduled prefix goes out: ceil(40000 / 1416) = 29 packets.
  EXPECT_EQ(client->CountType(PacketType::kData), 29u);
  uint32_t incoming = client->outbox[0].Decoded().data.incoming;
  EXPECT_EQ(incoming, 40000u);
  net.Flush(client);
  // Expect: the server grants, at most max_incoming outstanding, at a scheduled priority (<= 3).
  auto grants = server->OfType(PacketType::kGrant);
  ASSERT_FALSE(grants.empty());
  for (const Captured& g : grants) {
    EXPECT_EQ(g.priority, 7) << "control packets go at the top priority";
    EXPECT_LE(g.Decoded().grant.priority, 3);
    EXPECT_LE(g.Decoded().grant.offset, 29 * kPayload + 400000);
  }
  net.Settle();
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(server->requests[0].bytes, expect);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(*client->responses[0].result, expect);
  EXPECT_EQ(server->engine().stats().rx_bytes_held, 0u);
  EXPECT_EQ(client->engine().stats().rx_bytes_held, 0u);
}

TEST_F(EngineTest, Engine_MidTransferTracksMessagesInFlight) {
  EchoServer();
  EXPECT_FALSE(client->engine().MidTransfer());
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(200000), 0).ok());
  // Expect: the client is sending (only the unscheduled prefix went out).
  EXPECT_TRUE(client->engine().MidTransfer());
  net.Flush(client);
  // Expect: the server expects the granted bytes.
  EXPECT_TRUE(server->engine().MidTransfer());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_FALSE(client->engine().MidTransfer());
  EXPECT_FALSE(server->engine().MidTransfer());
  // A small request is fully sent at once: nothing in flight from the client's side.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  EXPECT_FALSE(client->engine().MidTransfer());
}

TEST_F(EngineTest, Engine_MidTransferCoversTheWaitForALongRequestsResponse) {
  const int64_t busy_nanos = int64_t{net.config().busy_poll_usecs} * 1000;
  // A request longer than unsched_bytes, all of it delivered; the server has not answered.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(200000), 1).ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 1u);
  // Expect: the client still counts as mid-transfer (the response is due once the server has
  // read the request) ...
  EXPECT_TRUE(client->engine().MidTransfer());
  // ... until busy_poll_usecs have passed.
  net.clock.Advance(busy_nanos - 1);
  client->engine().OnTimer();
  EXPECT_TRUE(client->engine().MidTransfer());
  net.clock.Advance(1);
  client->engine().OnTimer();
  EXPECT_FALSE(client->engine().MidTransfer());
  ASSERT_TRUE(server->engine().SendResponse(server->requests[0].handle, Bytes(100)).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);

  // Another one: the first byte of its response ends the wait at once.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(200000), 2).ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 2u);
  EXPECT_TRUE(client->engine().MidTransfer());
  ASSERT_TRUE(server->engine().SendResponse(server->requests[1].handle, Bytes(100)).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_FALSE(client->engine().MidTransfer());

  // A request that needed no grants (within unsched_bytes) does not count.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(30000), 3).ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 3u);
  EXPECT_FALSE(client->engine().MidTransfer());

  // Nor does one whose RPC ended (aborted) before any response.
  absl::StatusOr<RpcId> id = client->engine().SendRequest(server->address(), Bytes(200000), 4);
  ASSERT_TRUE(id.ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 4u);
  EXPECT_TRUE(client->engine().MidTransfer());
  client->engine().AbortClientRpc(*id, absl::CancelledError("abandoned"));
  EXPECT_FALSE(client->engine().MidTransfer());
}

TEST_F(EngineTest, Engine_SrptGrantsShortestRemainingFirst) {
  Host* client2 = net.AddHost("10.0.0.3:40000");
  // Two senders start long messages to the server: 2 MB from client, 500 KB from client2.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(2 << 20), 0).ok());
  ASSERT_TRUE(client2->engine().SendRequest(server->address(), Bytes(500000), 0).ok());
  net.Flush(client);
  net.Flush(client2);
  // Expect: both are granted (overcommit), and the shorter one at the higher priority.
  uint8_t prio_long = 255, prio_short = 255;
  for (const Captured& g : server->OfType(PacketType::kGrant)) {
    if (g.dest == client->address()) prio_long = g.Decoded().grant.priority;
    if (g.dest == client2->address()) prio_short = g.Decoded().grant.priority;
  }
  ASSERT_NE(prio_long, 255);
  ASSERT_NE(prio_short, 255);
  EXPECT_GT(prio_short, prio_long);
  // And the shorter finishes first when both run to completion.
  net.Settle();
  ASSERT_EQ(server->requests.size(), 2u);
  EXPECT_EQ(server->requests[0].bytes.size(), 500000u);
  EXPECT_EQ(server->requests[1].bytes.size(), size_t{2} << 20);
}

TEST_F(EngineTest, Engine_OvercommitAndMaxIncomingBound) {
  // Ten senders each start a 1 MB message.
  std::vector<Host*> senders;
  for (int i = 0; i < 10; ++i) {
    senders.push_back(net.AddHost("10.0.1." + std::to_string(i + 1) + ":40000"));
    ASSERT_TRUE(senders.back()->engine().SendRequest(server->address(), Bytes(1 << 20), 0).ok());
  }
  for (Host* s : senders) net.Flush(s);
  // Expect: at most max_overcommit (8) distinct senders got grants.
  std::set<std::string> granted;
  for (const Captured& g : server->OfType(PacketType::kGrant)) granted.insert(g.dest.ToString());
  EXPECT_LE(granted.size(), 8u);
  EXPECT_GE(granted.size(), 1u);
  // Expect: granted-but-unreceived bytes beyond the unscheduled prefixes stay within
  // max_incoming (the prefixes themselves are uncontrolled by design).
  uint64_t outstanding = 0;
  std::map<std::string, uint32_t> max_grant;
  for (const Captured& g : server->OfType(PacketType::kGrant)) {
    auto& m = max_grant[g.dest.ToString()];
    m = std::max(m, g.Decoded().grant.offset);
  }
  for (auto& [dest, offset] : max_grant) outstanding += offset - 29 * kPayload;
  EXPECT_LE(outstanding, 400000u);
  net.Settle();
  EXPECT_EQ(server->requests.size(), 10u);
}

struct OneActiveTest : EngineTest {
  static Config OneActive() {
    Config c = Unpaced();
    c.max_overcommit = 1;  // only the best message is granted: the others starve but for FIFO
    return c;
  }
  OneActiveTest() : EngineTest(OneActive()) {}
};

TEST_F(OneActiveTest, Engine_FifoGrantReachesOldestStarvedMessage) {
  Host* newer = net.AddHost("10.0.0.3:40000");
  // The older message is long; a shorter one arrives 10 us later and wins the only slot.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(2 << 20), 0).ok());
  net.Flush(client);
  net.clock.Advance(10 * 1000);
  ASSERT_TRUE(newer->engine().SendRequest(server->address(), Bytes(500000), 0).ok());
  net.Flush(newer);
  uint32_t fifo_before = 0;
  for (const Captured& g : server->OfType(PacketType::kGrant)) {
    if (g.dest == client->address()) fifo_before = std::max(fifo_before, g.Decoded().grant.offset);
  }
  server->outbox.clear();
  // Expect: within one FIFO interval (320 us at 5% of 25 Gbit/s) the timer grants the older,
  // starved message fifo_grant_increment more bytes at priority 6.
  net.clock.Advance(400 * 1000);
  server->engine().OnTimer();
  auto grants = server->OfType(PacketType::kGrant);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].dest, client->address());
  wire::Packet g = grants[0].Decoded();
  EXPECT_EQ(g.grant.priority, 6);
  EXPECT_EQ(g.grant.offset, std::max<uint32_t>(fifo_before, 29 * kPayload) + 50000);
  // And not again before the next interval.
  server->outbox.clear();
  net.clock.Advance(100 * 1000);
  server->engine().OnTimer();
  EXPECT_TRUE(server->OfType(PacketType::kGrant).empty());
}

TEST_F(OneActiveTest, Engine_ResponsesWaitingForGrantsAreKeptAlive) {
  // Four servers answer one client with 4 MB each; the client grants one at a time (and FIFO
  // grants are off), so the last ones wait far longer than timeout_ticks for their first grant.
  Config c = OneActive();
  c.grant_fifo_fraction = 0;
  Net slow(c);
  Host* cl = slow.AddHost("10.0.0.1:40000");
  std::vector<Host*> servers;
  for (int i = 0; i < 4; ++i) {
    servers.push_back(slow.AddHost("10.0.2." + std::to_string(i + 1) + ":5000"));
    servers.back()->auto_respond = [](const std::string&) { return Bytes(4 << 20); };
    ASSERT_TRUE(cl->engine().SendRequest(servers.back()->address(), Bytes(10), i).ok());
  }
  for (int step = 0; step < 5000 && cl->responses.size() < 4; ++step) {
    slow.clock.Advance(1000 * 1000);
    for (Host* h : servers) h->engine().OnTimer();
    cl->engine().OnTimer();
    // The client's link takes 40 packets per millisecond, served round-robin across senders.
    for (int budget = 40; budget > 0;) {
      bool any = false;
      for (Host* h : servers) {
        if (h->outbox.empty() || budget == 0) continue;
        Captured p = std::move(h->outbox.front());
        h->outbox.pop_front();
        cl->engine().HandlePacket(h->address(), p.bytes);
        --budget;
        any = true;
      }
      if (!any) break;
    }
    slow.Flush(cl);
    cl->engine().Reap();
  }
  ASSERT_EQ(cl->responses.size(), 4u);
  for (auto& r : cl->responses) EXPECT_TRUE(r.result.ok()) << r.result.status();
  for (Host* h : servers) EXPECT_EQ(h->engine().stats().server_rpcs_abandoned, 0u);
}

TEST_F(EngineTest, Engine_LostDataPacketIsResent) {
  EchoServer();
  Buffer req = Bytes(10 * kPayload);
  std::string expect = Str(req);
  ASSERT_TRUE(client->engine().SendRequest(server->address(), std::move(req), 0).ok());
  // Drop the 4th DATA packet (offset 3 * 1416).
  net.Flush(client, [](const Captured& c) { return c.Decoded().data.offset != 3 * kPayload; });
  EXPECT_TRUE(server->requests.empty());
  // Expect: after resend_ticks (5) of silence the server asks for exactly the gap.
  net.Ticks(4);
  EXPECT_EQ(server->engine().stats().resends_sent, 0u);
  net.Run(1000 * 1000, [this](const Host* h, const Captured& c) {
    if (h == server && c.type() == PacketType::kResend) {
      wire::Packet p = c.Decoded();
      EXPECT_EQ(p.resend.offset, 3 * kPayload);
      EXPECT_EQ(p.resend.length, kPayload);
    }
    return true;
  });
  EXPECT_EQ(server->engine().stats().resends_sent, 1u);
  EXPECT_EQ(client->engine().stats().retransmitted_packets, 1u);
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(server->requests[0].bytes, expect);
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(*client->responses[0].result, expect);
}

TEST_F(EngineTest, Engine_AllRequestPacketsLostRestarts) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(3000), 0).ok());
  net.Flush(client, [](const Captured&) { return false; });  // the whole request vanishes
  // Expect: the client's RESEND(0, all) -> server RPC_UNKNOWN -> client restarts -> done.
  net.Ticks(6);
  EXPECT_EQ(client->engine().stats().resends_sent, 1u);
  EXPECT_EQ(server->engine().stats().packets_sent[0x13], 1u) << "RPC_UNKNOWN";
  EXPECT_EQ(client->engine().stats().restarts, 1u);
  // 3000 bytes are three packets, sent twice; the second time they are retransmissions.
  EXPECT_EQ(client->engine().stats().packets_sent[static_cast<uint8_t>(PacketType::kData)], 6u);
  EXPECT_EQ(client->engine().stats().retransmitted_packets, 3u);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_TRUE(client->responses[0].result.ok());
  EXPECT_EQ(server->requests.size(), 1u);
}

// Delivers to the client an RPC_UNKNOWN for its RPC `id` that answers RESEND round `round`.
void SendUnknown(Host* client, const Address& server, RpcId id, uint32_t round) {
  wire::Packet unknown;
  unknown.type = PacketType::kRpcUnknown;
  unknown.sender_id = id | 1;
  unknown.unknown.resend_round = round;
  uint8_t buf[wire::kMaxHeaderSize];
  client->engine().HandlePacket(server, absl::MakeConstSpan(buf, wire::EncodeHeader(unknown, buf)));
}

// Advances the clock a tick at a time, running only `host`'s timer, until it has sent a
// RESEND (at most `max_ticks`); returns that RESEND's round, 0 if none was sent.
uint32_t TickUntilResend(Net& net, Host* host, int max_ticks) {
  for (int t = 0; t < max_ticks; ++t) {
    net.clock.Advance(int64_t{net.config().tick_usecs} * 1000);
    host->engine().OnTimer();
    std::vector<Captured> resends = host->OfType(PacketType::kResend);
    if (!resends.empty()) return resends.back().Decoded().resend.round;
  }
  return 0;
}

// The server answers a request with a 100000-byte response, of which only the first packet
// reaches the client; returns the RPC's id (0 if it could not be sent).
RpcId FirstPacketOfLongResponse(Net& net, Host* client, Host* server) {
  server->auto_respond = [](const std::string&) { return Bytes(100000); };
  auto id = client->engine().SendRequest(server->address(), Bytes(10), 0);
  if (!id.ok()) return 0;
  net.Flush(client);
  std::vector<Captured> data = server->OfType(PacketType::kData);
  if (data.empty()) return 0;
  server->outbox.clear();
  client->engine().HandlePacket(server->address(), data.front().bytes);
  return *id;
}

TEST_F(EngineTest, Engine_RpcUnknownAfterPartialResponseFails) {
  const RpcId id = FirstPacketOfLongResponse(net, client, server);
  ASSERT_NE(id, 0u);
  // The client asks for the rest; the server answers that it does not know the RPC (it lost
  // its state after sending that packet). Restarting would run the request twice, so the
  // client must fail instead.
  client->outbox.clear();
  const uint32_t round = TickUntilResend(net, client, 10);
  ASSERT_GT(round, 0u) << "no RESEND for the missing response bytes";
  SendUnknown(client, server->address(), id, round);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->engine().stats().restarts, 0u);
}

TEST_F(EngineTest, Engine_RpcUnknownWithoutARoundIsTakenAsFresh) {
  // A peer that does not echo the RESEND round (0) gets the original behaviour: after part of
  // the response, RPC_UNKNOWN fails the call.
  const RpcId id = FirstPacketOfLongResponse(net, client, server);
  ASSERT_NE(id, 0u);
  SendUnknown(client, server->address(), id, 0);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->engine().stats().stale_rpc_unknowns, 0u);
}

// The server will answer with a 100000-byte response. The client's 3000-byte request is lost
// and its RESEND(0, all) reaches the server, which answers RPC_UNKNOWN. Returns that answer,
// not yet delivered (empty bytes if a step failed), and the RESEND's round in `*round`.
Captured RpcUnknownForALostRequest(Net& net, Host* client, Host* server, uint32_t* round) {
  server->auto_respond = [](const std::string&) { return Bytes(100000); };
  if (!client->engine().SendRequest(server->address(), Bytes(3000), 0).ok()) return {};
  net.Flush(client, [](const Captured&) { return false; });
  *round = TickUntilResend(net, client, 10);
  net.Flush(client);  // the RESEND reaches the server, which knows nothing of the RPC
  std::vector<Captured> unknowns = server->OfType(PacketType::kRpcUnknown);
  server->outbox.clear();
  return unknowns.size() == 1 ? unknowns[0] : Captured{};
}

TEST_F(EngineTest, Engine_StaleRpcUnknownNeitherRestartsAgainNorFailsTheCall) {
  // The RPC_UNKNOWN for the lost request is duplicated and delayed by the network: one copy
  // arrives at once, the other twice later, right after the restart and after the first packet
  // of the response.
  uint32_t round = 0;
  const Captured unknown = RpcUnknownForALostRequest(net, client, server, &round);
  ASSERT_FALSE(unknown.bytes.empty());
  ASSERT_GT(round, 0u);
  EXPECT_EQ(unknown.Decoded().unknown.resend_round, round) << "echoes the RESEND's round";

  client->engine().HandlePacket(server->address(), unknown.bytes);
  EXPECT_EQ(client->engine().stats().restarts, 1u);
  // The late copy, before the restarted request has reached the server: no second restart.
  client->engine().HandlePacket(server->address(), unknown.bytes);
  EXPECT_EQ(client->engine().stats().restarts, 1u);
  EXPECT_EQ(client->engine().stats().stale_rpc_unknowns, 1u);

  // The restarted request runs; the first response packet arrives, then the copy once more.
  net.Flush(client);
  ASSERT_EQ(server->requests.size(), 1u);
  Captured first = server->OfType(PacketType::kData).front();
  client->engine().HandlePacket(server->address(), first.bytes);
  client->engine().HandlePacket(server->address(), unknown.bytes);
  EXPECT_TRUE(client->responses.empty()) << "the call must not fail on a stale RPC_UNKNOWN";
  EXPECT_EQ(client->engine().stats().stale_rpc_unknowns, 2u);

  // Expect: the response completes, and the request ran once.
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok()) << client->responses[0].result.status();
  EXPECT_EQ(client->responses[0].result->size(), 100000u);
  EXPECT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(client->engine().stats().restarts, 1u);
}

TEST_F(EngineTest, Engine_StaleRpcUnknownToAProbeAfterTheRestartIsIgnoredOnceTheResponseBegins) {
  // The request is lost and restarted; the restarted request is slow to arrive, so the next
  // probe (sent after the restart) also draws an RPC_UNKNOWN, which the network delays until
  // after the first packet of the response.
  uint32_t first_round = 0;
  const Captured first_unknown = RpcUnknownForALostRequest(net, client, server, &first_round);
  ASSERT_FALSE(first_unknown.bytes.empty());
  client->engine().HandlePacket(server->address(), first_unknown.bytes);
  ASSERT_EQ(client->engine().stats().restarts, 1u);
  std::deque<Captured> restarted = std::move(client->outbox);  // held back in the network
  client->outbox.clear();
  const uint32_t round = TickUntilResend(net, client, 20);
  ASSERT_GT(round, 1u);
  net.Flush(client);  // the probe reaches the server, which still has nothing
  std::vector<Captured> late_unknown = server->OfType(PacketType::kRpcUnknown);
  ASSERT_EQ(late_unknown.size(), 1u);
  server->outbox.clear();

  // The restarted request arrives and runs; the response's first packet reaches the client.
  client->outbox = std::move(restarted);
  net.Flush(client);
  ASSERT_EQ(server->requests.size(), 1u);
  client->engine().HandlePacket(server->address(),
                                server->OfType(PacketType::kData).front().bytes);
  // Then the delayed RPC_UNKNOWN: it answers a probe from before the response began.
  client->engine().HandlePacket(server->address(), late_unknown[0].bytes);
  EXPECT_TRUE(client->responses.empty()) << "the call must not fail on a stale RPC_UNKNOWN";
  EXPECT_EQ(client->engine().stats().stale_rpc_unknowns, 1u);
  // Expect: the server has the request now, so the client asks for the rest of the response on
  // the normal schedule (5 ticks), not the backed-off one.
  client->outbox.clear();
  EXPECT_GT(TickUntilResend(net, client, 5), 0u);
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok()) << client->responses[0].result.status();
  EXPECT_EQ(server->requests.size(), 1u);
}

// Runs the net for `ticks`, delivering what `keep` allows, and returns when (in ticks from
// now) the client sent each RESEND.
std::vector<int64_t> ProbeTicks(Net& net, const Host* client, int ticks,
                                const std::function<bool(const Host*, const Captured&)>& keep) {
  std::vector<int64_t> probes;
  const int64_t start = net.clock.NowNanos();
  const int64_t tick = int64_t{net.config().tick_usecs} * 1000;
  net.Run(int64_t{ticks} * tick, [&](const Host* from, const Captured& c) {
    if (from == client && c.type() == PacketType::kResend) {
      probes.push_back((net.clock.NowNanos() - start) / tick);
    }
    return keep(from, c);
  });
  return probes;
}

// ProbeTicks with every DATA packet from the client lost: no request ever arrives.
std::vector<int64_t> ProbeTicksRequestsLost(Net& net, const Host* client, int ticks) {
  return ProbeTicks(net, client, ticks, [client](const Host* from, const Captured& c) {
    return !(from == client && c.type() == PacketType::kData);
  });
}

TEST_F(EngineTest, Engine_RestartsBackOffAndAreBounded) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  // No DATA from the client ever arrives; RESENDs and RPC_UNKNOWNs do.
  // Expect: the first probe after resend_ticks (5), then one restart per probe, each waiting
  // twice as long as the last (10, 20, 40 ticks; 8x at most); no failure before the restarts
  // have gone on for timeout_ticks (100).
  EXPECT_THAT(ProbeTicksRequestsLost(net, client, 100), ::testing::ElementsAre(5, 15, 35, 75));
  EXPECT_TRUE(client->responses.empty());
  ProbeTicksRequestsLost(net, client, 400);
  // Then UNAVAILABLE at the next RPC_UNKNOWN (115 ticks), after 4 restarts (20 before back-off).
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(client->responses[0].result.status().message()),
              ::testing::HasSubstr("after 4 restarts"));
  EXPECT_EQ(client->engine().stats().restarts, 4u);
  EXPECT_TRUE(server->requests.empty());
}

TEST_F(EngineTest, Engine_BusyEndsTheRestartBackOff) {
  // The first request is lost; its restart arrives, and the handler takes its time.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  auto lose_first_request = [this](const Host* from, const Captured& c) {
    return !(from == client && c.type() == PacketType::kData &&
             client->engine().stats().restarts == 0);
  };
  // Expect: the probe after the restart waits 10 ticks (2x); its BUSY shows the server has the
  // request, and the probes after it come every 5 ticks again.
  EXPECT_THAT(ProbeTicks(net, client, 32, lose_first_request),
              ::testing::ElementsAre(5, 15, 20, 25, 30));
  EXPECT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(client->responses.empty());
}

// Restarts with a short timeout: the back-off must stay under half of timeout_ticks.
Config WithTimeoutTicks(uint32_t ticks) {
  Config c = Unpaced();
  c.timeout_ticks = ticks;
  return c;
}
struct ShortTimeoutTest : EngineTest {
  ShortTimeoutTest() : EngineTest(WithTimeoutTicks(30)) {}
};
struct LongTimeoutTest : EngineTest {
  LongTimeoutTest() : EngineTest(WithTimeoutTicks(200)) {}
};

TEST_F(ShortTimeoutTest, Engine_RestartBackOffStaysUnderHalfTheTimeout) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  // Expect: 5 ticks, then 10 (2x), then 10 again: 4x would be 20 > 30 / 2. The RPC fails at
  // the RPC_UNKNOWN that finds 4 restarts spread over 30 ticks, not by silence.
  EXPECT_THAT(ProbeTicksRequestsLost(net, client, 200),
              ::testing::ElementsAre(5, 15, 25, 35, 45));
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_THAT(std::string(client->responses[0].result.status().message()),
              ::testing::HasSubstr("does not know the RPC after 4 restarts"));
  EXPECT_EQ(client->engine().stats().client_timeouts, 0u);
}

TEST_F(LongTimeoutTest, Engine_RestartsAreBoundedByTimeNotCount) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  // Expect: probes 40 ticks apart once at 8x, and the failure only when the restarts have gone
  // on for timeout_ticks (200): at the RPC_UNKNOWN of tick 235, after 7 restarts.
  EXPECT_THAT(ProbeTicksRequestsLost(net, client, 300),
              ::testing::ElementsAre(5, 15, 35, 75, 115, 155, 195, 235));
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_THAT(std::string(client->responses[0].result.status().message()),
              ::testing::HasSubstr("does not know the RPC after 7 restarts"));
}

TEST_F(EngineTest, Engine_LateRetransmissionCannotTriggerAStorm) {
  // A server that dropped its state (say, a timeout under load) receives a late retransmitted
  // packet from the middle of a 16 MiB request whose sender had been granted 6 MB.
  wire::Packet p;
  p.type = PacketType::kData;
  p.sender_id = 2;
  p.data.message_length = 16 << 20;
  p.data.incoming = 6 << 20;
  p.data.retransmit = true;
  p.data.offset = 5 << 20;
  std::vector<uint8_t> bytes(wire::kDataHeaderSize + kPayload, 7);
  wire::EncodeHeader(p, bytes.data());
  server->engine().HandlePacket(client->address(), bytes);
  ASSERT_EQ(server->engine().stats().server_rpcs, 1u);
  // Expect: it does not believe the 6 MB grant, and its RESEND rounds ask for at most
  // max_incoming bytes each, not for everything below the offset.
  net.clock.Advance(int64_t{6} * 1000 * 1000);
  server->engine().OnTimer();
  server->engine().OnTimer();
  for (int tick = 0; tick < 6; ++tick) {
    net.clock.Advance(1000 * 1000);
    server->engine().OnTimer();
  }
  uint64_t asked = 0;
  for (const Captured& c : server->OfType(PacketType::kResend)) asked += c.Decoded().resend.length;
  EXPECT_GT(asked, 0u);
  EXPECT_LE(asked, 400000u);
  EXPECT_EQ(server->CountType(PacketType::kGrant), 0u)
      << "the grant scheduler must not be confused into granting";
}

TEST_F(EngineTest, Engine_BusyServerKeepsClientAlive) {
  // The server takes the request but answers only much later than timeout_ticks.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  net.Settle();
  ASSERT_EQ(server->requests.size(), 1u);
  net.Ticks(300);
  // Expect: client RESENDs were answered with BUSY; the RPC is still alive.
  EXPECT_GT(server->engine().stats().packets_sent[0x14], 0u);
  EXPECT_TRUE(client->responses.empty());
  ASSERT_TRUE(server->engine().SendResponse(server->requests[0].handle, Bytes(5)).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_TRUE(client->responses[0].result.ok());
}

TEST_F(EngineTest, Engine_SilentServerTimesOut) {
  // Nothing ever comes back from the server address.
  ASSERT_TRUE(client->engine().SendRequest(Address::Parse("10.9.9.9:1").value(), Bytes(100), 5).ok());
  net.Ticks(99);
  EXPECT_TRUE(client->responses.empty());
  net.Ticks(2);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].cookie, 5u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->engine().stats().client_rpcs, 0u);
}

TEST_F(EngineTest, Engine_NeedAckWhenAckLost) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  // Drop the client's explicit ACK.
  net.Run(1100 * 1000, [](const Host*, const Captured& c) { return c.type() != PacketType::kAck; });
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  // Expect: NEED_ACK after request_ack_ticks (3); the client answers with an ACK.
  net.Ticks(3);
  EXPECT_GE(server->engine().stats().packets_sent[0x17], 1u);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
}

TEST_F(EngineTest, Engine_NeedAckBacksOffWhileTheClientIsSilent) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  const auto need_acks = [this] {
    return server->engine().stats().packets_sent[static_cast<int>(PacketType::kNeedAck)];
  };
  // The client is not driven (a lent socket between calls): nothing reaches the server.
  const auto silent = [this](const Host* from, const Captured&) { return from != client; };
  // Expect: asked at 3 ticks, then at 6, 12, 24, 48: doubling, not every tick.
  const int64_t tick_nanos = int64_t{net.config().tick_usecs} * 1000;
  const uint32_t first = net.config().request_ack_ticks;
  std::vector<uint32_t> asked_at;
  for (uint32_t tick = 1; tick <= 20 * first; ++tick) {
    const uint64_t before = need_acks();
    net.Run(tick_nanos, silent);
    if (need_acks() > before) asked_at.push_back(tick);
  }
  ASSERT_EQ(asked_at.size(), 5u);  // at first x 1, 2, 4, 8, 16 (within 20 x first ticks)
  for (size_t i = 1; i < asked_at.size(); ++i) {
    EXPECT_EQ(asked_at[i] - asked_at[0], first * ((1u << i) - 1)) << "ask " << i;
  }
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  // When the client answers again, the next ask (at 32 x first) frees the RPC.
  net.Ticks(static_cast<int>(first * 16));
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
}

TEST_F(EngineTest, Engine_FlushAcksSendsOwedAcksAtOnce) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  net.Settle();  // packets only: no tick has run
  ASSERT_EQ(client->responses.size(), 1u);
  // The ack waits for the next request or tick; the server keeps the RPC meanwhile.
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  EXPECT_EQ(client->engine().stats().packets_sent[static_cast<int>(PacketType::kAck)], 0u);
  // Expect: ACK now (a closing endpoint does this), and the server frees the RPC.
  client->engine().FlushAcks();
  net.Settle();
  EXPECT_EQ(client->engine().stats().packets_sent[static_cast<int>(PacketType::kAck)], 1u);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  // Nothing is owed any more: a second flush sends nothing.
  client->engine().FlushAcks();
  EXPECT_EQ(client->engine().stats().packets_sent[static_cast<int>(PacketType::kAck)], 1u);
}

TEST_F(EngineTest, Engine_UnackedServerRpcIsFreedEventually) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 0).ok());
  net.Settle();
  // The client vanishes: nothing reaches the server any more.
  net.Run(int64_t{net.config().need_ack_give_up_ticks + 5} * 1000 * 1000,
          [this](const Host* from, const Captured&) { return from != client; });
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  EXPECT_EQ(server->engine().stats().server_rpcs_abandoned, 1u);
}

TEST_F(EngineTest, Engine_DuplicateRequestRunsOnce) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(3 * kPayload), 0).ok());
  std::deque<Captured> copy = client->outbox;
  net.Settle();
  ASSERT_EQ(server->requests.size(), 1u);
  // Replay every request packet: once while the server waits for the ACK...
  for (const Captured& c : copy) server->engine().HandlePacket(client->address(), c.bytes);
  net.Ticks(1);  // ACK flows, server forgets the RPC
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  // ...and once after the ACK.
  for (const Captured& c : copy) server->engine().HandlePacket(client->address(), c.bytes);
  net.Settle();
  EXPECT_EQ(server->requests.size(), 1u);
  EXPECT_EQ(server->engine().stats().duplicate_requests_suppressed, 6u);
}

// Tombstones expire as later RPCs end, not only at the tick (which used to erase a whole
// millisecond's worth at once, delaying the RPC in flight then).
TEST_F(EngineTest, Engine_EndingRpcExpiresOldTombstonesWithoutATick) {
  EchoServer();
  const int64_t lifetime =
      2 * int64_t{net.config().timeout_ticks} * net.config().tick_usecs * 1000;
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 1).ok());
  net.Settle();
  net.Ticks(1);  // the ACK flows: the server ends the RPC and keeps its tombstone
  ASSERT_EQ(server->engine().stats().server_rpcs, 0u);
  ASSERT_EQ(server->engine().stats().tombstones, 1u);

  // Past the first tombstone's time, with no tick: packets only.
  net.clock.Set(net.clock.NowNanos() + lifetime + 1);
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 2).ok());
  const std::deque<Captured> second = client->outbox;
  net.Settle();
  // The third request carries the ACK of the second: the second ends, forgets the first's
  // tombstone and leaves its own.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 3).ok());
  net.Settle();
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  EXPECT_EQ(server->engine().stats().tombstones, 1u);
  ASSERT_EQ(client->responses.size(), 3u);

  // A replay of the second request still runs nothing; the tick forgets the rest in time.
  for (const Captured& c : second) server->engine().HandlePacket(client->address(), c.bytes);
  net.Settle();
  EXPECT_EQ(server->requests.size(), 3u);
  EXPECT_EQ(server->engine().stats().duplicate_requests_suppressed, 1u);
  net.Ticks(1);
  net.Run(lifetime + 1000 * 1000);
  EXPECT_EQ(server->engine().stats().tombstones, 0u);
}

struct SmallLimitsTest : EngineTest {
  static Config Limits() {
    Config c = Unpaced();
    c.max_message_length = 100000;
    c.max_rpcs_per_peer = 2;
    return c;
  }
  SmallLimitsTest() : EngineTest(Limits()) {}
};

TEST_F(SmallLimitsTest, Engine_OversizedRequestRejectedLocally) {
  auto id = client->engine().SendRequest(server->address(), Bytes(100001), 0);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(client->outbox.empty());
}

TEST_F(SmallLimitsTest, Engine_TooManyRpcsRefusedVisibly) {
  // Three requests; the server holds two (never answers) and refuses the third.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), i).ok());
  }
  net.Settle();
  EXPECT_EQ(server->requests.size(), 2u);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].cookie, 2u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kResourceExhausted);
  // Existing work is unharmed.
  for (auto& r : server->requests) ASSERT_TRUE(server->engine().SendResponse(r.handle, Bytes(1)).ok());
  net.Settle();
  EXPECT_EQ(client->responses.size(), 3u);
}

TEST_F(SmallLimitsTest, Engine_AckRidingOnARequestFreesTheSlotThatRequestNeeds) {
  // Two answered RPCs fill the peer's two slots until the client acks them. The third request
  // carries one of those acks, which the server acts on before deciding (the ack would
  // otherwise wait for its next Reap(): engine.cc, "Acks that ride on requests").
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), i).ok());
  }
  net.Settle();
  ASSERT_EQ(server->requests.size(), 2u);
  for (auto& r : server->requests) {
    ASSERT_TRUE(server->engine().SendResponse(r.handle, Bytes(1)).ok());
  }
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  ASSERT_EQ(server->engine().stats().server_rpcs, 2u) << "both still await their acks";

  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100), 2).ok());
  ASSERT_EQ(client->outbox.size(), 1u);
  ASSERT_NE(client->outbox[0].Decoded().data.ack.client_id, 0u) << "the request carries an ack";
  net.Settle();
  EXPECT_EQ(server->requests.size(), 3u) << "admitted, not refused";
  EXPECT_EQ(client->responses.size(), 2u) << "no refusal came back";
  EXPECT_EQ(server->engine().stats().refused_messages, 0u);
}

TEST(EngineLimits, Engine_ReceiverRefusesMessageAboveItsLimit) {
  // The server accepts at most 1000 bytes; the client may send 64 MiB.
  Config small;
  small.max_message_length = 1000;
  ManualClock clock;
  Host client(Config(), &clock, Address::Parse("10.0.0.1:40000").value());
  Host server(small, &clock, Address::Parse("10.0.0.2:5000").value());
  ASSERT_TRUE(client.engine().SendRequest(server.address(), Bytes(5000), 0).ok());
  server.engine().HandlePacket(client.address(), client.outbox.front().bytes);
  auto refused = server.OfType(PacketType::kRefused);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].Decoded().refused.reason, wire::RefuseReason::kMessageTooLong);
  client.engine().HandlePacket(server.address(), refused[0].bytes);
  ASSERT_EQ(client.responses.size(), 1u);
  EXPECT_EQ(client.responses[0].result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(server.engine().stats().server_rpcs, 0u);
}

TEST(EngineLimits, Engine_IncomingLimitBelowOutgoing) {
  // Each side sends up to 64 MiB but accepts at most 1000 bytes: a 5000-byte request is
  // refused by the server on its first packet, a 5000-byte response by the client, and a
  // 1000-byte message passes both ways.
  Config c;
  c.max_incoming_message_length = 1000;
  Net net(c);
  Host* client = net.AddHost("10.0.0.1:40000");
  Host* server = net.AddHost("10.0.0.2:5000");
  // Request too long for the server.
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(5000), 1).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(server->requests.size(), 0u);
  // Response too long for the client.
  server->auto_respond = [](const std::string&) { return Bytes(5000); };
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(1000), 2).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(client->responses[1].result.status().code(), absl::StatusCode::kResourceExhausted)
      << client->responses[1].result.status();
  // At the limit: delivered.
  server->auto_respond = [](const std::string&) { return Bytes(1000); };
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(1000), 3).ok());
  net.Settle();
  ASSERT_EQ(client->responses.size(), 3u);
  ASSERT_TRUE(client->responses[2].result.ok()) << client->responses[2].result.status();
  EXPECT_EQ(client->responses[2].result->size(), 1000u);
}

TEST_F(EngineTest, Engine_MalformedPacketsDroppedAndCounted) {
  EchoServer();
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(5000), 0).ok());
  std::vector<uint8_t> good = client->outbox.front().bytes;
  // Truncated, bad magic, unknown type, DATA past the message end.
  std::vector<uint8_t> truncated(good.begin(), good.begin() + 40);
  std::vector<uint8_t> magic = good;
  magic[14] ^= 0xff;
  std::vector<uint8_t> type = good;
  type[11] = 0x55;
  std::vector<uint8_t> past = good;
  past[52] = 0x7f;  // offset far beyond message_length
  for (auto* bad : {&truncated, &magic, &type, &past}) {
    server->engine().HandlePacket(client->address(), *bad);
  }
  const EngineStats& s = server->engine().stats();
  EXPECT_EQ(s.packets_dropped[static_cast<int>(wire::DecodeError::kTruncated)], 1u);
  EXPECT_EQ(s.packets_dropped[static_cast<int>(wire::DecodeError::kBadMagic)], 1u);
  EXPECT_EQ(s.packets_dropped[static_cast<int>(wire::DecodeError::kUnknownType)], 1u);
  EXPECT_EQ(s.packets_dropped[static_cast<int>(wire::DecodeError::kBadField)], 1u);
  EXPECT_EQ(s.server_rpcs, 0u);
  EXPECT_TRUE(server->outbox.empty());
  // The genuine request still goes through afterwards.
  net.Settle();
  EXPECT_EQ(client->responses.size(), 1u);
}

TEST_F(EngineTest, Engine_GrantBeyondLengthIsClamped) {
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Bytes(100000), 0).ok());
  client->outbox.clear();
  wire::Packet g;
  g.type = PacketType::kGrant;
  g.sender_id = 3;  // server's id for client RPC 2
  g.grant.offset = 0xfffffff0;
  uint8_t buf[wire::kMaxHeaderSize];
  size_t n = wire::EncodeHeader(g, buf);
  client->engine().HandlePacket(server->address(), absl::MakeConstSpan(buf, n));
  EXPECT_EQ(client->engine().stats().packets_dropped_semantic, 1u);
  // It still sends exactly the rest of the message, nothing beyond.
  uint64_t bytes = 0;
  for (const Captured& c : client->outbox) bytes += c.Decoded().payload.size();
  EXPECT_EQ(bytes, 100000u - 29 * kPayload);
}

TEST(EnginePacer, Engine_PacerHoldsBackLongMessage) {
  Config c;
  c.link_mbps = 1000;  // 1 Gbit/s: a 1416-byte packet takes ~12 us
  c.min_nic_est_backlog_bytes = 0;  // Homa's time limit alone
  ManualClock clock;
  Host client(c, &clock, Address::Parse("10.0.0.1:40000").value());
  ASSERT_TRUE(client.engine().SendRequest(Address::Parse("10.0.0.2:1").value(), Bytes(40000), 0).ok());
  // Expect: only ~5 us of backlog worth of packets goes out at once (first packet + what fits).
  size_t first = client.outbox.size();
  EXPECT_LT(first, 4u);
  EXPECT_LT(client.engine().NextTimerNanos(), clock.NowNanos() + 20 * 1000);
  // As time passes the rest follows.
  for (int i = 0; i < 1000 && client.outbox.size() < 29; ++i) {
    clock.Set(client.engine().NextTimerNanos());
    client.engine().OnTimer();
  }
  EXPECT_EQ(client.outbox.size(), 29u);
  // A small message is never held back by the pacer.
  ASSERT_TRUE(client.engine().SendRequest(Address::Parse("10.0.0.2:1").value(), Bytes(500), 0).ok());
  EXPECT_EQ(client.outbox.size(), 30u);
}

// Packets the engine hands over at once for a 200000-byte request, before the clock moves.
size_t FirstBurstPackets(const Config& c) {
  ManualClock clock;
  Host client(c, &clock, Address::Parse("10.0.0.1:40000").value());
  EXPECT_TRUE(
      client.engine().SendRequest(Address::Parse("10.0.0.2:1").value(), Bytes(200000), 0).ok());
  return client.outbox.size();
}

TEST(EnginePacer, Engine_PacerKeepsAFewPacketsQueuedOnASlowLink) {
  Config c;
  c.link_mbps = 1000;
  c.unsched_bytes = 200000;  // everything is sendable at once: only the pacer holds it back
  ASSERT_EQ(c.max_nic_est_backlog_usecs, 5u);
  // At 1 Gbit/s, 5 us is less than one packet: the byte floor decides. A packet goes while the
  // backlog is at most 12000 bytes' time (~97 us), so the burst covers 12000 bytes and at most
  // one packet (1542 bytes as the pacer counts them, ~12.5 us) more.
  c.min_nic_est_backlog_bytes = 12000;
  const size_t floor_burst = FirstBurstPackets(c);
  EXPECT_GE(floor_burst * 1542, 12000u);
  EXPECT_LE(floor_burst, 9u);
  c.min_nic_est_backlog_bytes = 6000;
  EXPECT_LT(FirstBurstPackets(c), floor_burst - 2);
  // At 150 Mbit/s 12000 bytes would be 650 us of queue: the floor stops at 100 us, where a
  // packet takes ~83 us, so two go at once.
  c.link_mbps = 150;
  c.min_nic_est_backlog_bytes = 12000;
  EXPECT_EQ(FirstBurstPackets(c), 2u);
  // At 100 Gbit/s, 5 us is ~62000 bytes: the time limit is the larger and governs.
  c.link_mbps = 100000;
  c.min_nic_est_backlog_bytes = 12000;
  const size_t fast_burst = FirstBurstPackets(c);
  EXPECT_GE(fast_burst * 1542, 60000u);
  EXPECT_LE(fast_burst * 1416, 70000u);
}

// Releases of a 1 MB paced request after its first burst: packets handed over per release, when
// (from the request's start), and how long the whole message took.
struct PacedReleases {
  std::vector<size_t> sizes;
  std::vector<int64_t> times;
  int64_t elapsed_nanos = 0;
  size_t packets = 0;
};

PacedReleases ReleasesAfterFirstBurst(const Config& c) {
  ManualClock clock;
  Host client(c, &clock, Address::Parse("10.0.0.1:40000").value());
  EXPECT_TRUE(
      client.engine().SendRequest(Address::Parse("10.0.0.2:1").value(), Bytes(1000000), 0).ok());
  PacedReleases r;
  const int64_t start = clock.NowNanos();
  size_t before = client.outbox.size();
  for (int i = 0; i < 100000 && client.outbox.size() < 707; ++i) {  // 1000000 / 1416 bytes
    clock.Set(std::max(clock.NowNanos(), client.engine().NextTimerNanos()));
    client.engine().OnTimer();
    if (client.outbox.size() > before) {
      r.sizes.push_back(client.outbox.size() - before);
      r.times.push_back(clock.NowNanos() - start);
    }
    before = client.outbox.size();
  }
  r.elapsed_nanos = clock.NowNanos() - start;
  r.packets = client.outbox.size();
  return r;
}

TEST(EnginePacer, Engine_PacerRefillsTheQueueInBursts) {
  Config c;
  c.link_mbps = 1000;
  c.unsched_bytes = 1000000;  // all sendable at once: only the pacer holds it back
  c.min_nic_est_backlog_bytes = 12000;  // ~97 us of queue at 1 Gbit/s
  // A packet is 1542 bytes as the pacer counts them (~12.5 us at 990 Mbit/s).
  const int64_t wire_nanos = static_cast<int64_t>(707 * 1542 * 8.0 / 0.99);

  c.pacer_refill_percent = 0;  // top up packet by packet
  const PacedReleases single = ReleasesAfterFirstBurst(c);
  ASSERT_EQ(single.packets, 707u);
  size_t big = 0;
  for (size_t n : single.sizes) big += n > 1 ? 1 : 0;
  EXPECT_LE(big, 2u) << "one packet per release once the queue is full";

  c.pacer_refill_percent = 50;  // wait for ~6000 bytes to drain, then send ~6000 at once
  const PacedReleases bursts = ReleasesAfterFirstBurst(c);
  ASSERT_EQ(bursts.packets, 707u);
  ASSERT_GT(bursts.sizes.size(), 10u);
  // Every steady-state release is a burst of 3-5 packets: half of ~97 us of queue is ~3.9
  // packets' time (the last release may carry the message's remainder).
  for (size_t i = 0; i + 1 < bursts.sizes.size(); ++i) {
    EXPECT_GE(bursts.sizes[i], 3u) << "release " << i;
    EXPECT_LE(bursts.sizes[i], 5u) << "release " << i;
  }
  EXPECT_LT(bursts.sizes.size() * 3, single.sizes.size());
  // The link never idled: both took the wire time of what was left after the first burst,
  // to within one release interval.
  for (const PacedReleases* r : {&single, &bursts}) {
    EXPECT_LE(r->elapsed_nanos, wire_nanos);
    EXPECT_GE(r->elapsed_nanos, wire_nanos - 200 * 1000);
  }

  // At 150 Mbit/s the limit is 100 us and a packet ~82 us: half the limit is less than two
  // packets, so the pacer keeps topping up one packet at a time, as soon as the queue is below
  // the limit (not only below half of it).
  c.link_mbps = 150;
  const PacedReleases slow = ReleasesAfterFirstBurst(c);
  c.pacer_refill_percent = 0;
  const PacedReleases slow_single = ReleasesAfterFirstBurst(c);
  EXPECT_EQ(slow.sizes, slow_single.sizes);
  EXPECT_EQ(slow.times, slow_single.times);
}

TEST(EnginePacer, Engine_PacerRefillPercentIsValidated) {
  Config c;
  c.pacer_refill_percent = 100;
  EXPECT_TRUE(c.Validate().ok());
  c.pacer_refill_percent = 101;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
}

// A clock that moves forward a little at every reading, as a real one does.
class CreepingClock final : public Clock {
 public:
  int64_t NowNanos() const override { return now_ += 10; }
  void Advance(int64_t nanos) { now_ += nanos; }

 private:
  mutable int64_t now_ = 1'000'000'000;
};

TEST(EnginePacer, Engine_PacedDataIsDueNotAlwaysInTheFuture) {
  // Regression: NextTimerNanos() clamped the pacer's release time to a fresh clock reading,
  // so a loop comparing it with its own (earlier) reading never found it due, and paced
  // transfers crawled at one burst per 1 ms tick.
  Config c;
  c.link_mbps = 1000;
  CreepingClock clock;
  Host client(c, &clock, Address::Parse("10.0.0.1:40000").value());
  ASSERT_TRUE(client.engine().SendRequest(Address::Parse("10.0.0.2:1").value(), Bytes(40000), 0).ok());
  ASSERT_LT(client.outbox.size(), 29u) << "the pacer held some packets back";
  clock.Advance(1000 * 1000);  // long enough for the link to drain
  const int64_t loop_now = clock.NowNanos();
  EXPECT_LE(client.engine().NextTimerNanos(), loop_now);
}

}  // namespace
}  // namespace homarpc::transport
