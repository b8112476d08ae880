// Payload encoding: a protobuf message serialized into the message the transport sends, with
// its large string and bytes fields borrowed rather than copied (zero-copy send).
//
// Small messages are serialized into the one Buffer that also holds the envelope header (one
// copy, cheap). From kZeroCopyMinBytes on, the runtime instead serializes through
// protobuf's aliasing output stream: every string or bytes field of at least kMinBorrowBytes
// becomes a borrowed segment of a transport::MessageBytes (message_bytes.h) pointing at the
// field's own storage, and only tags, lengths and small fields are copied. The kernel's copy
// into the socket is then the only copy of the payload on the sending side (measured on
// loopback: one 1 MiB copy is ~85-125 us here, a tenth of a 1 MiB echo).
//
// The message must stay alive and unchanged until the MessageBytes is released: a blocking
// client call waits for that release before it returns (the caller's request is a const
// reference the call may read until then, as in gRPC); a server moves the response out of
// its call object first (CallMessages::TakeResponse) and lets the release free it. The
// callback client API copies: gRPC's callback API lets a caller drop the request once the
// call has started.
//
// Thread-compatible, no state.
#ifndef HOMARPC_RUNTIME_PAYLOAD_ENCODER_H_
#define HOMARPC_RUNTIME_PAYLOAD_ENCODER_H_

#include <cstddef>

#include "transport/buffer.h"
#include "transport/message_bytes.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace homarpc::internal {

// Payloads of at least this many bytes are sent zero-copy where the API allows it.
inline constexpr size_t kZeroCopyMinBytes = 64 * 1024;
// String and bytes fields of at least this many bytes are borrowed, smaller ones copied. It
// keeps borrowed segments far longer than a packet, so a DATA packet spans at most two.
inline constexpr size_t kMinBorrowBytes = 16 * 1024;
// Room left after the envelope header in its buffer, where the payload's first tags and
// small fields go.
inline constexpr size_t kZeroCopyHeadScratch = 1024;

// Sets `*out` to `header` (whose first `header_used` bytes are written; the rest is scratch
// the payload may use) followed by `message` serialized, its large fields borrowed (see the
// file comment). `message.ByteSizeLong()` must have been called since its last change and
// returned `payload_bytes`. Returns false, with `*out` unspecified, when serialization did
// not produce exactly `payload_bytes` bytes (the message changed meanwhile).
bool EncodeBorrowing(const google::protobuf::MessageLite& message, size_t payload_bytes,
                     transport::Buffer header, size_t header_used, transport::MessageBytes* out);

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_PAYLOAD_ENCODER_H_
