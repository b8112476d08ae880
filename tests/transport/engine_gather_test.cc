// Protocol tests of the engine sending gathered messages (MessageBytes made of owned and
// borrowed segments, transport/message_bytes.h), on the manual-clock harness
// (engine_harness.h): requests and responses of many segments, tiny ones between large ones,
// arrive byte-exact, also when packets are lost and RESENT or the whole request is restarted;
// every DATA packet carries at most one packet's worth of payload, exactly the message's bytes
// at its offset, and is cut short only where a third segment would be needed (a message of
// large segments goes out in full-size packets); the release callback runs once, only after
// the RPC has ended and the engine has been reaped, or at once when the engine refuses the
// message. The borrowed bytes are heap strings that the release frees, so under ASan a read
// after the release is reported. Single-threaded, like the engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/transport/engine_harness.h"
#include "tests/transport/gathered_message.h"
#include "transport/engine.h"
#include "transport/message_bytes.h"

namespace homarpc::transport {
namespace {

using testing::BuildGathered;
using testing::Captured;
using testing::Host;
using testing::Net;
using testing::Piece;
using testing::Unpaced;
using wire::PacketType;

// What the release callback of a built message saw.
struct ReleaseLog {
  int runs = 0;
  // Runs inside the release, before the borrowed bytes are freed (checks of when it ran).
  std::function<void()> on_release;
};

// A gathered message of `pieces` whose release records itself in `log`.
MessageBytes Build(const std::vector<Piece>& pieces, uint32_t seed, std::string* reference,
                   ReleaseLog* log) {
  return BuildGathered(pieces, seed, reference, [log] {
    ++log->runs;
    if (log->on_release) log->on_release();
  });
}

size_t TotalSize(const std::vector<Piece>& pieces) {
  size_t n = 0;
  for (const Piece& p : pieces) n += p.size;
  return n;
}

// The packets (offset, length) a first transmission of `pieces` must consist of: each as long
// as a packet may be, unless reaching that far would need a third segment.
std::vector<std::pair<uint32_t, uint32_t>> ExpectedPackets(const std::vector<Piece>& pieces,
                                                           uint32_t per_packet) {
  std::vector<size_t> ends;
  size_t end = 0;
  for (const Piece& p : pieces) ends.push_back(end += p.size);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  size_t offset = 0;
  while (offset < end) {
    size_t k = 0;
    while (ends[k] <= offset) ++k;
    const size_t reach = k + 1 < ends.size() ? ends[k + 1] : ends[k];
    const size_t len = std::min<size_t>(per_packet, reach - offset);
    out.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(len)});
    offset += len;
  }
  return out;
}

// Many segments, tiny ones between large ones, owned and borrowed; longer than the
// unscheduled bytes (grants are needed).
const std::vector<Piece> kRequestPieces = {{5000, false}, {3, true},  {1, false},    {20000, true},
                                           {3, true},     {2, false}, {70001, true}, {7, false},
                                           {1416, true},  {1, false}, {1417, false}, {16384, true},
                                           {1, true},     {3, false}, {2900, true}};
const std::vector<Piece> kResponsePieces = {
    {3, true},     {1, true}, {60000, false}, {3, false}, {3, true},     {3, false}, {100000, true},
    {1415, false}, {2, true}, {1417, true},   {5, false}, {40000, true}, {1, false}};

// Checks the DATA packets one host sends against the message they belong to.
class DataCheck {
 public:
  DataCheck(const std::string* reference, uint32_t per_packet)
      : reference_(reference), per_packet_(per_packet) {}

