// The transport's conformance suite: one set of cases run against every implementation of
// whole-message delivery (see conformance_env.h):
//   fabric  protocol engines on the in-memory fabric, virtual time
//   uring   Endpoints over UDP on loopback, io_uring backend
//   epoll   Endpoints over UDP on loopback, epoll backend
// Each case: messages at the sizes that stress packetization arrive byte-exact; thousands of
// RPCs in flight at once from one client; many peers at once. After each, the server must end
// up holding no RPC state (clients' ACKs release it within a tick or two).
//
// What only one implementation can show stays with it: exact packets in engine_test.cc, faults
// in chaos_test.cc and udp_chaos_test.cc, Endpoint's API contract in endpoint_test.cc.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/transport/conformance_env.h"
#include "transport/buffer.h"
#include "transport/config.h"
#include "transport/io_backend.h"

namespace homarpc::transport {
namespace {

using testing::ConformanceEnv;
using testing::FabricEnv;
using testing::Mismatch;
using testing::Pattern;
using testing::SocketEnv;

// Outcomes of a batch of RPCs whose callbacks all run on the test thread.
struct Tally {
  int done = 0;
  int correct = 0;
  std::vector<std::string> failures;  // the first few, for the failure message
};

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ConformanceEnv>> env;
    if (GetParam() == "fabric") {
      env = std::unique_ptr<ConformanceEnv>(std::make_unique<FabricEnv>());
    } else {
      env = SocketEnv::Create(GetParam() == "uring" ? IoKind::kUring : IoKind::kEpoll);
    }
    if (GetParam() == "uring" && absl::IsFailedPrecondition(env.status())) {
      GTEST_SKIP() << "io_uring unavailable on this kernel: " << env.status();
    }
    ASSERT_TRUE(env.ok()) << env.status();
    env_ = std::move(*env);
  }

  // Starts an RPC from `client` carrying Pattern(size, seed) and records its outcome in `tally`.
  void SendChecked(int client, size_t size, uint64_t seed, Tally* tally) {
    env_->Send(client, Pattern(size, seed), [=](absl::StatusOr<Buffer> r) {
      ++tally->done;
      const std::string wrong = Mismatch(r, size, seed);
      if (wrong.empty()) {
        ++tally->correct;
      } else if (tally->failures.size() < 5) {
        tally->failures.push_back("size " + std::to_string(size) + ": " + wrong);
      }
    });
  }

  // The server forgets every RPC once its client has the response, because the client
  // acknowledged it (on its next tick), not because the server gave up waiting for that.
  void ExpectServerForgetsEveryRpc() {
    EXPECT_TRUE(env_->RunUntil([&] { return env_->ServerStats().server_rpcs == 0; }))
        << env_->ServerStats().server_rpcs << " server RPCs still held";
    EXPECT_EQ(env_->ServerStats().server_rpcs_abandoned, 0u);
  }

  // Callbacks capture the test body's locals; the env silences them before it tears down
  // (conformance_env.h), so a case that stops early does not leave them dangling.
  std::unique_ptr<ConformanceEnv> env_;
};

std::string Failures(const Tally& t) {
  std::string s;
  for (const std::string& f : t.failures) s += "\n  " + f;
  return s;
}

TEST_P(ConformanceTest, Conformance_SizesArriveByteExact) {
  ASSERT_TRUE(env_->AddClients(1).ok());
  // Empty, one byte, exactly one packet, one packet and a byte of the next, a many-packet
  // message past the unscheduled bytes (so grants are needed), and the largest message the
  // default config allows. One at a time, so each has the network to itself.
  const size_t packet = Config().PayloadPerPacket(/*ipv6=*/false);
  const size_t sizes[] = {0, 1, packet, packet + 1, size_t{1} << 20,
                          size_t{Config().max_message_length}};
  ASSERT_EQ(sizes[5], size_t{64} << 20);
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const uint64_t seed = i + 1;
    std::optional<absl::StatusOr<Buffer>> got;
    env_->Send(0, Pattern(sizes[i], seed), [&](absl::StatusOr<Buffer> r) { got = std::move(r); });
    ASSERT_TRUE(env_->RunUntil([&] { return got.has_value(); })) << "size " << sizes[i];
    // Expect: the echo is the request, byte for byte.
    EXPECT_EQ(Mismatch(*got, sizes[i], seed), "") << "size " << sizes[i];
  }
  EXPECT_EQ(env_->ServerStats().requests_delivered, std::size(sizes));
  ExpectServerForgetsEveryRpc();
}

TEST_P(ConformanceTest, Conformance_ThousandsOfConcurrentRpcs) {
  ASSERT_TRUE(env_->AddClients(1).ok());
  // 2000 RPCs started before any is driven, so all are in flight at once: mostly small
  // (1 B to 4 KB, one to three packets), and every 200th one 100 KB or more, which needs
  // grants while thousands of small ones compete with it.
  constexpr int kRpcs = 2000;
  Tally tally;
  for (int i = 0; i < kRpcs; ++i) {
    const size_t size = i % 200 == 0 ? 100000 + size_t(i) * 61 : 1 + (size_t(i) * 131) % 4000;
    SendChecked(0, size, /*seed=*/i + 1, &tally);
  }
  ASSERT_TRUE(env_->RunUntil([&] { return tally.done >= kRpcs; }))
      << tally.done << " of " << kRpcs << " completed" << Failures(tally);
  // Expect: each response is its own request's bytes (seeds differ), and each request was
  // executed exactly once.
  EXPECT_EQ(tally.correct, kRpcs) << Failures(tally);
  EXPECT_EQ(env_->ServerStats().requests_delivered, uint64_t{kRpcs});
  ExpectServerForgetsEveryRpc();
}

TEST_P(ConformanceTest, Conformance_ManyPeers) {
  // 50 clients, each its own address, each with 20 RPCs in flight: 1000 at once.
  constexpr int kClients = 50, kPerClient = 20;
  ASSERT_TRUE(env_->AddClients(kClients).ok());
  Tally tally;
  for (int c = 0; c < kClients; ++c) {
    for (int j = 0; j < kPerClient; ++j) {
      SendChecked(c, 10 + (size_t(c) * 131 + size_t(j) * 977) % 6000,
                  /*seed=*/c * kPerClient + j + 1, &tally);
    }
  }
  ASSERT_TRUE(env_->RunUntil([&] { return tally.done >= kClients * kPerClient; }))
      << tally.done << " of " << kClients * kPerClient << " completed" << Failures(tally);
  EXPECT_EQ(tally.correct, kClients * kPerClient) << Failures(tally);
  EXPECT_EQ(env_->ServerStats().requests_delivered, uint64_t{kClients} * kPerClient);
  ExpectServerForgetsEveryRpc();
  // Expect: the server really had 50 distinct peers. (The engine refreshes this gauge when it
  // collects idle peers, once a second, hence the wait.)
  EXPECT_TRUE(env_->RunUntil([&] { return env_->ServerStats().peers >= uint64_t{kClients}; }));
  EXPECT_EQ(env_->ServerStats().peers, uint64_t{kClients});
}

INSTANTIATE_TEST_SUITE_P(Implementations, ConformanceTest,
                         ::testing::Values("fabric", "uring", "epoll"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace homarpc::transport
