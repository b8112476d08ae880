// Conformance of whole-message delivery on the in-memory fabric: the sizes that stress
// packetization (0 B, 1 B, one packet, one packet + 1, 1 MiB, 64 MiB) arrive byte-exact, and
// many peers talk to one server at once. The same cases run over real sockets, for both I/O
// backends, in endpoint_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/transport/engine_harness.h"
#include "tests/transport/fabric_engine.h"

namespace homarpc::transport {
namespace {

using testing::Bytes;
using testing::FabricHost;

constexpr size_t kPayload = 1416;

struct FabricConformance : ::testing::Test {
  FabricConformance() : fabric(&clock, FabricOptions{}) {
    config.link_mbps = 0;
    server = std::make_unique<FabricHost>(&fabric, &clock,
                                          Address::Parse("10.0.0.100:5000").value(), config, true);
  }
  FabricHost* AddClient(int i) {
    clients.push_back(std::make_unique<FabricHost>(
        &fabric, &clock,
        Address::Parse("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
                       ":40000")
            .value(),
        config, false));
    return clients.back().get();
  }
  ManualClock clock;
  Fabric fabric;
  Config config;
  std::unique_ptr<FabricHost> server;
  std::vector<std::unique_ptr<FabricHost>> clients;
};

TEST_F(FabricConformance, Conformance_SizesArriveByteExact) {
  FabricHost* client = AddClient(0);
  const size_t sizes[] = {0, 1, kPayload, kPayload + 1, size_t{1} << 20, size_t{64} << 20};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    Buffer req = Bytes(sizes[i], static_cast<uint8_t>(i + 3));
    std::string expect(req.view());
    ASSERT_TRUE(client->engine().SendRequest(server->address(), std::move(req), i).ok());
    ASSERT_TRUE(fabric.RunUntil([&] { return client->completions.count(i) > 0; },
                                10 * kNanosPerSecond))
        << "size " << sizes[i];
    ASSERT_TRUE(client->results[i].ok()) << client->results[i].status();
    EXPECT_TRUE(*client->results[i] == expect) << "size " << sizes[i] << " corrupted";
  }
}

TEST_F(FabricConformance, Conformance_ManyPeersManyRpcs) {
  // 200 clients, 20 RPCs each in flight at once: 4000 concurrent RPCs.
  constexpr int kClients = 200, kPerClient = 20;
  for (int i = 0; i < kClients; ++i) {
    FabricHost* c = AddClient(i);
    for (int j = 0; j < kPerClient; ++j) {
      ASSERT_TRUE(c->engine()
                      .SendRequest(server->address(), Bytes(50 + (i * 37 + j * 101) % 5000),
                                   static_cast<uint64_t>(j))
                      .ok());
    }
  }
  auto done = [&] {
    for (auto& c : clients) {
      if (c->completions.size() != kPerClient) return false;
    }
    return true;
  };
  ASSERT_TRUE(fabric.RunUntil(done, 30 * kNanosPerSecond));
  for (auto& c : clients) {
    for (auto& [cookie, r] : c->results) ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(server->requests, uint64_t{kClients} * kPerClient);
  fabric.RunFor(kNanosPerSecond);
  EXPECT_EQ(server->engine().stats().server_rpcs, 0u);
}

}  // namespace
}  // namespace homarpc::transport
