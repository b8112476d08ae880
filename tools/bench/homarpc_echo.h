// homarpc_echo: the Homa transport itself as a transport-echo system for homarpc-bench.
//
// Server: an Endpoint with one loop thread that answers each request on the loop thread with
// a message of point.response_bytes (the request itself, moved, when sizes match). Client: an
// inline-loop Endpoint (the measuring thread drives the loop: no thread hand-off per RPC) that
// keeps point.concurrency requests in flight. The transport is configured from the point's
// settings: io_backend, spin_us -> Config::poll_usecs, mtu -> Config::mtu; pacing is off
// (link_mbps = 0) because loopback has no NIC queue to protect.
#ifndef HOMARPC_TOOLS_BENCH_HOMARPC_ECHO_H_
#define HOMARPC_TOOLS_BENCH_HOMARPC_ECHO_H_

#include "tools/bench/system.h"

namespace homarpc::bench {

class HomarpcEcho final : public System {
 public:
  std::string name() const override { return "homarpc"; }
  bool is_floor() const override { return false; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override;
  absl::StatusOr<ClientSamples> RunClient(const Point& point, uint16_t server_port) const override;
};

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_HOMARPC_ECHO_H_
