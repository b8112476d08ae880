// homarpc_rpc_echo: homarpc's RPC runtime as the measured system of the `unary` and
// `throughput` scenarios (rpc_scenarios.h), on the same Echo proto as gRPC (grpc_echo.h).
//
// Server: ServerBuilder on 127.0.0.1:0, one loop (SetNumLoops(1)).
//   unary:      sync Echo::Service on the executor chosen by --executor: the default
//               ServerExecutor::kWorkerPool (the echo, being quick, runs on the loop thread
//               with a standby ready), kInline, or kWorkerPoolOnly (a worker per call).
//   throughput: Echo::CallbackService, finished inline on the loop thread.
// Client: CreateCustomChannel("127.0.0.1:<port>") — one Homa endpoint with its loop thread —
// and the generated stub: blocking stub->Echo() (unary) or stub->async()->Echo() (throughput).
// Both sides take the point's settings as channel arguments (homarpc_settings.h: --spin_us,
// --mtu, --io_backend, --link_mbps). Message limits: MessageLimitFor().
//
// Only this file's .cc includes homarpc's generated echo header (package
// homarpc.bench.homa_echo); see echo.proto.
#ifndef HOMARPC_TOOLS_BENCH_HOMARPC_RPC_ECHO_H_
#define HOMARPC_TOOLS_BENCH_HOMARPC_RPC_ECHO_H_

#include <memory>

#include "tools/bench/rpc_scenarios.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

std::unique_ptr<System> NewHomarpcUnary(HomarpcExecutor executor);
std::unique_ptr<System> NewHomarpcThroughput();

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_HOMARPC_RPC_ECHO_H_
