// io_gather_test: packets whose payload is split across OutPacket::payload and payload2 (a
// DATA packet spanning two segments of a gathered message, message_bytes.h), sent through the
// real backends (io_uring and epoll, IPv4 and IPv6 loopback): every datagram arrives as
// header + payload + payload2, byte-exact, as a plain datagram, inside GSO runs of
// equal-size packets where only some are split, at the GSO segment limit, with GSO off, and
// when the payload memory is reused right after Flush(). Then the same end to end through
// Endpoints: gathered requests and responses of many segments, small and large, echo intact.
//
// Each test builds real backends on 127.0.0.1 / ::1 and moves real datagrams between them.
// Waiting is bounded only as a failure guard (seconds); nothing asserts how fast anything is.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/gathered_message.h"
#include "tests/transport/io_backend_fixture.h"
#include "transport/clock.h"
#include "transport/endpoint.h"
#include "transport/io_backend.h"
#include "transport/message_bytes.h"

namespace homarpc::transport {
namespace {

using ::testing::UnorderedElementsAreArray;

using Bytes = std::vector<uint8_t>;

constexpr int64_t kGuardNanos = 10 * kNanosPerSecond;  // failure guard, never a timing claim
constexpr size_t kHeaderLen = 16;

// The bytes of test packet `seq`: a header naming seq, then a payload whose every byte depends
// on seq and position.
Bytes Header(uint32_t seq) {
  Bytes h(kHeaderLen, 0);
  std::memcpy(h.data(), &seq, sizeof(seq));
  std::memcpy(h.data() + 8, "GATHERED", 8);
  return h;
}
Bytes Payload(uint32_t seq, size_t len) {
  Bytes p(len);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(seq * 151 + i * 13 + (i >> 7) + 5);
  return p;
}

// A batch of test packets whose payloads are split in two at a chosen point; each half lives in
// its own heap block (as two segments of a gathered message do) until the batch is destroyed.
class SplitBurst {
 public:
  // `split` bytes go in payload, the rest in payload2 (split == len: payload2 empty).
  void Add(const Address& dest, uint32_t seq, size_t len, size_t split, uint8_t priority = 0) {
    const Bytes whole = Payload(seq, len);
    halves_.push_back(std::make_unique<Bytes>(whole.begin(), whole.begin() + split));
    const Bytes& first = *halves_.back();
    halves_.push_back(std::make_unique<Bytes>(whole.begin() + split, whole.end()));
    const Bytes& second = *halves_.back();
    OutPacket p;
    p.dest = dest;
    p.priority = priority;
    const Bytes h = Header(seq);
    p.header_len = static_cast<uint8_t>(h.size());
    std::memcpy(p.header, h.data(), h.size());
    p.payload = absl::MakeConstSpan(first);
    p.payload2 = absl::MakeConstSpan(second);
    packets_.push_back(p);
    Bytes datagram = h;
    datagram.insert(datagram.end(), whole.begin(), whole.end());
    expected_.push_back(std::move(datagram));
  }
  void SendAll(IoBackend& backend) const {
    for (const OutPacket& p : packets_) backend.Send(p);
  }
  // Overwrites every payload byte, as an engine releasing a message after Flush() may.
  void Scribble() {
    for (auto& h : halves_) std::fill(h->begin(), h->end(), 0xEE);
  }
  const std::vector<Bytes>& expected() const { return expected_; }
  size_t size() const { return packets_.size(); }

 private:
  std::vector<std::unique_ptr<Bytes>> halves_;
  std::vector<OutPacket> packets_;
  std::vector<Bytes> expected_;
};

// Polls until `count` datagrams from `sender` arrived (or the guard expires). Datagrams from
// elsewhere (another process's traffic to a port we reused) are ignored.
std::vector<Bytes> ReceiveN(IoBackend& backend, size_t count, const Address& sender) {
  std::vector<Bytes> got;
  MonotonicClock clock;
  const int64_t deadline = clock.NowNanos() + kGuardNanos;
  while (got.size() < count && clock.NowNanos() < deadline) {
    backend.Poll([&](const Address& from, absl::Span<const uint8_t> bytes) {
      if (from == sender) got.emplace_back(bytes.begin(), bytes.end());
    });
    if (got.size() < count) backend.Wait(10 * kNanosPerMilli);
  }
  return got;
}

class IoGatherTest : public io_test::IoBackendFixture {};

TEST_P(IoGatherTest, SplitPayloadArrivesAsOneDatagram) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  // One packet per split point, each flushed on its own: a plain datagram, no GSO. Includes
  // an empty first part and an empty second part.
  const size_t len = 1000;
  const size_t splits[] = {0, 1, 3, 500, 997, 999, 1000};
  uint32_t seq = 0;
  for (size_t split : splits) {
    SCOPED_TRACE(absl::StrCat("split at ", split));
    SplitBurst burst;
    burst.Add(b->local_address(), seq++, len, split);
    burst.SendAll(*a);
    a->Flush();
    std::vector<Bytes> got = ReceiveN(*b, 1, a->local_address());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], burst.expected()[0]);
  }
  EXPECT_EQ(a->stats().datagrams_sent, std::size(splits));
  EXPECT_EQ(a->stats().send_errors, 0u);
}

