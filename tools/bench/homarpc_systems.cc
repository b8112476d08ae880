// homarpc_systems: homarpc's systems for homarpc-bench (see homarpc_systems.h).
//
// REGISTRATION POINT — for now this registers nothing: the transport has no client/server API
// to drive yet. To add the Homa transport echo once it does:
//   1. Write `class HomarpcEcho final : public System` (its own .h/.cc in tools/bench/):
//      name() "homarpc", is_floor() false;
//      Serve(): build the transport from point.settings (io_backend "auto"/"uring"/"epoll",
//        spin_us -> Config::poll_usecs, mtu -> Config::mtu), bind 127.0.0.1:0, call
//        env.Ready(port), answer every request message with a response message of
//        point.response_bytes bytes, until env.ShouldStop() (wait at most kStopCheckMillis
//        at a time so the flag is seen);
//      RunClient(): keep point.concurrency requests of point.request_bytes in flight; run
//        point.warmup unrecorded RPCs, then record each RPC's latency until point.iterations
//        RPCs or point.duration_ns; set payload_bytes (request + response bytes per measured
//        RPC) and elapsed_ns; add transport counters (retransmissions, ...) as extras.
//   2. Here: registry.AddSystem(kTransportEcho, std::make_unique<HomarpcEcho>());
//   3. In tools/CMakeLists.txt: add its .cc to homarpc_bench_lib and link homarpc_transport_all.
#include "tools/bench/homarpc_systems.h"

namespace homarpc::bench {

void RegisterHomarpcSystems(Registry& registry) {
  // Nothing yet; see the steps above.
}

}  // namespace homarpc::bench
