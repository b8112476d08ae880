// Fuzz target for wire::Decode, the first code that touches every received datagram.
//
// Arbitrary bytes go into Decode. Most are rejected, which must simply not crash or read out
// of bounds (ASan/UBSan watch). When an input decodes, the decoded packet is re-encoded
// (EncodeHeader plus the payload) and decoded again; the two decodes must agree field by
// field and the re-encoding must be a fixed point. A disagreement means the codec loses or
// invents information, or accepts something it would never produce with a different meaning:
// that is a real finding, so the target aborts with a description.
//
// Also checks the promises of wire.h that the engine relies on: the payload lies inside the
// datagram, is everything after the 56-byte DATA header, ends inside the message, and control
// packets have none. Single-threaded; run by libFuzzer or by standalone_main.cc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire.h"

namespace homarpc::transport::wire {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "wire_fuzz: %s\n", what);
  std::abort();
}

void Check(bool ok, const char* what) {
  if (!ok) Fail(what);
}

bool SameAck(const AckEntry& a, const AckEntry& b) {
  return a.client_id == b.client_id && a.server_port == b.server_port;
}

// Compares the fields wire.h says are meaningful for the packets' type.
void CheckSame(const Packet& a, const Packet& b) {
  Check(a.type == b.type, "type changed in re-encoding");
  Check(a.sport == b.sport && a.dport == b.dport, "ports changed in re-encoding");
  Check(a.sender_id == b.sender_id, "sender_id changed in re-encoding");
  Check(a.payload.size() == b.payload.size(), "payload size changed in re-encoding");
  if (!a.payload.empty()) {
    Check(std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()) == 0,
          "payload bytes changed in re-encoding");
  }
  switch (a.type) {
    case PacketType::kData:
      Check(a.data.message_length == b.data.message_length, "DATA message_length changed");
      Check(a.data.incoming == b.data.incoming, "DATA incoming changed");
      Check(SameAck(a.data.ack, b.data.ack), "DATA ack changed");
      Check(a.data.cutoff_version == b.data.cutoff_version, "DATA cutoff_version changed");
      Check(a.data.retransmit == b.data.retransmit, "DATA retransmit changed");
      Check(a.data.offset == b.data.offset, "DATA offset changed");
      break;
    case PacketType::kGrant:
      Check(a.grant.offset == b.grant.offset, "GRANT offset changed");
      Check(a.grant.priority == b.grant.priority, "GRANT priority changed");
      break;
    case PacketType::kResend:
      Check(a.resend.offset == b.resend.offset, "RESEND offset changed");
      Check(a.resend.length == b.resend.length, "RESEND length changed");
      Check(a.resend.priority == b.resend.priority, "RESEND priority changed");
      Check(a.resend.round == b.resend.round, "RESEND round changed");
      break;
    case PacketType::kCutoffs:
      Check(a.cutoffs.unsched_cutoffs == b.cutoffs.unsched_cutoffs, "CUTOFFS table changed");
      Check(a.cutoffs.cutoff_version == b.cutoffs.cutoff_version, "CUTOFFS version changed");
      break;
    case PacketType::kAck:
      Check(a.ack.num_acks == b.ack.num_acks, "ACK num_acks changed");
      for (size_t i = 0; i < kMaxAcksPerPacket; ++i) {
        Check(SameAck(a.ack.acks[i], b.ack.acks[i]), "ACK entry changed");
      }
      break;
    case PacketType::kRefused:
      Check(a.refused.reason == b.refused.reason, "REFUSED reason changed");
      break;
    case PacketType::kRpcUnknown:
      Check(a.unknown.resend_round == b.unknown.resend_round, "RPC_UNKNOWN round changed");
      break;
    case PacketType::kBusy:
    case PacketType::kNeedAck:
      break;
  }
}

// The promises of wire.h about a packet Decode accepted from `bytes`.
void CheckAccepted(absl::Span<const uint8_t> bytes, const Packet& p) {
  const size_t header = HeaderSize(p.type);
  Check(header != 0, "accepted an unknown type");
  Check(bytes.size() >= header, "accepted a truncated packet");
  if (p.type == PacketType::kData) {
    Check(p.payload.data() == bytes.data() + kDataHeaderSize, "payload does not alias input");
    Check(p.payload.size() == bytes.size() - kDataHeaderSize, "payload is not the rest");
    Check(p.data.message_length <= kMaxWireMessageLength, "accepted an oversized message");
    Check(uint64_t{p.data.offset} + p.payload.size() <= p.data.message_length,
          "accepted a payload past the message end");
  } else {
    Check(p.payload.empty(), "control packet has a payload");
  }
  if (p.type == PacketType::kAck) Check(p.ack.num_acks <= kMaxAcksPerPacket, "num_acks > 5");
  if (p.type == PacketType::kGrant) Check(p.grant.priority <= 7, "GRANT priority > 7");
  if (p.type == PacketType::kResend) Check(p.resend.priority <= 7, "RESEND priority > 7");
  if (p.type == PacketType::kCutoffs) Check(p.cutoffs.cutoff_version != 0, "CUTOFFS version 0");
}

std::vector<uint8_t> Reencode(const Packet& p) {
  uint8_t header[kMaxHeaderSize];
  const size_t n = EncodeHeader(p, header);
  Check(n == HeaderSize(p.type), "EncodeHeader wrote an unexpected size");
  std::vector<uint8_t> out(header, header + n);
  out.insert(out.end(), p.payload.begin(), p.payload.end());
  return out;
}

}  // namespace
}  // namespace homarpc::transport::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace homarpc::transport::wire;
  const absl::Span<const uint8_t> input(data, size);
  Packet first;
  if (Decode(input, &first) != DecodeError::kOk) return 0;
  CheckAccepted(input, first);

  const std::vector<uint8_t> encoded = Reencode(first);
  Packet second;
  const DecodeError again = Decode(absl::MakeConstSpan(encoded), &second);
  if (again != DecodeError::kOk) {
    std::fprintf(stderr, "wire_fuzz: re-encoded %s decodes as %s\n", PacketTypeName(first.type),
                 DecodeErrorName(again));
    std::abort();
  }
  CheckAccepted(absl::MakeConstSpan(encoded), second);
  CheckSame(first, second);
  // Canonical form: encoding what was decoded from a canonical packet changes nothing.
  Check(Reencode(second) == encoded, "re-encoding is not a fixed point");
  return 0;
}
