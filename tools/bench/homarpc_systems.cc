// homarpc_systems: homarpc's systems for homarpc-bench (see homarpc_systems.h).
//
// Each homarpc system lives in its own file; this one only registers them.
#include "tools/bench/homarpc_systems.h"

#include <memory>

#include "tools/bench/homarpc_echo.h"
#include "tools/bench/idle_peers.h"
#include "tools/bench/transport_echo.h"

namespace homarpc::bench {

void RegisterHomarpcSystems(Registry& registry) {
  registry.AddSystem(kTransportEcho, std::make_unique<HomarpcEcho>());
  // Memory scenarios (idle peers, in-flight RPCs): they exist only for homarpc, so they are
  // added here with their system rather than in main().
  RegisterPeerScenarios(registry);
}

}  // namespace homarpc::bench
