// rpc_scenarios: registers `unary` and `throughput` and their systems (see rpc_scenarios.h).
#include "tools/bench/rpc_scenarios.h"

#include <algorithm>
#include <climits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "tools/bench/grpc_echo.h"
#include "tools/bench/homarpc_rpc_echo.h"
#include "tools/bench/tcp_floor.h"
#include "tools/bench/udp_floor.h"

namespace homarpc::bench {

absl::StatusOr<HomarpcExecutor> ParseExecutor(absl::string_view text) {
  if (text == "inline") return HomarpcExecutor::kInline;
  if (text == "pool") return HomarpcExecutor::kPool;
  if (text == "pool-only") return HomarpcExecutor::kPoolOnly;
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not one of inline, pool, pool-only"));
}

const char* ExecutorName(HomarpcExecutor executor) {
  switch (executor) {
    case HomarpcExecutor::kInline:
      return "inline";
    case HomarpcExecutor::kPool:
      return "pool";
    case HomarpcExecutor::kPoolOnly:
      return "pool-only";
  }
  return "unknown";
}

void RegisterRpcScenarios(Registry& registry, const RpcOptions& options) {
  auto echo = [](uint64_t size) { return size; };
  registry.AddScenario(kUnary,
                       "Blocking unary Echo calls (request and response of `size` payload "
                       "bytes), homarpc against gRPC C++; ratios are homarpc ÷ grpc. "
                       "udp-floor is two processes ping-ponging one raw datagram each way, "
                       "busy-polling (up to 64 KB): what the kernel and this machine allow any "
                       "RPC system, measured in the same run. tcp-floor is the same echo over "
                       "a loopback TCP connection, blocking (64 KiB and up): the bulk floor.",
                       echo);
  registry.AddSystem(kUnary, NewGrpcUnary());
  registry.AddSystem(kUnary, NewHomarpcUnary(options.executor));
  registry.AddSystem(kUnary, std::make_unique<UdpFloor>(UdpFloor::Wait::kBusyPoll));
  registry.AddSystem(kUnary,
                     std::make_unique<UdpFloor>(UdpFloor::Wait::kBusyPoll, /*with_work=*/true));
  registry.AddSystem(kUnary, std::make_unique<TcpFloor>());
  registry.AddScenario(kThroughput,
                       "Callback Echo calls, `conc` kept in flight by one client (each "
                       "completion starts the next), homarpc against gRPC C++; ratios are "
                       "homarpc ÷ grpc.",
                       echo);
  registry.AddSystem(kThroughput, NewGrpcThroughput());
  registry.AddSystem(kThroughput, NewHomarpcThroughput());
}

bool IsRpcScenario(absl::string_view scenario) {
  return scenario == kUnary || scenario == kThroughput;
}

std::string DefaultSizes(absl::string_view scenario) {
  if (scenario == kUnary) return "64,1K,16K,1M";
  if (scenario == kThroughput) return "64";
  return "";
}

std::string DefaultConcurrency(absl::string_view scenario) {
  if (scenario == kThroughput) return "1,8,32,128";
  return "";
}

int MessageLimitFor(const Point& point) {
  constexpr uint64_t kDefaultLimit = 4 * 1024 * 1024;  // gRPC's and homarpc's default
  const uint64_t largest = std::max(point.request_bytes, point.response_bytes) + 64 * 1024;
  return static_cast<int>(std::min<uint64_t>(std::max(largest, kDefaultLimit), INT_MAX));
}

}  // namespace homarpc::bench
