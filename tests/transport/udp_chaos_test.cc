// Chaos over real sockets: an echo server Endpoint behind an ImpairmentProxy that drops,
// duplicates and reorders 5% of datagrams each way, and several client Endpoints sending 2000
// RPCs of 0 B to ~280 KB through it, for each I/O backend. Each RPC must complete exactly
// once, with the right bytes or a clear error (UNAVAILABLE); at 5% loss all should succeed;
// the server must run each request once; and once acks and timers have settled no RPC state
// may remain on either side. The fabric version (chaos_test.cc) checks the same on a manual
// clock; this one adds the kernel, both backends, GSO batches and real timers.
#include <arpa/inet.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/transport/impairment_proxy.h"
#include "transport/endpoint.h"

namespace homarpc::transport {
namespace {

using testing::ImpairmentOptions;
using testing::ImpairmentProxy;
using testing::ImpairmentStats;

// Failure guards, not timing assertions: the whole test takes a few seconds under ASan.
constexpr absl::Duration kCompletionGuard = absl::Seconds(90);
constexpr absl::Duration kSettleGuard = absl::Seconds(30);

constexpr int kRpcs = 2000;
constexpr int kClients = 4;
// RPCs each client keeps in flight (32 in all): enough to overlap loss recovery, few enough
// that the proxy, one thread on a shared 2-core machine, keeps up. Homa has no congestion
// control for a slow middlebox: offered load past what the proxy relays overflows its socket
// buffers, the losses trigger retransmissions, and the run collapses into timeouts (seen at
// 32 per client under ASan). That would test the proxy, not the transport.
constexpr int kWindow = 8;

// Request sizes: mostly under 9 KB, every 29th 40-80 KB (past unsched_bytes, so it needs
// grants), every 97th ~200-280 KB (many grants, and RESENDs when grants or data are lost),
// and a few empty.
size_t SizeOf(int i) {
  if (i % 97 == 0) return 200000 + (i % 5) * 20000;
  if (i % 29 == 0) return 41000 + (i * 977) % 40000;
  if (i % 250 == 1) return 0;
  return (i * 131) % 9000;
}
// Byte b of request i: its index in the first 4 bytes (when they fit), then a pattern.
uint8_t ByteOf(int i, size_t b) {
  if (b < 4) return static_cast<uint8_t>(static_cast<uint32_t>(i) >> (24 - 8 * b));
  return static_cast<uint8_t>(i * 13 + b * 7 + (b >> 8));
}
Buffer RequestOf(int i) {
  Buffer buf(SizeOf(i));
  for (size_t b = 0; b < buf.size(); ++b) buf.data()[b] = ByteOf(i, b);
  return buf;
}
bool Matches(int i, const Buffer& got) {
  if (got.size() != SizeOf(i)) return false;
  for (size_t b = 0; b < got.size(); ++b) {
    if (got.data()[b] != ByteOf(i, b)) return false;
  }
  return true;
}

struct UdpChaosTest : ::testing::TestWithParam<IoKind> {
  EndpointOptions Options() {
    EndpointOptions o;  // default Config (resends, limits) except the give-up time below
    // Resends run on the shipped schedule; only the abort after silence is stretched, as a
    // failure guard: CI runs two sanitized test binaries at once on two cores, where a loop
    // can be descheduled for longer than the default 100 ms and every RPC would then fail.
    o.config.timeout_ticks = 2000;
    o.io.kind = GetParam();
    o.io.bind_address = Address::Loopback4(0);
    return o;
  }
};

TEST_P(UdpChaosTest, UdpChaos_EveryRpcCompletesExactlyOnce) {
  // State first, so it outlives every endpoint (their destructors may still run callbacks).
  std::vector<std::atomic<int>> delivered(kRpcs);   // server: deliveries per request index
  std::atomic<int> delivered_unindexed{0};          // server: requests too short to carry one
  std::vector<std::atomic<int>> completions(kRpcs); // client: callbacks per RPC
  std::atomic<int> ok{0}, wrong_bytes{0}, finished{0};
  std::atomic<bool> stopping{false};
  absl::Notification all_done;
  absl::Mutex errors_mu;
  std::vector<std::pair<int, absl::Status>> errors;  // guarded by errors_mu: failed RPCs
  std::vector<std::atomic<int>> next(kClients);  // per client: the next RPC index to send
  std::function<void(int)> issue;                 // sends client c's next RPC, if any

  // Given: an echo server. Its handler replies from the loop thread.
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  auto server_or = Endpoint::Create(Options(), [&, self](IncomingRequest r) {
    if (r.payload.size() >= 4) {
      uint32_t be;
      std::memcpy(&be, r.payload.data(), 4);
      const uint32_t index = ntohl(be);
      if (index < static_cast<uint32_t>(kRpcs)) delivered[index].fetch_add(1);
    } else {
      delivered_unindexed.fetch_add(1);
    }
    Buffer echo = std::move(r.payload);
    self->load()->Reply(r, std::move(echo));
  });
  if (!server_or.ok() && GetParam() == IoKind::kUring &&
      server_or.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "io_uring unavailable here: " << server_or.status();
  }
  ASSERT_TRUE(server_or.ok()) << server_or.status();
  std::unique_ptr<Endpoint> server = std::move(*server_or);
  self->store(server.get());

  // And: a proxy in front of it, 5% drop + 5% duplicate + 5% reorder each way.
  ImpairmentOptions po;
  po.server = server->local_address();
  po.seed = GetParam() == IoKind::kUring ? 11 : 12;
  po.drop_rate = 0.05;
  po.duplicate_rate = 0.05;
  po.reorder_rate = 0.05;
  ImpairmentProxy proxy(po);
  ASSERT_TRUE(proxy.Start().ok());

  std::vector<std::unique_ptr<Endpoint>> clients;
  for (int c = 0; c < kClients; ++c) {
    auto client = Endpoint::Create(Options());
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(std::move(*client));
  }

  // When: each client sends RPCs i = c, c + kClients, ... to the proxy, kWindow at a time;
  // each completion starts the client's next RPC (SendRequest is thread-safe, and posting from
  // the loop thread's own callback is allowed).
  for (int c = 0; c < kClients; ++c) next[c].store(c);
  issue = [&](int c) {
    const int i = next[c].fetch_add(kClients);
    if (i >= kRpcs || stopping.load()) return;
    clients[c]->SendRequest(proxy.address(), RequestOf(i),
                            [&, c, i](absl::StatusOr<Buffer> r) {
                              completions[i].fetch_add(1);
                              if (r.ok()) {
                                if (Matches(i, *r)) {
                                  ok.fetch_add(1);
                                } else {
                                  wrong_bytes.fetch_add(1);
                                }
                              } else {
                                absl::MutexLock lock(&errors_mu);
                                errors.emplace_back(i, r.status());
                              }
                              if (finished.fetch_add(1) + 1 == kRpcs) all_done.Notify();
                              issue(c);
                            });
  };
  for (int c = 0; c < kClients; ++c) {
    for (int w = 0; w < kWindow; ++w) issue(c);
  }

  // Then: every RPC completes.
  const bool completed = all_done.WaitForNotificationWithTimeout(kCompletionGuard);
  stopping.store(true);
  ASSERT_TRUE(completed) << "only " << finished.load() << " of " << kRpcs << " completed";
  // Exactly once each, with the bytes sent (the server echoes).
  std::vector<int> not_once;
  for (int i = 0; i < kRpcs; ++i) {
    if (completions[i].load() != 1) not_once.push_back(i);
  }
  EXPECT_TRUE(not_once.empty()) << not_once.size() << " RPCs did not complete exactly once, "
                                << "first: rpc " << not_once.front() << " completed "
                                << completions[not_once.front()].load() << " times";
  EXPECT_EQ(wrong_bytes.load(), 0) << "responses came back with the wrong bytes";
  std::vector<bool> failed(kRpcs, false);
  {
    absl::MutexLock lock(&errors_mu);
    // The only acceptable failure is a clear transport error; at 5% loss there should be none.
    for (const auto& [i, status] : errors) {
      failed[i] = true;
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << "rpc " << i << ": " << status;
    }
    EXPECT_EQ(ok.load(), kRpcs) << errors.size() << " failed, first: rpc " << errors.front().first
                                << ": " << errors.front().second;
  }
  // The server ran each request at most once, despite duplicated packets and retransmissions,
  // and every request that got its response exactly once.
  std::vector<int> wrong_deliveries;
  int unindexed_expected = 0, delivered_total = 0;
  for (int i = 0; i < kRpcs; ++i) {
    if (SizeOf(i) < 4) {
      ++unindexed_expected;
      continue;
    }
    const int n = delivered[i].load();
    delivered_total += n;
    if (n > 1 || (n == 0 && !failed[i])) wrong_deliveries.push_back(i);
  }
  EXPECT_TRUE(wrong_deliveries.empty())
      << wrong_deliveries.size() << " requests delivered the wrong number of times, first: "
      << "request " << wrong_deliveries.front() << " delivered "
      << delivered[wrong_deliveries.front()].load() << " times";
  EXPECT_EQ(delivered_unindexed.load(), unindexed_expected);
  delivered_total += delivered_unindexed.load();
  EXPECT_EQ(server->stats().requests_delivered, static_cast<uint64_t>(delivered_total));
  EXPECT_EQ(server->stats().requests_delivered, static_cast<uint64_t>(kRpcs));

  // And: once acks, NEED_ACKs and timers have run, no RPC state remains on either side. Poll
  // the gauges; the deadline only guards against a hang.
  auto leftover = [&] {
    EngineStats s = server->stats();
    uint64_t n = s.server_rpcs + s.client_rpcs + s.rx_bytes_held;
    for (auto& c : clients) {
      EngineStats cs = c->stats();
      n += cs.client_rpcs + cs.server_rpcs + cs.rx_bytes_held;
    }
    return n;
  };
  const absl::Time settle_deadline = absl::Now() + kSettleGuard;
  while (leftover() != 0 && absl::Now() < settle_deadline) absl::SleepFor(absl::Milliseconds(10));
  EngineStats ss = server->stats();
  EXPECT_EQ(ss.server_rpcs, 0u);
  EXPECT_EQ(ss.rx_bytes_held, 0u);
  for (auto& c : clients) {
    EngineStats cs = c->stats();
    EXPECT_EQ(cs.client_rpcs, 0u);
    EXPECT_EQ(cs.rx_bytes_held, 0u);
  }

  // The network really was bad, both ways.
  ImpairmentStats ps = proxy.stats();
  for (const auto* d : {&ps.to_server, &ps.to_client}) {
    EXPECT_GT(d->dropped, 0u);
    EXPECT_GT(d->duplicated, 0u);
    EXPECT_GT(d->reordered, 0u);
  }
  EXPECT_EQ(ps.clients, static_cast<uint64_t>(kClients));
  uint64_t resends = ss.resends_sent, retransmits = ss.retransmitted_packets, restarts = 0,
           stale_unknowns = 0;
  for (auto& c : clients) {
    EngineStats cs = c->stats();
    resends += cs.resends_sent;
    retransmits += cs.retransmitted_packets;
    restarts += cs.restarts;
    stale_unknowns += cs.stale_rpc_unknowns;
  }
  EXPECT_GT(resends, 0u) << "loss was never repaired by RESEND";
  std::cout << "[ proxy    ] to_server: received " << ps.to_server.received << " dropped "
            << ps.to_server.dropped << " duplicated " << ps.to_server.duplicated
            << " reordered " << ps.to_server.reordered << "; to_client: received "
            << ps.to_client.received << " dropped " << ps.to_client.dropped << " duplicated "
            << ps.to_client.duplicated << " reordered " << ps.to_client.reordered << "\n"
            << "[ engines  ] resends " << resends << " retransmitted packets " << retransmits
            << " restarts " << restarts << " (stale RPC_UNKNOWNs ignored " << stale_unknowns
            << ") duplicate requests suppressed "
            << ss.duplicate_requests_suppressed << "\n";

  // Tear down in dependency order: nothing may call `issue` after the clients are gone.
  clients.clear();
  proxy.Stop();
  server.reset();
}

INSTANTIATE_TEST_SUITE_P(Backends, UdpChaosTest,
                         ::testing::Values(IoKind::kUring, IoKind::kEpoll),
                         [](const auto& info) { return std::string(IoKindName(info.param)); });

}  // namespace
}  // namespace homarpc::transport
