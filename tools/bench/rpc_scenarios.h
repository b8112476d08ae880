// rpc_scenarios: the RPC scenarios of homarpc-bench — homarpc against gRPC C++ on one Echo
// service (echo.proto), side by side in one run.
//
//   unary       blocking calls (`stub->Echo(&ctx, req, &resp)`), one caller thread per
//               --concurrency (default 1); sizes 64 B, 1 KiB, 16 KiB, 1 MiB by default.
//               Servers: gRPC's sync Echo::Service; homarpc's sync Echo::Service on its
//               default executor (--executor=inline: on the loop thread, no standby;
//               --executor=pool-only: every call handed to a worker).
//   throughput  callback calls (`stub->async()->Echo(&ctx, &req, &resp, done)`), --concurrency
//               calls kept in flight by one client, each completion starting the next call
//               (default 1,8,32,128 in flight, 64 B). Servers: both CallbackServices, the
//               handler finishing inline.
// The request carries `size` payload bytes and the response echoes them. The gRPC system is
// registered as a floor (System::is_floor), and so are unary's raw UDP ping-pong (up to 64 KB)
// and raw TCP echo (64 KiB and up); the report's `floor` column is the fastest of them at each
// point (report.h), gRPC in throughput. RatioTable() gives homarpc ÷ gRPC with p99 and p99.9,
// and each raw floor ÷ gRPC. Details and fairness notes:
// tools/bench/README.md.
//
// Registration happens once in main(), before any fork; nothing here starts gRPC or homarpc
// (they start in the forked server and client processes).
#ifndef HOMARPC_TOOLS_BENCH_RPC_SCENARIOS_H_
#define HOMARPC_TOOLS_BENCH_RPC_SCENARIOS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

inline constexpr const char kUnary[] = "unary";
inline constexpr const char kThroughput[] = "throughput";
// The systems' names in both scenarios.
inline constexpr const char kGrpcSystem[] = "grpc";
inline constexpr const char kHomarpcSystem[] = "homarpc";

// Where homarpc's sync handlers run in the `unary` scenario (ServerBuilder::SetExecutor).
enum class HomarpcExecutor {
  kInline,    // on the loop thread (ServerExecutor::kInline: the echo never blocks)
  kPool,      // homarpc's default, ServerExecutor::kWorkerPool: quick handlers on the loop
              // thread after its round, a standby thread ready to take the socket over
              // (the default here too)
  kPoolOnly,  // ServerExecutor::kWorkerPoolOnly: one hand-off per call to a worker thread
};

// "inline", "pool" or "pool-only"; otherwise INVALID_ARGUMENT with a message meant to follow "--executor: ".
absl::StatusOr<HomarpcExecutor> ParseExecutor(absl::string_view text);
const char* ExecutorName(HomarpcExecutor executor);

struct RpcOptions {
  HomarpcExecutor executor = HomarpcExecutor::kPool;
};

// Adds `unary` and `throughput` with their systems (grpc, the baseline, and homarpc).
void RegisterRpcScenarios(Registry& registry, const RpcOptions& options);

// True for the scenarios registered here.
bool IsRpcScenario(absl::string_view scenario);

// The default --sizes / --concurrency text of `scenario`, used when the flag is left empty;
// empty for scenarios without their own default (main() then uses transport-echo's).
std::string DefaultSizes(absl::string_view scenario);
std::string DefaultConcurrency(absl::string_view scenario);

// The message size limit both systems get for a point, on client and server: the larger
// payload plus 64 KiB for framing, but never below the 4 MiB both default to — so 1 MiB uses
// the defaults, and larger --sizes work on both.
int MessageLimitFor(const Point& point);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_RPC_SCENARIOS_H_
