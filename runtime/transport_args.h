// Transport-level channel arguments, read the same way by channels and servers: how long
// waiting threads spin, the MTU, the I/O backend, the link rate the sender paces to, and how
// many sockets a channel lends blocking callers.
// Internal; thread-compatible, no state.
#ifndef HOMARPC_RUNTIME_TRANSPORT_ARGS_H_
#define HOMARPC_RUNTIME_TRANSPORT_ARGS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "runtime/channel.h"
#include "runtime/message_transport.h"

namespace homarpc::internal {

// Room for the envelope (method, metadata, status) in a message beyond its payload limit.
inline constexpr size_t kEnvelopeRoom = size_t{64} << 10;
// What an unlimited (-1) payload limit means: the transport's default message ceiling.
inline constexpr size_t kUnlimitedPayloadBytes = size_t{64} << 20;

// Sockets a channel lends blocking callers (kArgCallerSockets): the default, and the most.
inline constexpr int kDefaultCallerSockets = 4;
inline constexpr int kMaxCallerSockets = 256;

// The transport message length that carries a payload of at most `payload_limit` bytes
// (-1 = unlimited) with its envelope: payload + kEnvelopeRoom, at most the wire's 1 GiB.
// Channels and servers size transport::Config's message limits with it.
uint32_t MessageLengthFor(int64_t payload_limit);

// Applies kArgSpinMicros, kArgMtu, kArgIoBackend, kArgLinkMbps, kArgDirectSend, kArgPaceLocal
// and kArgCallerSockets from `args` (absent keys keep the transport's defaults) to `options`.
// INVALID_ARGUMENT naming the key for a bad value (negative spin or link rate, non-positive
// MTU, an unknown backend, a flag other than 0 or 1, caller sockets outside
// [0, kMaxCallerSockets]); `options` may then
// be partly changed. Servers ignore kArgCallerSockets.
absl::Status ApplyTransportArgs(const ChannelArguments& args, UdpTransportOptions* options);

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_TRANSPORT_ARGS_H_
