// Envelope: the RPC layer's framing inside one Homa message (proto/PROTOCOL.md §14).
//
// Every Homa request or response message the runtime sends is an envelope: a fixed 24-byte
// header, a run of typed sections (method, timeout, metadata, status, trailers), then the
// serialized protobuf payload, which fills the rest of the message. This file is the only code
// that reads envelope bytes from the network; Decode() validates everything and returns views
// into the message, never copies.
//
// Thread-compatible, no state.
#ifndef HOMARPC_RUNTIME_ENVELOPE_H_
#define HOMARPC_RUNTIME_ENVELOPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace homarpc::internal {

inline constexpr uint8_t kEnvelopeVersion = 1;
inline constexpr size_t kEnvelopeHeaderBytes = 24;

enum class EnvelopeKind : uint8_t {
  kRequest = 1,   // client -> server: a call
  kResponse = 2,  // server -> client: the call's outcome
  kCancel = 3,    // client -> server (its own Homa request): cancel call `call_id`
};

// Header flags (u16). Unknown bits are rejected (a newer peer must not be misread).
inline constexpr uint16_t kFlagEndOfStream = 0x0001;  // last message of this direction
inline constexpr uint16_t kFlagCompressed = 0x0002;   // reserved: payload compressed
inline constexpr uint16_t kKnownFlags = kFlagEndOfStream | kFlagCompressed;

// Section types (u8). Types with bit 0x80 set may be skipped by a receiver that does not know
// them; any other unknown type is an error.
enum class SectionType : uint8_t {
  kMethod = 1,            // request: "/package.Service/Method"
  kTimeout = 2,           // request: u64 microseconds the caller will still wait
  kMetadata = 3,          // request: client metadata; response: server initial metadata
  kStatusCode = 4,        // response: u32 gRPC status code
  kStatusMessage = 5,     // response: UTF-8 text
  kStatusDetails = 6,     // response: bytes (by convention a google.rpc.Status)
  kTrailingMetadata = 7,  // response: trailing metadata
};

// One metadata entry, as views into a message or into caller-owned strings.
using MetadataEntry = std::pair<std::string_view, std::string_view>;

// A decoded or to-be-encoded envelope. On decode, every view points into the message bytes
// passed to Decode(), so the message must outlive the Envelope.
struct Envelope {
  EnvelopeKind kind = EnvelopeKind::kRequest;
  uint16_t flags = kFlagEndOfStream;
  uint32_t stream_id = 0;  // 0 = a unary call; reserved for streaming
  uint32_t sequence = 0;   // message number within a stream; 0 for unary
  uint64_t call_id = 0;    // chosen by the client, unique per client endpoint

  // Request.
  std::string_view method;
  int64_t timeout_micros = -1;  // -1 = no deadline
  // Request: client metadata. Response: server initial metadata.
  std::vector<MetadataEntry> metadata;

  // Response.
  uint32_t status_code = 0;
  std::string_view status_message;
  std::string_view status_details;
  std::vector<MetadataEntry> trailing_metadata;

  // Decode only: the payload (the rest of the message after the sections).
  absl::Span<const uint8_t> payload;
};

// Bytes of header plus sections for `envelope` (the payload is not included).
size_t EncodedHeaderSize(const Envelope& envelope);
// Writes header and sections into `out`, which must be exactly EncodedHeaderSize() bytes; the
// payload goes right after them. Writes only the sections of the envelope's kind and leaves
// out defaults (no status code when OK, no timeout without a deadline, no empty status text or
// details). Does not validate metadata (see metadata.h: keys must fit 16 bits) or read payload.
void EncodeHeader(const Envelope& envelope, absl::Span<uint8_t> out);

// Parses and validates a whole message. Errors (INTERNAL, with the reason): shorter than the
// header, wrong version, unknown kind or flag, a section that overruns the message, a
// required section missing or repeated (method on a request), a section on the wrong kind,
// a malformed value (timeout not 8 bytes or above 2^63-1, status code not 4 bytes or above
// 16, metadata key length past its section), a cancel with a payload. Sections may come in
// any order. Metadata is checked for structure only (not against metadata.h's key rules).
//
// `max_metadata_bytes` is the receiver's metadata limit, applied while decoding: each list
// (metadata, trailing_metadata) is counted as metadata.h counts it (MetadataEntrySize: key +
// value + 32 per entry), and as soon as one list's count passes the limit Decode stops with
// RESOURCE_EXHAUSTED ("metadata of at least N bytes exceeds the limit of M", "trailing
// metadata ..." for the trailers), N being the count when it passed. So a decoded envelope
// never holds more than about max_metadata_bytes / 32 entries per list, whatever the message
// (a message of 7-byte empty entries would otherwise cost 32 bytes of views per 7 bytes
// received). The check runs in message order with the structural ones (PROTOCOL.md §14.6), so
// a message over the limit that is also malformed further on fails RESOURCE_EXHAUSTED. The
// default, SIZE_MAX, is no limit.
absl::StatusOr<Envelope> Decode(absl::Span<const uint8_t> message,
                                size_t max_metadata_bytes = SIZE_MAX);

// The call_id of a message Decode() may have rejected, so an error reply can still name the
// call: bytes 12..19 when the message has a whole header (that position is fixed across
// versions, PROTOCOL.md §14), nullopt otherwise.
std::optional<uint64_t> PeekCallId(absl::Span<const uint8_t> message);

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_ENVELOPE_H_
