// grpc_status: how homarpc-bench reports a failed gRPC call, shared by the RPC scenarios
// (grpc_echo.cc) and the load scenarios (load_grpc.cc). Internal to tools/bench; header-only;
// any thread.
#ifndef HOMARPC_TOOLS_BENCH_GRPC_STATUS_H_
#define HOMARPC_TOOLS_BENCH_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace homarpc::bench {

// A failed call as the point's error; gRPC's codes and absl's have the same numbers.
inline absl::Status GrpcCallError(const ::grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("grpc: ", status.error_message()));
}

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_GRPC_STATUS_H_
