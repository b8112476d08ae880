// wire: the codec for Homa's packet formats in a UDP payload (see wire.h, proto/PROTOCOL.md).
//
// Stateless functions, safe from any thread. Decode() runs once per received datagram, so it
// allocates nothing, builds no Status and reads each byte at most once.
//
// DESIGN NOTES
// - Fields are read and written with explicit byte shifts on a byte pointer, never by casting
//   the datagram to a packed struct: the buffer may be unaligned, host order is irrelevant,
//   and every read is visibly inside a length the code has already checked. Compilers turn
//   the shift sequences into one load plus a byte swap.
// - The order of checks is part of the contract (tests and drop counters rely on it): common
//   header length, magic, version, type, the type's header length, then field ranges. A
//   datagram that is not ours (a stray UDP packet) therefore counts as kTooShort or
//   kBadMagic, never as a malformed Homa packet.
// - `sequence` (bytes 4..7) is DATA's offset again, ignored; in a RESEND it numbers the
//   receiver's RESEND round and an RPC_UNKNOWN echoes that number, so a client can tell an
//   answer to an old RESEND from one to its latest (PROTOCOL.md, "Answering RPC_UNKNOWN").
// - Bytes a receiver must ignore (doff, DATA's sequence, the unused TCP slots, DATA's pad, ACK
//   entries past num_acks, padding after a control header) are not read at all. Decode still
//   fills every field of the packet's type, so Decode -> EncodeHeader -> Decode is a fixed
//   point; the fuzz target (tests/fuzz/wire_fuzz.cc) checks exactly that.
// - Range checks use 64-bit sums: offset and length are both 32-bit on the wire and a
//   hostile sender picks values whose 32-bit sum wraps to something small.
#include "transport/wire.h"

#include <cstring>

#include "transport/big_endian.h"

namespace homarpc::transport::wire {
namespace {

// Offsets in the common header (reference §1.2).
constexpr size_t kOffSport = 0;
constexpr size_t kOffDport = 2;
constexpr size_t kOffSequence = 4;
constexpr size_t kOffType = 11;
constexpr size_t kOffDoff = 12;
constexpr size_t kOffVersion = 13;  // Homa's `flags`
constexpr size_t kOffMagic = 14;    // Homa's `window` + `checksum`
constexpr size_t kOffSenderId = 20;

// DATA (reference §1.4).
constexpr size_t kOffDataMessageLength = 28;
constexpr size_t kOffDataIncoming = 32;
constexpr size_t kOffDataAck = 36;  // client_id u64, server_port u16
constexpr size_t kOffDataCutoffVersion = 46;
constexpr size_t kOffDataRetransmit = 48;
constexpr size_t kOffDataOffset = 52;  // seg.offset

// GRANT.
constexpr size_t kOffGrantOffset = 28;
constexpr size_t kOffGrantPriority = 32;

// RESEND.
constexpr size_t kOffResendOffset = 28;
constexpr size_t kOffResendLength = 32;
constexpr size_t kOffResendPriority = 36;

// CUTOFFS.
constexpr size_t kOffCutoffsTable = 28;
constexpr size_t kOffCutoffsVersion = 60;

// ACK.
constexpr size_t kOffAckNum = 28;
constexpr size_t kOffAckEntries = 30;
constexpr size_t kAckEntrySize = 10;

// REFUSED (homarpc extension).
constexpr size_t kOffRefusedReason = 28;

// The `doff` byte Homa writes: header length in 32-bit words in the high nibble.
constexpr uint8_t kDataDoff = (kDataHeaderSize / 4) << 4;  // 14 << 4
constexpr uint8_t kControlDoff = 5 << 4;

constexpr uint8_t kMaxPriority = 7;

static_assert(kOffDataOffset + 4 == kDataHeaderSize);
static_assert(kOffGrantPriority + 1 == kGrantHeaderSize);
static_assert(kOffResendPriority + 1 == kResendHeaderSize);
static_assert(kOffCutoffsVersion + 2 == kCutoffsHeaderSize);
static_assert(kOffAckEntries + kMaxAcksPerPacket * kAckEntrySize == kAckHeaderSize);
static_assert(kOffRefusedReason + 1 == kRefusedHeaderSize);


inline AckEntry LoadAck(const uint8_t* p) { return AckEntry{Load64(p), Load16(p + 8)}; }
inline void StoreAck(uint8_t* p, const AckEntry& ack) {
  Store64(p, ack.client_id);
  Store16(p + 8, ack.server_port);
}

bool IsRefuseReason(uint8_t value) {
  switch (static_cast<RefuseReason>(value)) {
    case RefuseReason::kMessageTooLong:
    case RefuseReason::kNoMemory:
    case RefuseReason::kTooManyRpcs:
    case RefuseReason::kTooManyPeers:
    case RefuseReason::kNotServer:
      return true;
  }
  return false;
}

}  // namespace

const char* PacketTypeName(PacketType type) {
  switch (type) {
    case PacketType::kData:
      return "DATA";
    case PacketType::kGrant:
      return "GRANT";
    case PacketType::kResend:
      return "RESEND";
    case PacketType::kRpcUnknown:
      return "RPC_UNKNOWN";
    case PacketType::kBusy:
      return "BUSY";
    case PacketType::kCutoffs:
      return "CUTOFFS";
    case PacketType::kNeedAck:
      return "NEED_ACK";
    case PacketType::kAck:
      return "ACK";
    case PacketType::kRefused:
      return "REFUSED";
  }
  return "UNKNOWN";
}

const char* DecodeErrorName(DecodeError error) {
  switch (error) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTooShort:
      return "too_short";
    case DecodeError::kBadMagic:
      return "bad_magic";
    case DecodeError::kBadVersion:
      return "bad_version";
    case DecodeError::kUnknownType:
      return "unknown_type";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kBadField:
      return "bad_field";
    case DecodeError::kCount:
      break;
  }
  return "unknown_error";
}

