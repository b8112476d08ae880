// Chaos: thousands of RPCs through the in-memory fabric under 5% drop, duplication and
// reordering. Each RPC must complete exactly once, with the right bytes or a clear error, and
// afterwards no RPC state may remain on either side. Deterministic: fixed seeds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/transport/engine_harness.h"
#include "tests/transport/fabric_engine.h"

namespace homarpc::transport {
namespace {

using testing::Bytes;
using testing::FabricHost;

struct ChaosCase {
  const char* name;
  double drop, duplicate, reorder;
  uint64_t seed;
};

class ChaosTest : public ::testing::TestWithParam<ChaosCase> {};

TEST_P(ChaosTest, Chaos_EveryRpcCompletesExactlyOnce) {
  const ChaosCase& c = GetParam();
  ManualClock clock;
  FabricOptions fo;
  fo.seed = c.seed;
  fo.drop_rate = c.drop;
  fo.duplicate_rate = c.duplicate;
  fo.reorder_rate = c.reorder;
  Fabric fabric(&clock, fo);
  Config config;
  config.link_mbps = 0;
  FabricHost server(&fabric, &clock, Address::Parse("10.0.0.100:5000").value(), config, true);
  std::vector<std::unique_ptr<FabricHost>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<FabricHost>(
        &fabric, &clock, Address::Parse("10.0.0." + std::to_string(i + 1) + ":40000").value(),
        config, false));
  }
  // 2000 RPCs, sizes from empty to multi-packet to a few large ones, from 8 clients.
  constexpr int kRpcs = 2000;
  std::vector<std::string> sent(kRpcs);
  for (int i = 0; i < kRpcs; ++i) {
    size_t size = (i % 97 == 0) ? 300000 : (i * 131) % 9000;
    Buffer req = Bytes(size, static_cast<uint8_t>(i));
    sent[i] = std::string(req.view());
    ASSERT_TRUE(clients[i % clients.size()]
                    ->engine()
                    .SendRequest(server.address(), std::move(req), static_cast<uint64_t>(i))
                    .ok());
  }
  auto completed = [&] {
    size_t n = 0;
    for (auto& cl : clients) n += cl->completions.size();
    return n;
  };
  ASSERT_TRUE(fabric.RunUntil([&] { return completed() == kRpcs; }, 60 * kNanosPerSecond))
      << "only " << completed() << " of " << kRpcs << " completed";
  int ok = 0;
  for (int i = 0; i < kRpcs; ++i) {
    FabricHost& cl = *clients[i % clients.size()];
    ASSERT_EQ(cl.completions[i], 1) << "rpc " << i;
    const absl::StatusOr<std::string>& r = cl.results[i];
    if (r.ok()) {
      ASSERT_EQ(*r, sent[i]) << "rpc " << i << " came back with the wrong bytes";
      ++ok;
    } else {
      // The only acceptable failure is a clear transport error.
      EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    }
  }
  // At 5% loss every RPC should get through: retries are cheap and timeouts long.
  EXPECT_EQ(ok, kRpcs);
  // No request ran twice, even with duplicated packets.
  EXPECT_EQ(server.requests, static_cast<uint64_t>(kRpcs));
  // Let acks, NEED_ACKs and timers finish; then nothing may be left on either side.
  fabric.RunFor(3 * kNanosPerSecond);
  EXPECT_EQ(server.engine().stats().server_rpcs, 0u);
  EXPECT_EQ(server.engine().stats().rx_bytes_held, 0u);
  for (auto& cl : clients) {
    EXPECT_EQ(cl->engine().stats().client_rpcs, 0u);
    EXPECT_EQ(cl->engine().stats().rx_bytes_held, 0u);
  }
  const FabricStats& fs = fabric.stats();
  if (c.drop > 0) {
    EXPECT_GT(fs.dropped_total(), 0u);
  }
  if (c.duplicate > 0) {
    EXPECT_GT(fs.duplicated, 0u);
  }
  if (c.reorder > 0) {
    EXPECT_GT(fs.reordered, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ChaosTest,
    ::testing::Values(ChaosCase{"clean", 0, 0, 0, 1}, ChaosCase{"drop5", 0.05, 0, 0, 2},
                      ChaosCase{"dup5", 0, 0.05, 0, 3}, ChaosCase{"reorder5", 0, 0, 0.05, 4},
                      ChaosCase{"all5", 0.05, 0.05, 0.05, 5},
                      ChaosCase{"all5_seed2", 0.05, 0.05, 0.05, 77}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace homarpc::transport