  void Check(const Captured& c) {
    wire::Packet p = c.Decoded();  // payload aliases c.bytes
    if (p.type != PacketType::kData) return;
    const uint32_t offset = p.data.offset;
    const size_t len = p.payload.size();
    ++packets_;
    if (!p.data.retransmit) first_.push_back({offset, static_cast<uint32_t>(len)});
    EXPECT_EQ(p.data.message_length, reference_->size());
    EXPECT_GT(len, 0u) << "an empty DATA packet for a non-empty message";
    EXPECT_LE(len, per_packet_) << "offset " << offset;
    ASSERT_LE(offset + len, reference_->size()) << "offset " << offset;
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(p.payload.data()), len) ==
                reference_->substr(offset, len))
        << "the bytes of the DATA packet at offset " << offset << " (" << len << " bytes)";
  }

  int packets() const { return packets_; }
  // (offset, length) of the packets not marked as retransmissions, in the order sent.
  const std::vector<std::pair<uint32_t, uint32_t>>& first() const { return first_; }

 private:
  const std::string* reference_;
  uint32_t per_packet_;
  int packets_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> first_;
};

struct EngineGatherTest : public ::testing::Test {
  EngineGatherTest() : net(Unpaced()) {
    client = net.AddHost("10.0.0.1:40000");
    server = net.AddHost("10.0.0.2:5000");
    per_packet = net.config().PayloadPerPacket(/*ipv6=*/false);
  }

  // Moves packets between the two hosts by hand, without ever calling Reap(), until `done`
  // holds (checked before each packet) or nothing is left to move.
  void ExchangeWithoutReap(const std::function<bool()>& done) {
    for (int round = 0; round < 100000 && !done(); ++round) {
      bool moved = false;
      for (Host* from : {client, server}) {
        Host* to = from == client ? server : client;
        while (!from->outbox.empty() && !done()) {
          Captured c = std::move(from->outbox.front());
          from->outbox.pop_front();
          to->engine().HandlePacket(from->address(), c.bytes);
          moved = true;
        }
      }
      if (!moved) return;
    }
  }

  Net net;
  Host* client;
  Host* server;
  uint32_t per_packet;
};