size_t HeaderSize(PacketType type) {
  switch (type) {
    case PacketType::kData:
      return kDataHeaderSize;
    case PacketType::kGrant:
      return kGrantHeaderSize;
    case PacketType::kResend:
      return kResendHeaderSize;
    case PacketType::kRpcUnknown:
    case PacketType::kBusy:
    case PacketType::kNeedAck:
      return kCommonHeaderSize;
    case PacketType::kCutoffs:
      return kCutoffsHeaderSize;
    case PacketType::kAck:
      return kAckHeaderSize;
    case PacketType::kRefused:
      return kRefusedHeaderSize;
  }
  // Every other byte, FREEZE (0x16, a debugging aid of the Homa module) included, is not a
  // homarpc packet type.
  return 0;
}

DecodeError Decode(absl::Span<const uint8_t> bytes, Packet* out) {
  const size_t size = bytes.size();
  if (size < kCommonHeaderSize) return DecodeError::kTooShort;
  const uint8_t* p = bytes.data();
  if (Load32(p + kOffMagic) != kMagic) return DecodeError::kBadMagic;
  if (p[kOffVersion] != kVersion) return DecodeError::kBadVersion;
  const auto type = static_cast<PacketType>(p[kOffType]);
  const size_t header_size = HeaderSize(type);
  if (header_size == 0) return DecodeError::kUnknownType;
  if (size < header_size) return DecodeError::kTruncated;

  out->type = type;
  out->sport = Load16(p + kOffSport);
  out->dport = Load16(p + kOffDport);
  out->sender_id = Load64(p + kOffSenderId);
  out->payload = {};

  switch (type) {
    case PacketType::kData: {
      Packet::Data& d = out->data;
      d.message_length = Load32(p + kOffDataMessageLength);
      d.incoming = Load32(p + kOffDataIncoming);
      d.ack = LoadAck(p + kOffDataAck);
      d.cutoff_version = Load16(p + kOffDataCutoffVersion);
      d.retransmit = p[kOffDataRetransmit] != 0;
      d.offset = Load32(p + kOffDataOffset);
      // `sequence` (offset 4) duplicates the offset for TSO's benefit and is not read:
      // seg.offset is authoritative.
      const size_t payload_size = size - kDataHeaderSize;
      if (d.message_length > kMaxWireMessageLength) return DecodeError::kBadField;
      // 64-bit: offset near 2^32 plus a payload must not wrap below message_length. This also
      // rejects a non-empty payload in a message of length 0.
      if (uint64_t{d.offset} + payload_size > d.message_length) return DecodeError::kBadField;
      out->payload = absl::MakeConstSpan(p + kDataHeaderSize, payload_size);
      break;
    }
    case PacketType::kGrant:
      out->grant.offset = Load32(p + kOffGrantOffset);
      out->grant.priority = p[kOffGrantPriority];
      if (out->grant.priority > kMaxPriority) return DecodeError::kBadField;
      break;
    case PacketType::kResend: {
      Packet::Resend& r = out->resend;
      r.offset = Load32(p + kOffResendOffset);
      r.length = Load32(p + kOffResendLength);
      r.priority = p[kOffResendPriority];
      r.round = Load32(p + kOffSequence);
      if (r.priority > kMaxPriority) return DecodeError::kBadField;
      // A range must be representable in 32-bit offsets; kResendAll is a marker, not a length.
      if (r.length != kResendAll && uint64_t{r.offset} + r.length > UINT32_MAX) {
        return DecodeError::kBadField;
      }
      break;
    }
    case PacketType::kCutoffs: {
      Packet::Cutoffs& c = out->cutoffs;
      for (size_t i = 0; i < c.unsched_cutoffs.size(); ++i) {
        c.unsched_cutoffs[i] = Load32(p + kOffCutoffsTable + 4 * i);
      }
      c.cutoff_version = Load16(p + kOffCutoffsVersion);
      // Version 0 means "never received cutoffs" in DATA; a CUTOFFS cannot carry it.
      if (c.cutoff_version == 0) return DecodeError::kBadField;
      break;
    }
    case PacketType::kAck: {
      Packet::Ack& a = out->ack;
      a.num_acks = Load16(p + kOffAckNum);
      if (a.num_acks > kMaxAcksPerPacket) return DecodeError::kBadField;
      for (size_t i = 0; i < kMaxAcksPerPacket; ++i) {
        // Entries past num_acks are ignored: whatever the sender left there reads as "none".
        a.acks[i] = i < a.num_acks ? LoadAck(p + kOffAckEntries + kAckEntrySize * i) : AckEntry{};
      }
      break;
    }
    case PacketType::kRefused: {
      const uint8_t reason = p[kOffRefusedReason];
      if (!IsRefuseReason(reason)) return DecodeError::kBadField;
      out->refused.reason = static_cast<RefuseReason>(reason);
      break;
    }
    case PacketType::kRpcUnknown:
      out->unknown.resend_round = Load32(p + kOffSequence);
      break;
    case PacketType::kBusy:
    case PacketType::kNeedAck:
      break;
  }
  return DecodeError::kOk;
}

