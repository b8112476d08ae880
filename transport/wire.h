// wire: Homa's packet formats as carried in a UDP payload, and their codec.
//
// Layouts follow the Homa module's homa_wire.h byte for byte (reference §1), with two homarpc
// additions that live in fields Homa leaves unused over UDP: a 4-byte magic and a version
// byte, so stray datagrams are rejected before anything else is read. proto/PROTOCOL.md is the
// specification; this header is its code. All multi-byte fields are big-endian.
//
// Decode() is the only place that reads network bytes. It checks structure (lengths, magic,
// version, type, field ranges that do not depend on engine state) and never trusts a length
// it has not checked against the datagram. Semantic checks that need state (is this offset
// inside the message we know, is this grant sane) belong to the engine.
// Stateless and thread-safe.
#ifndef HOMARPC_TRANSPORT_WIRE_H_
#define HOMARPC_TRANSPORT_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace homarpc::transport::wire {

// "HOMA" in ASCII, at offset 14 of the common header (Homa's unused `window`+`checksum`).
constexpr uint32_t kMagic = 0x484F4D41;
// Protocol version, at offset 13 (Homa's `flags`). Bumped on any incompatible change.
constexpr uint8_t kVersion = 1;

enum class PacketType : uint8_t {
  kData = 0x10,
  kGrant = 0x11,
  kResend = 0x12,
  kRpcUnknown = 0x13,
  kBusy = 0x14,
  kCutoffs = 0x15,
  kNeedAck = 0x17,
  kAck = 0x18,
  // homarpc extension: "I will not take this message" (a resource limit), so the sender fails
  // the RPC at once instead of retrying into silence. Carries a RefuseReason.
  kRefused = 0x20,
};
const char* PacketTypeName(PacketType type);

constexpr size_t kCommonHeaderSize = 28;
constexpr size_t kDataHeaderSize = 56;
constexpr size_t kGrantHeaderSize = 33;
constexpr size_t kResendHeaderSize = 37;
constexpr size_t kCutoffsHeaderSize = 62;
constexpr size_t kAckHeaderSize = 80;
constexpr size_t kRefusedHeaderSize = 29;
constexpr size_t kMaxHeaderSize = 80;
constexpr size_t kMaxAcksPerPacket = 5;
// Largest message length the wire admits; the engine's configured limit is usually lower.
constexpr uint32_t kMaxWireMessageLength = 1u << 30;
// RESEND length meaning "everything you have sent so far".
constexpr uint32_t kResendAll = 0xffffffffu;

// One acknowledged RPC: the client's id and the server's port.
struct AckEntry {
  uint64_t client_id = 0;  // 0 = no ack
  uint16_t server_port = 0;
};

enum class RefuseReason : uint8_t {
  kMessageTooLong = 1,  // above the receiver's max_message_length
  kNoMemory = 2,        // receiver's max_rx_bytes_held reached
  kTooManyRpcs = 3,     // receiver's max_rpcs_per_peer reached
  kTooManyPeers = 4,    // receiver's max_peers reached
  kNotServer = 5,       // the receiver serves no requests (a client-only endpoint)
};

// A decoded packet (or one to encode). Only the fields of `type` are meaningful.
struct Packet {
  PacketType type = PacketType::kData;
  uint16_t sport = 0;  // sender's UDP port (informational; the datagram's source rules)
  uint16_t dport = 0;  // receiver's UDP port
  uint64_t sender_id = 0;  // RPC id as the sender knows it; the receiver XORs bit 0

  struct Data {
    uint32_t message_length = 0;
    uint32_t incoming = 0;  // bytes the sender will send without further grants
    AckEntry ack;           // piggybacked ack (client -> server), client_id 0 = none
    uint16_t cutoff_version = 0;
    bool retransmit = false;
    uint32_t offset = 0;    // offset in the message of the payload's first byte
  } data;
  struct Grant {
    uint32_t offset = 0;  // sender may send bytes [0, offset)
    uint8_t priority = 0;
  } grant;
  struct Resend {
    uint32_t offset = 0;
    uint32_t length = 0;  // kResendAll = everything already sent
    uint8_t priority = 0;
    uint32_t round = 0;   // the receiver's count of RESEND rounds for this RPC (1, 2, ...)
  } resend;
  struct Unknown {
    uint32_t resend_round = 0;  // `round` of the RESEND this answers; 0 = none
  } unknown;
  struct Cutoffs {
    std::array<uint32_t, 8> unsched_cutoffs{};
    uint16_t cutoff_version = 0;
  } cutoffs;
  struct Ack {
    uint16_t num_acks = 0;
    std::array<AckEntry, kMaxAcksPerPacket> acks{};
  } ack;
  struct Refused {
    RefuseReason reason = RefuseReason::kNoMemory;
  } refused;

  // DATA only: the payload, pointing into the decoded datagram.
  absl::Span<const uint8_t> payload;
};

enum class DecodeError : uint8_t {
  kOk = 0,
  kTooShort,      // shorter than the common header
  kBadMagic,
  kBadVersion,
  kUnknownType,
  kTruncated,     // shorter than its type's header
  kBadField,      // a field out of range on its own (e.g. DATA past message end, num_acks > 5)
  kCount,
};
const char* DecodeErrorName(DecodeError error);

// Decodes `bytes` into `*out`. On error `*out` is unspecified. `out->payload` aliases `bytes`.
DecodeError Decode(absl::Span<const uint8_t> bytes, Packet* out);

// Writes the header of `p` (for DATA, the 56-byte header without payload) into `out`, which
// must hold kMaxHeaderSize bytes. Returns the number of bytes written. Deterministic: unused
// and reserved bytes are zero.
size_t EncodeHeader(const Packet& p, uint8_t* out);

// Header size of a packet type (0 for an unknown type).
size_t HeaderSize(PacketType type);

}  // namespace homarpc::transport::wire

#endif  // HOMARPC_TRANSPORT_WIRE_H_
