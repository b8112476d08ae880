// idle_peers: the memory scenarios "idle-peers" and "inflight-rpcs" of homarpc-bench, and the
// homarpc system that runs them.
//
// They measure what a homarpc server holds per client, against the targets: peak RSS
// of a server that knows 10,000 idle peers at most 64 MiB, and at most 1 KiB of protocol state
// per known peer and per in-flight small RPC. The size axis is the NUMBER OF PEERS N, not bytes;
// every request and response is kPeerMessageBytes long.
//
//   idle-peers     N client sockets (N distinct source ports, so N peers to the server) each
//                  complete one RPC — request, response, ACK — and then stay silent. The server
//                  ends holding N idle peers and no RPCs.
//   inflight-rpcs  N client sockets each send one request that the server takes into service
//                  and never answers. The server ends holding N peers and N RPCs in service.
//
// Server (Serve): a homarpc Endpoint — one loop thread, default Config, pacing off, io_backend/
// spin_us/mtu from the point — echoing each request (idle-peers) or keeping it unanswered
// (inflight-rpcs). When told to stop it reports, from its own accounting: EngineStats::peers and
// ::server_rpcs, EngineMemory, and how much its resident set grew after Ready(). The harness adds
// server_peak_rss_kb.
//
// Client (RunClient): no homarpc endpoint, but N raw UDP sockets that speak just enough Homa
// (packets built with transport/wire.h, client RPC id 2 on every socket) to create the server
// state, with bounded retries for lost packets, up to point.concurrency peers being set up at
// once; then it holds every socket open and idle for max(point.duration_ns, kMinHoldMillis)
// so that the server's once-a-second peer statistics are fresh when it reports. Samples: one
// latency per peer (first request sent -> response, or -> BUSY for inflight-rpcs).
// Iterations and warmup do not apply and are ignored.
//
// The System is stateless and const; each half runs in its own process (system.h).
#ifndef HOMARPC_TOOLS_BENCH_IDLE_PEERS_H_
#define HOMARPC_TOOLS_BENCH_IDLE_PEERS_H_

#include <cstdint>
#include <string>

#include "tools/bench/system.h"

namespace homarpc::bench {

inline constexpr const char kIdlePeers[] = "idle-peers";
inline constexpr const char kInflightRpcs[] = "inflight-rpcs";
// Request and response payload of every RPC in these scenarios.
inline constexpr uint64_t kPeerMessageBytes = 64;
// Most peers per point: the client needs one ephemeral port per peer (Linux's default range,
// 32768..60999, holds 28232) and the server's default Config::max_peers is 100000.
inline constexpr uint64_t kMaxPeers = 25000;
// Shortest idle hold after the last peer was set up: the engine refreshes EngineStats::peers
// once a second, and server RPC tombstones expire after 2 x timeout_ticks (200 ms).
inline constexpr int64_t kMinHoldMillis = 1500;

// What the client leaves on the server for each peer.
enum class PeerLoad {
  kIdle,      // one finished, acknowledged RPC: an idle peer
  kInFlight,  // one request in service, never answered
};

class HomarpcPeers final : public System {
 public:
  explicit HomarpcPeers(PeerLoad load) : load_(load) {}

  std::string name() const override { return "homarpc"; }
  bool is_floor() const override { return false; }
  // Skips N = 0 and N > kMaxPeers.
  std::string SkipReason(const Point& point) const override;
  absl::Status Serve(const Point& point, ServerEnv& env) const override;
  // Errors: RESOURCE_EXHAUSTED (cannot raise RLIMIT_NOFILE to N + slack; the server refused a
  // request), UNAVAILABLE (the server went away: ICMP port unreachable), DEADLINE_EXCEEDED (a
  // peer got no answer after every retry), socket errors.
  absl::StatusOr<ClientSamples> RunClient(const Point& point, uint16_t server_port) const override;

 private:
  PeerLoad load_;
};

// Adds the idle-peers and inflight-rpcs scenarios, each with its "homarpc" system.
void RegisterPeerScenarios(Registry& registry);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_IDLE_PEERS_H_
