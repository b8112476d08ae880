// Transport-level channel arguments, read the same way by channels and servers: how long
// waiting threads spin, the MTU, the I/O backend and the link rate the sender paces to.
// Internal; thread-compatible, no state.
#ifndef HOMARPC_RUNTIME_TRANSPORT_ARGS_H_
#define HOMARPC_RUNTIME_TRANSPORT_ARGS_H_

#include "absl/status/status.h"
#include "runtime/channel.h"
#include "runtime/message_transport.h"

namespace homarpc::internal {

// Applies kArgSpinMicros, kArgMtu, kArgIoBackend and kArgLinkMbps from `args` (absent keys
// keep the transport's defaults) to `options`. INVALID_ARGUMENT naming the key for a bad
// value (negative spin or link rate, non-positive MTU, an unknown backend); `options` may then
// be partly changed.
absl::Status ApplyTransportArgs(const ChannelArguments& args, UdpTransportOptions* options);

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_TRANSPORT_ARGS_H_