TEST_P(IoGatherTest, GsoRunWithSomeSplitPacketsArrivesByteExact) {
  for (bool gro : {true, false}) {
    SCOPED_TRACE(gro ? "receiver with GRO" : "receiver without GRO");
    auto a = Make();
    IoOptions receiver = Options();
    receiver.enable_gro = gro;
    auto b = Make(receiver);
    ASSERT_TRUE(a && b);

    // 40 packets of 1200 payload bytes, every third split somewhere else (a segment boundary
    // inside the packet), and a shorter, split, last one: still one run of equal sizes, one
    // GSO send; the kernel must cut datagrams on packet boundaries, not iovec boundaries.
    SplitBurst burst;
    for (uint32_t seq = 0; seq < 40; ++seq) {
      const size_t split = seq % 3 == 0 ? (seq * 97) % 1200 + 1 : 1200;
      burst.Add(b->local_address(), seq, 1200, split);
    }
    burst.Add(b->local_address(), 40, 500, 3);
    burst.SendAll(*a);
    a->Flush();
    EXPECT_EQ(a->stats().send_calls, 1u) << "one run, one GSO send";
    EXPECT_EQ(a->stats().datagrams_sent, 41u);
    EXPECT_EQ(ReceiveN(*b, 41, a->local_address()), burst.expected());
    EXPECT_EQ(b->stats().datagrams_received, 41u);
  }
}

TEST_P(IoGatherTest, EverySplitPacketOfARunAtTheSegmentLimit) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  // 100 small packets, all split (three iovecs each): at most 64 segments per GSO send, so
  // two sends (192 iovecs in the first).
  SplitBurst burst;
  for (uint32_t seq = 0; seq < 100; ++seq) burst.Add(b->local_address(), seq, 84, 1 + seq % 83);
  burst.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 2u);
  EXPECT_EQ(a->stats().send_errors, 0u);
  EXPECT_EQ(ReceiveN(*b, 100, a->local_address()), burst.expected());

  // Full-size packets with splits: runs cut at the byte limit (43 per send), 4 sends.
  SplitBurst large;
  for (uint32_t seq = 0; seq < 150; ++seq) {
    large.Add(b->local_address(), 1000 + seq, 1484, seq % 2 == 0 ? 742 : 1484);
  }
  large.SendAll(*a);
  a->Flush();
  EXPECT_EQ(a->stats().send_calls, 2u + 4u);
  EXPECT_EQ(a->stats().datagrams_sent, 250u);
  EXPECT_EQ(ReceiveN(*b, 150, a->local_address()), large.expected());
}

TEST_P(IoGatherTest, MixedRunsAndGsoOffKeepEveryByte) {
  for (bool gso : {true, false}) {
    SCOPED_TRACE(gso ? "GSO" : "no GSO");
    IoOptions options = Options();
    options.enable_gso = gso;
    auto a = Make(options);
    auto b = Make();
    ASSERT_TRUE(a && b);
    // Runs of different sizes and priorities, split and whole packets interleaved.
    SplitBurst burst;
    uint32_t seq = 0;
    for (int i = 0; i < 5; ++i) burst.Add(b->local_address(), seq++, 1416, i % 2 == 0 ? 3 : 1416);
    for (int i = 0; i < 3; ++i) burst.Add(b->local_address(), seq++, 1416, 1413, 4);
    burst.Add(b->local_address(), seq++, 7, 3);
    for (int i = 0; i < 4; ++i) burst.Add(b->local_address(), seq++, 900, 450 + i);
    burst.Add(b->local_address(), seq++, 1, 0);
    burst.SendAll(*a);
    a->Flush();
    EXPECT_EQ(a->stats().datagrams_sent, burst.size());
    EXPECT_EQ(a->stats().send_errors, 0u);
    if (!gso) {
      EXPECT_EQ(a->stats().send_calls, burst.size());
    }
    // Order across runs of different priorities is not promised: compare as sets.
    EXPECT_THAT(ReceiveN(*b, burst.size(), a->local_address()),
                UnorderedElementsAreArray(burst.expected()));
  }
}

TEST_P(IoGatherTest, BothPayloadPartsMayBeReusedRightAfterFlush) {
  auto a = Make();
  auto b = Make();
  ASSERT_TRUE(a && b);
  SplitBurst burst;
  for (uint32_t seq = 0; seq < 20; ++seq) burst.Add(b->local_address(), seq, 1000, 100 + seq);
  burst.SendAll(*a);
  a->Flush();
  // A released message's memory may be reused once Flush() has returned.
  const std::vector<Bytes> expected = burst.expected();
  burst.Scribble();
  EXPECT_EQ(ReceiveN(*b, 20, a->local_address()), expected);
}

INSTANTIATE_TEST_SUITE_P(Backends, IoGatherTest, io_test::kAllIoParams, io_test::IoParamName);

// ---------------------------------------------------------------------------------------------
// End to end through Endpoints: a gathered request is echoed as a gathered response.