size_t EncodeHeader(const Packet& p, uint8_t* out) {
  const size_t header_size = HeaderSize(p.type);
  // An unknown type is a caller bug; writing nothing gives the caller a zero-length packet it
  // will notice rather than a plausible-looking one.
  if (header_size == 0) return 0;
  std::memset(out, 0, header_size);

  Store16(out + kOffSport, p.sport);
  Store16(out + kOffDport, p.dport);
  out[kOffType] = static_cast<uint8_t>(p.type);
  out[kOffDoff] = p.type == PacketType::kData ? kDataDoff : kControlDoff;
  out[kOffVersion] = kVersion;
  Store32(out + kOffMagic, kMagic);
  Store64(out + kOffSenderId, p.sender_id);

  switch (p.type) {
    case PacketType::kData: {
      const Packet::Data& d = p.data;
      // As Homa does without TSO: `sequence` repeats the offset; receivers ignore it.
      Store32(out + kOffSequence, d.offset);
      Store32(out + kOffDataMessageLength, d.message_length);
      Store32(out + kOffDataIncoming, d.incoming);
      StoreAck(out + kOffDataAck, d.ack);
      Store16(out + kOffDataCutoffVersion, d.cutoff_version);
      out[kOffDataRetransmit] = d.retransmit ? 1 : 0;
      Store32(out + kOffDataOffset, d.offset);
      break;
    }
    case PacketType::kGrant:
      Store32(out + kOffGrantOffset, p.grant.offset);
      out[kOffGrantPriority] = p.grant.priority;
      break;
    case PacketType::kResend:
      Store32(out + kOffResendOffset, p.resend.offset);
      Store32(out + kOffResendLength, p.resend.length);
      out[kOffResendPriority] = p.resend.priority;
      Store32(out + kOffSequence, p.resend.round);
      break;
    case PacketType::kCutoffs:
      for (size_t i = 0; i < p.cutoffs.unsched_cutoffs.size(); ++i) {
        Store32(out + kOffCutoffsTable + 4 * i, p.cutoffs.unsched_cutoffs[i]);
      }
      Store16(out + kOffCutoffsVersion, p.cutoffs.cutoff_version);
      break;
    case PacketType::kAck: {
      Store16(out + kOffAckNum, p.ack.num_acks);
      // num_acks is written as given (a value above 5 is the caller's bug and the receiver
      // rejects it); only the entries that exist are written.
      const size_t n = p.ack.num_acks < kMaxAcksPerPacket ? p.ack.num_acks : kMaxAcksPerPacket;
      for (size_t i = 0; i < n; ++i)
        StoreAck(out + kOffAckEntries + kAckEntrySize * i, p.ack.acks[i]);
      break;
    }
    case PacketType::kRefused:
      out[kOffRefusedReason] = static_cast<uint8_t>(p.refused.reason);
      break;
    case PacketType::kRpcUnknown:
      Store32(out + kOffSequence, p.unknown.resend_round);
      break;
    case PacketType::kBusy:
    case PacketType::kNeedAck:
      break;
  }
  return header_size;
}

}  // namespace homarpc::transport::wire
