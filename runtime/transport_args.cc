#include "runtime/transport_args.h"

#include <optional>
#include <string>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "transport/wire.h"

namespace homarpc::internal {

uint32_t MessageLengthFor(int64_t payload_limit) {
  const uint64_t payload =
      payload_limit < 0 ? kUnlimitedPayloadBytes : static_cast<uint64_t>(payload_limit);
  return static_cast<uint32_t>(
      std::min<uint64_t>(payload + kEnvelopeRoom, transport::wire::kMaxWireMessageLength));
}

absl::Status ApplyTransportArgs(const ChannelArguments& args, UdpTransportOptions* options) {
  transport::Config& config = options->endpoint.config;
  const int spin_us = args.GetInt(kArgSpinMicros, static_cast<int>(config.poll_usecs));
  if (spin_us < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kArgSpinMicros, " must not be negative"));
  }
  config.poll_usecs = static_cast<uint32_t>(spin_us);

  const int mtu = args.GetInt(kArgMtu, 0);
  if (mtu < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kArgMtu, " must be 0 (the route's MTU) or positive"));
  }
  config.SetMtuOrRoute(static_cast<uint32_t>(mtu));

  const int link_mbps = args.GetInt(kArgLinkMbps, static_cast<int>(config.link_mbps));
  if (link_mbps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kArgLinkMbps, " must not be negative"));
  }
  config.link_mbps = static_cast<uint32_t>(link_mbps);
  config.FitToLink();  // slow links: later RESENDs, fewer bytes in flight

  const int direct = args.GetInt(kArgDirectSend, config.direct_send ? 1 : 0);
  if (direct != 0 && direct != 1) {
    return absl::InvalidArgumentError(absl::StrCat(kArgDirectSend, " must be 0 or 1"));
  }
  config.direct_send = direct == 1;

  const int pace_local = args.GetInt(kArgPaceLocal, config.pace_local ? 1 : 0);
  if (pace_local != 0 && pace_local != 1) {
    return absl::InvalidArgumentError(absl::StrCat(kArgPaceLocal, " must be 0 or 1"));
  }
  config.pace_local = pace_local == 1;

  if (const std::string* io = args.GetString(kArgIoBackend); io != nullptr) {
    const std::optional<transport::IoKind> kind = transport::ParseIoKind(*io);
    if (!kind.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kArgIoBackend, " must be auto, uring or epoll, not '", *io, "'"));
    }
    options->endpoint.io.kind = *kind;
  }
  const int caller_sockets = args.GetInt(kArgCallerSockets, kDefaultCallerSockets);
  if (caller_sockets < 0 || caller_sockets > kMaxCallerSockets) {
    return absl::InvalidArgumentError(absl::StrCat(kArgCallerSockets, " must be in [0, ",
                                                   kMaxCallerSockets, "], got ",
                                                   caller_sockets));
  }
  options->caller_sockets = static_cast<uint32_t>(caller_sockets);

  // The config's own checks (an MTU too small for a packet, ...) name the field.
  return config.Validate();
}

}  // namespace homarpc::internal
