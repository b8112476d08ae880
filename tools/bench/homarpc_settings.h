// homarpc_settings: how homarpc-bench hands a point's transport settings (RunSettings,
// system.h) to homarpc, as the same channel arguments on a client channel and on a server,
// and how it reports a failed homarpc call.
// Shared by the RPC scenarios (homarpc_rpc_echo.cc) and the load scenarios (load_homarpc.cc),
// so both measure homarpc configured alike.
//
// Internal to tools/bench; header-only. Called on whichever thread builds the channel or the
// server.
#ifndef HOMARPC_TOOLS_BENCH_HOMARPC_SETTINGS_H_
#define HOMARPC_TOOLS_BENCH_HOMARPC_SETTINGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "homarpc/homarpc.h"
#include "tools/bench/system.h"

namespace homarpc::bench {

namespace homarpc_settings_internal {

template <typename SetInt, typename SetString>
void Apply(const RunSettings& settings, SetInt set_int, SetString set_string) {
  set_int(homarpc::kArgSpinMicros, static_cast<int>(settings.spin_us));
  set_int(homarpc::kArgMtu, static_cast<int>(settings.mtu));
  set_string(homarpc::kArgIoBackend, settings.io_backend);
  if (settings.link_mbps >= 0) set_int(homarpc::kArgLinkMbps, static_cast<int>(settings.link_mbps));
  set_int(homarpc::kArgPaceLocal, settings.pace_local ? 1 : 0);
  set_int(homarpc::kArgDirectSend, settings.direct_send ? 1 : 0);
}

}  // namespace homarpc_settings_internal

// Sets kArgSpinMicros (--spin_us), kArgMtu (--mtu), kArgIoBackend (--io_backend),
// kArgDirectSend (--direct_send), kArgPaceLocal (--pace_local) and kArgLinkMbps (--link_mbps,
// the pacing rate: left at the transport's default on loopback, whose data the default does
// not pace; on the testbed the shaped link's rate, since a faster pacer overruns the switch
// queue).
inline void ApplySettings(const RunSettings& settings, homarpc::ChannelArguments* args) {
  homarpc_settings_internal::Apply(
      settings, [args](const char* key, int value) { args->SetInt(key, value); },
      [args](const char* key, const std::string& value) { args->SetString(key, value); });
}

inline void ApplySettings(const RunSettings& settings, homarpc::ServerBuilder* builder) {
  homarpc_settings_internal::Apply(
      settings, [builder](const char* key, int value) { builder->AddChannelArgument(key, value); },
      [builder](const char* key, const std::string& value) {
        builder->AddChannelArgument(key, value);
      });
}

// A failed call as the point's error; homarpc's codes are gRPC's, which are absl's.
inline absl::Status HomarpcCallError(const homarpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("homarpc: ", status.error_message()));
}

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_HOMARPC_SETTINGS_H_