// A message of the given piece sizes, alternately owned and borrowed (gathered_message.h);
// `released` (if set) is notified when the transport lets go of it.
MessageBytes Gathered(const std::vector<size_t>& sizes, uint32_t seed, std::string* reference,
                      absl::Notification* released) {
  std::vector<testing::Piece> pieces;
  for (size_t i = 0; i < sizes.size(); ++i) pieces.push_back({sizes[i], i % 2 == 1});
  return testing::BuildGathered(pieces, seed, reference, [released] {
    if (released != nullptr) released->Notify();
  });
}

// Where two byte strings first differ, for failure messages ("" when equal).
std::string Difference(absl::string_view got, absl::string_view want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return absl::StrCat("got ", got.size(), " bytes, want ", want.size(), "; first difference at ",
                      i);
}

class EndpointGatherTest : public io_test::IoBackendFixture {
 protected:
  EndpointOptions Options() const {  // hides the fixture's IoOptions one
    EndpointOptions options;
    options.io = IoBackendFixture::Options();
    options.config.timeout_ticks = 10000;  // a guard: never UNAVAILABLE by accident
    return options;
  }
};

TEST_P(EndpointGatherTest, GatheredRequestsAndResponsesEchoIntact) {
  // The server echoes each request as a gathered response: cut into pieces of 3 bytes, 1 byte,
  // a third of it, 2 bytes, a third, 1 byte, and again.
  Endpoint* server_ptr = nullptr;
  auto handler = [&server_ptr](IncomingRequest request) {
    const absl::string_view bytes = request.payload.view();
    const size_t third = std::max<size_t>(1, bytes.size() / 3);
    const size_t cuts[] = {3, 1, third, 2, third, 1};
    MessageBytes response;
    size_t at = 0;
    for (size_t i = 0; at < bytes.size(); ++i) {
      const size_t n = std::min(bytes.size() - at, cuts[i % std::size(cuts)]);
      response.Append(Buffer::CopyOf(bytes.substr(at, n)));
      at += n;
    }
    server_ptr->Reply(request, std::move(response));
  };
  auto server = Endpoint::Create(Options(), handler);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ptr = server->get();
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok()) << client.status();

  const std::vector<std::vector<size_t>> layouts = {
      {3, 1, 2},            // one short packet of three segments
      {500, 3, 1, 2, 900},  // one packet's worth of five
      {3, 1000, 1, 1, 2, 3},
      {20000, 3, 1, 70001, 3, 16384, 7, 1416, 1},  // many packets, cut short
      {300000, 3, 250000, 1, 500000},              // large, mostly borrowed
  };
  uint32_t seed = 1;
  for (int round = 0; round < 3; ++round) {  // later rounds: the route to the server is known
    for (const auto& layout : layouts) {
      SCOPED_TRACE(absl::StrCat("round ", round, ", layout of ", layout.size(), " pieces, first ",
                                layout[0]));
      std::string reference;
      absl::Notification released;
      absl::StatusOr<Buffer> response = (*client)->Call(
          server_ptr->local_address(), Gathered(layout, seed++, &reference, &released));
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(Difference(response->view(), reference), "") << "the echo differs";
      EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(10)))
          << "the request was never released";
    }
  }
  EXPECT_EQ((*client)->stats().client_rpcs, 0u);
}

TEST_P(EndpointGatherTest, SmallGatheredRequestsFromAnIdleClientEchoIntact) {
  // A client loop that sleeps as soon as it is idle (poll_usecs 0): a one-packet request from
  // the caller's thread may then leave from that thread (Config::direct_send), copied from
  // the gathered request into one payload. Requests of three and more segments, each shorter
  // than a packet, must arrive whole whichever path they take.
  Endpoint* server_ptr = nullptr;
  auto server = Endpoint::Create(Options(), [&server_ptr](IncomingRequest request) {
    server_ptr->Reply(request, std::move(request.payload));
  });
  ASSERT_TRUE(server.ok()) << server.status();
  server_ptr = server->get();
  EndpointOptions client_options = Options();
  client_options.config.poll_usecs = 0;
  auto client = Endpoint::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();

  const std::vector<std::vector<size_t>> layouts = {
      {3, 1, 2}, {1, 1, 1, 1}, {500, 3, 1, 2, 900}, {1000, 200, 100}, {2, 1400, 2}};
  uint32_t seed = 100;
  for (int round = 0; round < 20; ++round) {
    for (const auto& layout : layouts) {
      SCOPED_TRACE(absl::StrCat("round ", round, ", layout of ", layout.size(), " pieces, first ",
                                layout[0]));
      std::string reference;
      absl::StatusOr<Buffer> response = (*client)->Call(
          server_ptr->local_address(), Gathered(layout, seed++, &reference, nullptr));
      ASSERT_TRUE(response.ok()) << response.status();
      ASSERT_EQ(Difference(response->view(), reference), "") << "the echo differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EndpointGatherTest, io_test::kAllIoParams, io_test::IoParamName);

}  // namespace
}  // namespace homarpc::transport
