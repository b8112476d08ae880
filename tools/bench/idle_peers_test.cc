// Tests for tools/bench/idle_peers.cc: the idle-peers and inflight-rpcs points run for real
// (a homarpc server process, a raw-socket client process, loopback) with a few dozen peers, and
// the server's own report must show exactly the state each scenario promises to leave behind.
// Each run holds its peers idle for kMinHoldMillis (the server refreshes its peer count once a
// second), so a point takes about 1.6 s; that wait is the system's, not the test's.
#include "tools/bench/idle_peers.h"

#include <string>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/harness.h"

namespace homarpc::bench {
namespace {

constexpr uint64_t kPeers = 40;

Point PeersPoint(const char* scenario, uint64_t peers) {
  Point point;
  point.scenario = scenario;
  point.size = peers;
  point.request_bytes = peers;  // what main() fills in; the system must ignore it
  point.response_bytes = kPeerMessageBytes;
  point.concurrency = 8;
  point.iterations = 1;   // ignored: every peer is one sample
  point.duration_ns = 0;  // hold for kMinHoldMillis
  return point;
}

// The integer extra `key` of `result`; fails the test when it is missing.
int64_t IntExtra(const Result& result, const std::string& key) {
  const Extra* extra = result.FindExtra(key);
  EXPECT_NE(extra, nullptr) << "no extra " << key;
  int64_t value = -1;
  if (extra != nullptr) {
    EXPECT_TRUE(absl::SimpleAtoi(extra->text, &value)) << key;
  }
  return value;
}

TEST(IdlePeers, Register_AddsBothScenariosWithHomarpc) {
  Registry registry;
  RegisterPeerScenarios(registry);
  for (const char* name : {kIdlePeers, kInflightRpcs}) {
    const Scenario* scenario = registry.Find(name);
    ASSERT_NE(scenario, nullptr) << name;
    EXPECT_THAT(scenario->SystemNames(), ::testing::ElementsAre("homarpc"));
    // The size axis counts peers: messages stay 64 bytes whatever the size.
    EXPECT_EQ(scenario->response_bytes(10000), kPeerMessageBytes);
  }
}

TEST(IdlePeers, SkipReason_SizeCountsPeers) {
  const HomarpcPeers system(PeerLoad::kIdle);
  EXPECT_EQ(system.SkipReason(PeersPoint(kIdlePeers, 10000)), "");
  EXPECT_THAT(system.SkipReason(PeersPoint(kIdlePeers, 0)), ::testing::HasSubstr("peers"));
  EXPECT_THAT(system.SkipReason(PeersPoint(kIdlePeers, kMaxPeers + 1)),
              ::testing::HasSubstr("peers"));
}

TEST(IdlePeers, IdlePeers_ServerEndsWithPeersAndNoRpcs) {
  const HomarpcPeers system(PeerLoad::kIdle);
  absl::StatusOr<Result> result = RunPoint(system, PeersPoint(kIdlePeers, kPeers));
  ASSERT_TRUE(result.ok()) << result.status();

  // Every peer completed its one RPC: one latency sample each.
  EXPECT_EQ(result->samples, kPeers);
  EXPECT_EQ(IntExtra(*result, "peers"), static_cast<int64_t>(kPeers));
  // Expect: the server ran each request once, knows every peer, and every ACK ended its RPC.
  EXPECT_EQ(IntExtra(*result, "server_requests_delivered"), static_cast<int64_t>(kPeers));
  EXPECT_EQ(IntExtra(*result, "server_peers"), static_cast<int64_t>(kPeers));
  EXPECT_EQ(IntExtra(*result, "server_rpcs"), 0);
  // Tombstones have expired during the hold: what is left is exactly the peers' state.
  const int64_t per_peer = IntExtra(*result, "server_state_bytes_per_peer");
  EXPECT_GT(per_peer, 0);
  EXPECT_LE(per_peer, 1024);  // the target
  EXPECT_EQ(IntExtra(*result, "server_state_total_bytes"), static_cast<int64_t>(kPeers) * per_peer);
  EXPECT_GT(IntExtra(*result, "server_peak_rss_kb"), 0);
}

TEST(IdlePeers, InflightRpcs_ServerHoldsEveryRequestUnanswered) {
  const HomarpcPeers system(PeerLoad::kInFlight);
  absl::StatusOr<Result> result = RunPoint(system, PeersPoint(kInflightRpcs, kPeers));
  ASSERT_TRUE(result.ok()) << result.status();

  // Each sample is a BUSY: the server confirmed it holds that peer's request.
  EXPECT_EQ(result->samples, kPeers);
  EXPECT_EQ(IntExtra(*result, "client_acks_sent"), 0);
  // Expect: N peers, N server RPCs in service, N requests held by the application.
  EXPECT_EQ(IntExtra(*result, "server_peers"), static_cast<int64_t>(kPeers));
  EXPECT_EQ(IntExtra(*result, "server_rpcs"), static_cast<int64_t>(kPeers));
  EXPECT_EQ(IntExtra(*result, "server_requests_held"), static_cast<int64_t>(kPeers));
  const int64_t per_peer = IntExtra(*result, "server_state_bytes_per_peer");
  const int64_t per_rpc = IntExtra(*result, "server_state_bytes_per_server_rpc");
  EXPECT_LE(per_rpc, 1024);  // the target
  EXPECT_EQ(IntExtra(*result, "server_state_total_bytes"),
            static_cast<int64_t>(kPeers) * (per_peer + per_rpc));
}

}  // namespace
}  // namespace homarpc::bench
