// grpc_echo: gRPC C++ (1.51, the distribution's) as the baseline system of the `unary` and
// `throughput` scenarios (rpc_scenarios.h).
//
// Both sides use gRPC with its defaults except the message size limits (MessageLimitFor): an
// insecure channel to 127.0.0.1:<port> over loopback TCP, and a server on 127.0.0.1:0.
//   unary:      sync Echo::Service (gRPC's sync server: its own polling threads run the
//               handler); client: blocking stub->Echo() from DriveBlocking's caller threads.
//   throughput: Echo::CallbackService finishing inline with DefaultReactor(); client:
//               stub->async()->Echo() with std::function completions, on gRPC's threads.
// The systems report is_floor() = true: they are the baseline of these scenarios.
//
// Only this file's .cc includes gRPC's generated echo header (package
// homarpc.bench.grpc_echo); see echo.proto for why the two generated sets stay apart.
#ifndef HOMARPC_TOOLS_BENCH_GRPC_ECHO_H_
#define HOMARPC_TOOLS_BENCH_GRPC_ECHO_H_

#include <memory>

#include "tools/bench/system.h"

namespace homarpc::bench {

std::unique_ptr<System> NewGrpcUnary();
std::unique_ptr<System> NewGrpcThroughput();

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_GRPC_ECHO_H_
