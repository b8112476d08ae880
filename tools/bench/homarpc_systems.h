// homarpc_systems: where homarpc's own systems join homarpc-bench's registry.
//
// main() calls RegisterHomarpcSystems() after the scenarios and their floors are registered,
// so it can add systems to any existing scenario (e.g. "homarpc" to "transport-echo"). This is
// the only file that needs to change to plug homarpc in; the harness, flags and reports pick
// a new system up by itself.
#ifndef HOMARPC_TOOLS_BENCH_HOMARPC_SYSTEMS_H_
#define HOMARPC_TOOLS_BENCH_HOMARPC_SYSTEMS_H_

#include "tools/bench/system.h"

namespace homarpc::bench {

// Adds homarpc's systems to the scenarios already in `registry`.
void RegisterHomarpcSystems(Registry& registry);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_HOMARPC_SYSTEMS_H_