TEST_F(EngineGatherTest, EngineGather_ManySegmentRequestAndResponseArriveByteExact) {
  std::string request_ref;
  std::string response_ref;
  ReleaseLog request_log;
  ReleaseLog response_log;
  DataCheck client_data(&request_ref, per_packet);
  DataCheck server_data(&response_ref, per_packet);
  auto check = [&](const Host* from, const Captured& c) {
    (from == client ? client_data : server_data).Check(c);
    return true;
  };

  auto id = client->engine().SendRequest(server->address(),
                                         Build(kRequestPieces, 1, &request_ref, &request_log), 9);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(request_ref.size(), TotalSize(kRequestPieces));
  net.Settle(100000, check);
  // Expect: the server has the request, byte-exact; the client still holds its bytes.
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(server->requests[0].bytes == request_ref);
  EXPECT_EQ(request_log.runs, 0);

  ASSERT_TRUE(server->engine()
                  .SendResponse(server->requests[0].handle,
                                Build(kResponsePieces, 2, &response_ref, &response_log))
                  .ok());
  net.Settle(100000, check);
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].cookie, 9u);
  ASSERT_TRUE(client->responses[0].result.ok()) << client->responses[0].result.status();
  EXPECT_TRUE(*client->responses[0].result == response_ref);
  client->engine().Reap();  // the harness reaps a host only after flushing its packets
  EXPECT_EQ(request_log.runs, 1) << "the client RPC ended and was reaped";

  // Expect: each message went out exactly once, in the packets its segments dictate: full
  // packets except where the next one would need a third segment.
  const auto want_request = ExpectedPackets(kRequestPieces, per_packet);
  const auto want_response = ExpectedPackets(kResponsePieces, per_packet);
  EXPECT_EQ(client_data.first(), want_request);
  EXPECT_EQ(server_data.first(), want_response);
  EXPECT_EQ(client_data.packets(), static_cast<int>(want_request.size()));
  EXPECT_EQ(server_data.packets(), static_cast<int>(want_response.size()));
  // The layouts do make packets short (else this test would not test cutting).
  EXPECT_GT(want_request.size(), (request_ref.size() + per_packet - 1) / per_packet);
  EXPECT_GT(want_response.size(), (response_ref.size() + per_packet - 1) / per_packet);
  EXPECT_EQ(client->engine().stats().retransmitted_packets, 0u);
  EXPECT_EQ(server->engine().stats().retransmitted_packets, 0u);

  // The client's ACK ends the server RPC; then its response is released.
  net.Ticks(1);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  server->engine().Reap();
  EXPECT_EQ(response_log.runs, 1);
  EXPECT_EQ(request_log.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_LargeSegmentsMakeFullSizePackets) {
  // Every segment holds at least a packet's worth: no packet needs a third segment, so none
  // is short but the last, whatever the boundaries.
  const std::vector<Piece> pieces = {{20000, false}, {16384, true}, {1416 * 3 + 5, false},
                                     {30001, true},  {1416, true},  {1417, false},
                                     {50000, false}, {16384, true}};
  std::string ref;
  ReleaseLog log;
  DataCheck data(&ref, per_packet);
  server->auto_respond = [](const std::string&) { return Buffer::CopyOf("ok"); };
  ASSERT_TRUE(
      client->engine().SendRequest(server->address(), Build(pieces, 3, &ref, &log), 0).ok());
  net.Settle(100000, [&](const Host* from, const Captured& c) {
    if (from == client) data.Check(c);
    return true;
  });
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(server->requests[0].bytes == ref);
  const size_t full = (ref.size() + per_packet - 1) / per_packet;
  EXPECT_EQ(data.packets(), static_cast<int>(full));
  ASSERT_EQ(data.first().size(), full);
  for (size_t i = 0; i < full; ++i) {
    EXPECT_EQ(data.first()[i].first, i * per_packet) << "packet " << i;
    EXPECT_EQ(data.first()[i].second, i + 1 < full ? per_packet : ref.size() - i * per_packet)
        << "packet " << i;
  }
  ASSERT_EQ(client->responses.size(), 1u);
  client->engine().Reap();
  EXPECT_EQ(log.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_LostPacketsAreResentFromTheSegments) {
  std::string request_ref;
  std::string response_ref;
  ReleaseLog request_log;
  ReleaseLog response_log;
  DataCheck client_data(&request_ref, per_packet);
  DataCheck server_data(&response_ref, per_packet);
  // The first transmission of these packets is lost: short ones, ones spanning two segments,
  // the first and the last, of the request and of the response.
  const auto want_request = ExpectedPackets(kRequestPieces, per_packet);
  const auto want_response = ExpectedPackets(kResponsePieces, per_packet);
  std::set<uint32_t> drop_request, drop_response;
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{5}, size_t{17},
                   want_request.size() - 2, want_request.size() - 1}) {
    drop_request.insert(want_request.at(i).first);
  }
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{45}, size_t{46}, size_t{47},
                   want_response.size() / 2, want_response.size() - 1}) {
    drop_response.insert(want_response.at(i).first);
  }
  int dropped = 0;
  auto keep = [&](const Host* from, const Captured& c) {
    wire::Packet p = c.Decoded();
    if (p.type != PacketType::kData) return true;
    (from == client ? client_data : server_data).Check(c);
    std::set<uint32_t>& drop = from == client ? drop_request : drop_response;
    if (drop.erase(p.data.offset) > 0) {  // its first transmission only
      ++dropped;
      return false;
    }
    return true;
  };
  // The server answers between two steps of the run, once the request is whole.
  bool answered = false;

  auto id = client->engine().SendRequest(server->address(),
                                         Build(kRequestPieces, 4, &request_ref, &request_log), 0);
  ASSERT_TRUE(id.ok());
  request_log.on_release = [&] {
    EXPECT_EQ(client->responses.size(), 1u) << "released before the RPC ended";
  };
  response_log.on_release = [&] {
    EXPECT_EQ(client->responses.size(), 1u) << "response released before the client had it";
    EXPECT_EQ(server->engine().stats().server_rpcs, 0u) << "released while the RPC lives";
  };
  const int64_t tick = int64_t{net.config().tick_usecs} * 1000;
  for (int t = 0; t < 2000 && client->responses.empty(); ++t) {
    net.Run(tick, keep);
    if (!answered && server->requests.size() == 1) {
      answered = true;
      EXPECT_TRUE(server->requests[0].bytes == request_ref);
      ASSERT_TRUE(server->engine()
                      .SendResponse(server->requests[0].handle,
                                    Build(kResponsePieces, 5, &response_ref, &response_log))
                      .ok());
    }
  }
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(server->requests[0].bytes == request_ref);
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok()) << client->responses[0].result.status();
  EXPECT_TRUE(*client->responses[0].result == response_ref);
  EXPECT_TRUE(drop_request.empty() && drop_response.empty()) << "every drop happened";
  EXPECT_EQ(dropped, 16);
  EXPECT_GE(client->engine().stats().retransmitted_packets, 1u);
  EXPECT_GE(server->engine().stats().retransmitted_packets, 1u);
  EXPECT_GE(server->engine().stats().resends_sent, 1u) << "asked for the request's gaps";
  EXPECT_GE(client->engine().stats().resends_sent, 1u) << "asked for the response's gaps";

  // Settle the ACK; both messages are released exactly once.
  net.Ticks(3);
  client->engine().Reap();
  server->engine().Reap();
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  EXPECT_EQ(request_log.runs, 1);
  EXPECT_EQ(response_log.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_RestartedRequestIsSentAgainFromItsSegments) {
  // All of a small (unscheduled) gathered request is lost: RESEND -> RPC_UNKNOWN -> the client
  // sends the request again from offset 0, from the same MessageBytes.
  const std::vector<Piece> pieces = {{3, true},  {2000, false}, {1, true}, {5000, true},
                                     {2, false}, {1416, true},  {3, true}, {700, false}};
  std::string ref;
  ReleaseLog log;
  DataCheck data(&ref, per_packet);
  server->auto_respond = [](const std::string& req) { return Buffer::CopyOf(req); };
  ASSERT_TRUE(
      client->engine().SendRequest(server->address(), Build(pieces, 6, &ref, &log), 0).ok());
  const size_t first_burst = client->CountType(PacketType::kData);
  EXPECT_EQ(first_burst, ExpectedPackets(pieces, per_packet).size());
  net.Flush(client, [&](const Captured& c) {
    data.Check(c);
    return false;
  });
  net.Run(int64_t{10} * net.config().tick_usecs * 1000, [&](const Host* from, const Captured& c) {
    if (from == client) data.Check(c);
    return true;
  });
  EXPECT_EQ(client->engine().stats().restarts, 1u);
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(server->requests[0].bytes == ref);
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok());
  EXPECT_TRUE(*client->responses[0].result == ref);
  client->engine().Reap();
  EXPECT_EQ(log.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_ReleaseWaitsForTheEndOfTheRpcAndReap) {
  std::string request_ref;
  std::string response_ref;
  ReleaseLog request_log;
  ReleaseLog response_log;
  auto id = client->engine().SendRequest(server->address(),
                                         Build(kRequestPieces, 7, &request_ref, &request_log), 0);
  ASSERT_TRUE(id.ok());
  // Expect: nothing released while the request travels and the server works on it.
  ExchangeWithoutReap([&] { return server->requests.size() == 1; });
  ASSERT_EQ(server->requests.size(), 1u);
  EXPECT_TRUE(server->requests[0].bytes == request_ref);
  EXPECT_EQ(request_log.runs, 0);
  client->engine().Reap();
  server->engine().Reap();
  EXPECT_EQ(request_log.runs, 0) << "the client RPC is alive: its request may be needed again";

  ASSERT_TRUE(server->engine()
                  .SendResponse(server->requests[0].handle,
                                Build(kResponsePieces, 8, &response_ref, &response_log))
                  .ok());
  ExchangeWithoutReap([&] { return !client->responses.empty(); });
  ASSERT_EQ(client->responses.size(), 1u);
  ASSERT_TRUE(client->responses[0].result.ok());
  EXPECT_TRUE(*client->responses[0].result == response_ref);
  // Expect: the client RPC has ended, but until Reap() its packets may still sit in the
  // sink's batch, pointing into the request.
  EXPECT_EQ(client->engine().stats().client_rpcs, 0u);
  EXPECT_EQ(request_log.runs, 0);
  client->engine().Reap();
  EXPECT_EQ(request_log.runs, 1);
  client->engine().Reap();
  EXPECT_EQ(request_log.runs, 1) << "once";

  // Expect: the server keeps the response (the client may still ask for lost bytes) until the
  // client's ACK ends the RPC, and releases it at the next Reap().
  server->engine().Reap();
  EXPECT_EQ(response_log.runs, 0);
  EXPECT_EQ(server->engine().stats().server_rpcs, 1u);
  server->outbox.clear();
  client->engine().FlushAcks();
  ASSERT_EQ(client->CountType(PacketType::kAck), 1u);
  ExchangeWithoutReap([] { return false; });
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
  EXPECT_EQ(response_log.runs, 0);
  server->engine().Reap();
  EXPECT_EQ(response_log.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_AbortedAndTimedOutRequestsAreReleasedAfterTheOutcome) {
  std::string ref;
  ReleaseLog aborted;
  aborted.on_release = [&] {
    EXPECT_EQ(client->responses.size(), 1u) << "released before the outcome was reported";
  };
  auto id =
      client->engine().SendRequest(server->address(), Build(kRequestPieces, 9, &ref, &aborted), 1);
  ASSERT_TRUE(id.ok());
  client->outbox.clear();  // never delivered
  client->engine().AbortClientRpc(*id, absl::CancelledError("test"));
  ASSERT_EQ(client->responses.size(), 1u);
  EXPECT_EQ(client->responses[0].result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(aborted.runs, 0) << "not before Reap()";
  client->engine().Reap();
  EXPECT_EQ(aborted.runs, 1);

  // Nobody answers: the silence timeout fails the RPC, then the request is released.
  std::string ref2;
  ReleaseLog timed_out;
  timed_out.on_release = [&] { EXPECT_EQ(client->responses.size(), 2u); };
  ASSERT_TRUE(client->engine()
                  .SendRequest(Address::Parse("10.9.9.9:1").value(),
                               Build(kRequestPieces, 10, &ref2, &timed_out), 2)
                  .ok());
  for (int t = 0; t < 1000 && client->responses.size() < 2; ++t) net.Ticks(1);
  ASSERT_EQ(client->responses.size(), 2u);
  EXPECT_EQ(client->responses[1].result.status().code(), absl::StatusCode::kUnavailable);
  client->engine().Reap();
  EXPECT_EQ(timed_out.runs, 1);
}

TEST_F(EngineGatherTest, EngineGather_RefusedMessagesAreReleasedAtOnce) {
  // A response for an RPC that was already answered: FAILED_PRECONDITION, released on return.
  server->auto_respond = [](const std::string&) { return Buffer::CopyOf("first"); };
  ASSERT_TRUE(client->engine().SendRequest(server->address(), Buffer::CopyOf("hi"), 0).ok());
  net.Flush(client);
  ASSERT_EQ(server->requests.size(), 1u);
  std::string ref;
  ReleaseLog second;
  absl::Status s = server->engine().SendResponse(server->requests[0].handle,
                                                 Build(kResponsePieces, 11, &ref, &second));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(second.runs, 1);

  // A request above max_message_length: RESOURCE_EXHAUSTED, nothing sent, released on return.
  Config small = Unpaced();
  small.max_message_length = 10000;
  Net limited(small);
  Host* c = limited.AddHost("10.0.0.1:40000");
  Host* srv = limited.AddHost("10.0.0.2:5000");
  std::string ref2;
  ReleaseLog too_long;
  auto id = c->engine().SendRequest(srv->address(), Build(kRequestPieces, 12, &ref2, &too_long), 0);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted) << id.status();
  EXPECT_EQ(too_long.runs, 1);
  EXPECT_TRUE(c->outbox.empty());
}

}  // namespace
}  // namespace homarpc::transport
