// Tests for transport/wire.cc: the codec of Homa's packets in a UDP payload.
//
// What is checked, in order: every packet type survives EncodeHeader -> Decode with field
// values whose bytes are all distinct (so a swapped or shifted field shows); golden bytes pin
// the layout of DATA and GRANT to proto/PROTOCOL.md offset by offset; every DecodeError is
// produced by the input that should produce it and by nothing shorter; fields a receiver must
// ignore are ignored; padding after a control header is accepted; a DATA payload aliases the
// datagram. Single-threaded, no I/O.
#include "transport/wire.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::transport::wire {
namespace {

using ::testing::ElementsAreArray;

using Bytes = std::vector<uint8_t>;

// The header of `p` followed by `payload`, as a datagram.
Bytes Encode(const Packet& p, const Bytes& payload = {}) {
  uint8_t header[kMaxHeaderSize];
  const size_t n = EncodeHeader(p, header);
  Bytes out(header, header + n);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

DecodeError DecodeBytes(const Bytes& bytes, Packet* out) {
  return Decode(absl::MakeConstSpan(bytes), out);
}

// Values chosen so that every byte differs from its neighbours: a field written at the wrong
// offset or in the wrong byte order cannot decode to the same value.
Packet Common(PacketType type) {
  Packet p;
  p.type = type;
  p.sport = 0x1234;
  p.dport = 0x5678;
  p.sender_id = 0x0102030405060708;
  return p;
}

Packet SampleData() {
  Packet p = Common(PacketType::kData);
  p.data.message_length = 0x0000A000;  // 40960
  p.data.incoming = 0x00009C40;        // 40000
  p.data.ack = {0x1112131415161718, 0x191A};
  p.data.cutoff_version = 0x1B1C;
  p.data.retransmit = true;
  p.data.offset = 0x00002000;  // 8192
  return p;
}

Packet SampleGrant() {
  Packet p = Common(PacketType::kGrant);
  p.sender_id = 0x0102030405060709;  // a server's id
  p.grant.offset = 0x00030D40;       // 200000
  p.grant.priority = 3;
  return p;
}

Packet SampleResend() {
  Packet p = Common(PacketType::kResend);
  p.resend.offset = 0x00A1B2C3;
  p.resend.length = 0x00040506;
  p.resend.priority = 7;
  p.resend.round = 0x0102A0B0;
  return p;
}

Packet SampleRpcUnknown() {
  Packet p = Common(PacketType::kRpcUnknown);
  p.unknown.resend_round = 0x0102A0B0;
  return p;
}

Packet SampleCutoffs() {
  Packet p = Common(PacketType::kCutoffs);
  p.cutoffs.unsched_cutoffs = {0xFFFFFFFF, 0x01020304, 0x05060708, 0x090A0B0C,
                               0x000F4240, 0x00003A98, 0x00000AF0, 0x000000C8};
  p.cutoffs.cutoff_version = 0x2122;
  return p;
}

Packet SampleAck() {
  Packet p = Common(PacketType::kAck);
  p.ack.num_acks = 5;
  for (size_t i = 0; i < kMaxAcksPerPacket; ++i) {
    p.ack.acks[i] = {0x3132333435363700 + 2 * i, static_cast<uint16_t>(0x4100 + i)};
  }
  return p;
}

Packet SampleRefused() {
  Packet p = Common(PacketType::kRefused);
  p.refused.reason = RefuseReason::kTooManyRpcs;
  return p;
}

// One packet of every type, each with non-trivial fields.
std::vector<Packet> AllSamples() {
  return {SampleData(),
          SampleGrant(),
          SampleResend(),
          SampleRpcUnknown(),
          Common(PacketType::kBusy),
          SampleCutoffs(),
          Common(PacketType::kNeedAck),
          SampleAck(),
          SampleRefused()};
}

// Asserts that `a` and `b` carry the same meaning: the common fields and those of their type.
void ExpectSamePacket(const Packet& a, const Packet& b) {
  ASSERT_EQ(a.type, b.type);
  EXPECT_EQ(a.sport, b.sport);
  EXPECT_EQ(a.dport, b.dport);
  EXPECT_EQ(a.sender_id, b.sender_id);
  switch (a.type) {
    case PacketType::kData:
      EXPECT_EQ(a.data.message_length, b.data.message_length);
      EXPECT_EQ(a.data.incoming, b.data.incoming);
      EXPECT_EQ(a.data.ack.client_id, b.data.ack.client_id);
      EXPECT_EQ(a.data.ack.server_port, b.data.ack.server_port);
      EXPECT_EQ(a.data.cutoff_version, b.data.cutoff_version);
      EXPECT_EQ(a.data.retransmit, b.data.retransmit);
      EXPECT_EQ(a.data.offset, b.data.offset);
      break;
    case PacketType::kGrant:
      EXPECT_EQ(a.grant.offset, b.grant.offset);
      EXPECT_EQ(a.grant.priority, b.grant.priority);
      break;
    case PacketType::kResend:
      EXPECT_EQ(a.resend.offset, b.resend.offset);
      EXPECT_EQ(a.resend.length, b.resend.length);
      EXPECT_EQ(a.resend.priority, b.resend.priority);
      EXPECT_EQ(a.resend.round, b.resend.round);
      break;
    case PacketType::kCutoffs:
      EXPECT_EQ(a.cutoffs.unsched_cutoffs, b.cutoffs.unsched_cutoffs);
      EXPECT_EQ(a.cutoffs.cutoff_version, b.cutoffs.cutoff_version);
      break;
    case PacketType::kAck:
      ASSERT_EQ(a.ack.num_acks, b.ack.num_acks);
      for (size_t i = 0; i < a.ack.num_acks; ++i) {
        EXPECT_EQ(a.ack.acks[i].client_id, b.ack.acks[i].client_id) << "entry " << i;
        EXPECT_EQ(a.ack.acks[i].server_port, b.ack.acks[i].server_port) << "entry " << i;
      }
      break;
    case PacketType::kRefused:
      EXPECT_EQ(a.refused.reason, b.refused.reason);
      break;
    case PacketType::kRpcUnknown:
      EXPECT_EQ(a.unknown.resend_round, b.unknown.resend_round);
      break;
    case PacketType::kBusy:
    case PacketType::kNeedAck:
      break;
  }
}

uint32_t Read32(const Bytes& b, size_t off) {
  return (uint32_t{b[off]} << 24) | (uint32_t{b[off + 1]} << 16) | (uint32_t{b[off + 2]} << 8) |
         b[off + 3];
}

// ---- Round trips ----

TEST(Wire, DataRoundTrip) {
  const Packet sent = SampleData();
  const Bytes payload = {0xD0, 0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6};
  const Bytes bytes = Encode(sent, payload);
  ASSERT_EQ(bytes.size(), kDataHeaderSize + payload.size());

  Packet got;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  ExpectSamePacket(sent, got);
  EXPECT_THAT(got.payload, ElementsAreArray(payload));
}

TEST(Wire, DataWithoutRetransmitOrAckRoundTrip) {
  Packet sent = SampleData();
  sent.data.retransmit = false;
  sent.data.ack = {};
  sent.data.cutoff_version = 0;  // "never received CUTOFFS" is legal in DATA
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(sent), &got), DecodeError::kOk);
  ExpectSamePacket(sent, got);
  EXPECT_TRUE(got.payload.empty());
}

TEST(Wire, GrantRoundTrip) {
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(SampleGrant()), &got), DecodeError::kOk);
  ExpectSamePacket(SampleGrant(), got);
}

TEST(Wire, ResendRoundTrip) {
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(SampleResend()), &got), DecodeError::kOk);
  ExpectSamePacket(SampleResend(), got);
}

TEST(Wire, ResendAllRoundTrip) {
  // RESEND(offset, kResendAll): offset + length wraps, which is allowed only for this marker.
  Packet sent = SampleResend();
  sent.resend.offset = 0x00123456;
  sent.resend.length = kResendAll;
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(sent), &got), DecodeError::kOk);
  ExpectSamePacket(sent, got);
}

TEST(Wire, CommonHeaderOnlyTypesRoundTrip) {
  for (PacketType type : {PacketType::kRpcUnknown, PacketType::kBusy, PacketType::kNeedAck}) {
    SCOPED_TRACE(PacketTypeName(type));
    const Bytes bytes = Encode(Common(type));
    EXPECT_EQ(bytes.size(), kCommonHeaderSize);
    Packet got;
    ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
    ExpectSamePacket(Common(type), got);
  }
}

TEST(Wire, CutoffsRoundTrip) {
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(SampleCutoffs()), &got), DecodeError::kOk);
  ExpectSamePacket(SampleCutoffs(), got);
}

TEST(Wire, AckRoundTrip) {
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(SampleAck()), &got), DecodeError::kOk);
  ExpectSamePacket(SampleAck(), got);
}

TEST(Wire, AckWithNoEntriesRoundTrip) {
  // An ACK may name only the RPC in its common header.
  Packet sent = SampleAck();
  sent.ack.num_acks = 0;
  Packet got;
  ASSERT_EQ(DecodeBytes(Encode(sent), &got), DecodeError::kOk);
  EXPECT_EQ(got.ack.num_acks, 0);
  for (const AckEntry& e : got.ack.acks) EXPECT_EQ(e.client_id, 0u);
}

TEST(Wire, RefusedRoundTripsEveryReason) {
  for (RefuseReason reason : {RefuseReason::kMessageTooLong, RefuseReason::kNoMemory,
                              RefuseReason::kTooManyRpcs, RefuseReason::kTooManyPeers,
                              RefuseReason::kNotServer}) {
    Packet sent = SampleRefused();
    sent.refused.reason = reason;
    const Bytes bytes = Encode(sent);
    EXPECT_EQ(bytes.size(), kRefusedHeaderSize);
    Packet got;
    ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
    ExpectSamePacket(sent, got);
  }
}

TEST(Wire, ControlPacketsHaveEmptyPayload) {
  // Decode into a Packet that still holds a payload from an earlier DATA: it must be cleared.
  const Bytes data = Encode(SampleData(), {1, 2, 3});
  for (const Packet& sample : AllSamples()) {
    if (sample.type == PacketType::kData) continue;
    SCOPED_TRACE(PacketTypeName(sample.type));
    Packet got;
    ASSERT_EQ(DecodeBytes(data, &got), DecodeError::kOk);
    ASSERT_EQ(DecodeBytes(Encode(sample), &got), DecodeError::kOk);
    EXPECT_TRUE(got.payload.empty());
  }
}

// ---- Golden bytes: the layout of proto/PROTOCOL.md, offset by offset ----

TEST(Wire, DataGoldenBytes) {
  const Bytes payload = {0xAB, 0xCD};
  const Bytes bytes = Encode(SampleData(), payload);
  const Bytes golden = {
      0x12, 0x34,                                      // 0  sport
      0x56, 0x78,                                      // 2  dport
      0x00, 0x00, 0x20, 0x00,                          // 4  sequence = offset (ignored on receipt)
      0x00, 0x00, 0x00,                                // 8  unused
      0x10,                                            // 11 type DATA
      0xE0,                                            // 12 doff: 14 words (56 bytes) << 4
      0x01,                                            // 13 version
      0x48, 0x4F, 0x4D, 0x41,                          // 14 magic "HOMA"
      0x00, 0x00,                                      // 18 unused
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // 20 sender_id
      0x00, 0x00, 0xA0, 0x00,                          // 28 message_length
      0x00, 0x00, 0x9C, 0x40,                          // 32 incoming
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // 36 ack.client_id
      0x19, 0x1A,                                      // 44 ack.server_port
      0x1B, 0x1C,                                      // 46 cutoff_version
      0x01,                                            // 48 retransmit
      0x00, 0x00, 0x00,                                // 49 pad
      0x00, 0x00, 0x20, 0x00,                          // 52 seg.offset
      0xAB, 0xCD,                                      // 56 payload
  };
  EXPECT_THAT(bytes, ElementsAreArray(golden));

  // The same facts stated as offsets, so a failure names the field.
  EXPECT_EQ(bytes[11], 0x10) << "type at 11";
  EXPECT_EQ(bytes[13], kVersion) << "version at 13";
  EXPECT_EQ(Read32(bytes, 14), kMagic) << "magic at 14, big-endian";
  EXPECT_EQ(bytes[20], 0x01) << "sender_id at 20, most significant byte first";
  EXPECT_EQ(bytes[27], 0x08);
  EXPECT_EQ(Read32(bytes, 28), 40960u) << "message_length at 28";
  EXPECT_EQ(Read32(bytes, 52), 8192u) << "seg.offset at 52";
  EXPECT_EQ(bytes[56], 0xAB) << "payload at 56";
}

TEST(Wire, GrantGoldenBytes) {
  const Bytes golden = {
      0x12, 0x34, 0x56, 0x78,                          // 0  sport, dport
      0x00, 0x00, 0x00, 0x00,                          // 4  sequence: 0 in control packets
      0x00, 0x00, 0x00,                                // 8  unused
      0x11,                                            // 11 type GRANT
      0x50,                                            // 12 doff: 5 << 4
      0x01,                                            // 13 version
      0x48, 0x4F, 0x4D, 0x41,                          // 14 magic
      0x00, 0x00,                                      // 18 unused
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x09,  // 20 sender_id (odd: a server)
      0x00, 0x03, 0x0D, 0x40,                          // 28 offset = 200000
      0x03,                                            // 32 priority
  };
  EXPECT_THAT(Encode(SampleGrant()), ElementsAreArray(golden));
}

TEST(Wire, RefusedGoldenBytes) {
  const Bytes bytes = Encode(SampleRefused());
  ASSERT_EQ(bytes.size(), 29u);
  EXPECT_EQ(bytes[11], 0x20) << "REFUSED type code";
  EXPECT_EQ(bytes[12], 0x50) << "doff of a control packet";
  EXPECT_EQ(bytes[28], 3) << "reason kTooManyRpcs at 28";
}

TEST(Wire, AckEntriesAreTenBytesFromOffset30) {
  const Bytes bytes = Encode(SampleAck());
  ASSERT_EQ(bytes.size(), 80u);
  EXPECT_EQ(bytes[28], 0x00);
  EXPECT_EQ(bytes[29], 0x05) << "num_acks at 28, big-endian";
  for (size_t i = 0; i < kMaxAcksPerPacket; ++i) {
    const size_t off = 30 + 10 * i;
    EXPECT_EQ(bytes[off], 0x31) << "entry " << i << " client_id starts at " << off;
    EXPECT_EQ(bytes[off + 7], static_cast<uint8_t>(2 * i)) << "entry " << i;
    EXPECT_EQ(bytes[off + 8], 0x41) << "entry " << i << " server_port";
    EXPECT_EQ(bytes[off + 9], static_cast<uint8_t>(i)) << "entry " << i;
  }
}

TEST(Wire, CutoffsLayout) {
  const Bytes bytes = Encode(SampleCutoffs());
  ASSERT_EQ(bytes.size(), 62u);
  EXPECT_EQ(Read32(bytes, 28), 0xFFFFFFFFu) << "unsched_cutoffs[0] at 28";
  EXPECT_EQ(Read32(bytes, 28 + 4 * 7), 200u) << "unsched_cutoffs[7] at 56";
  EXPECT_EQ(bytes[60], 0x21) << "cutoff_version at 60";
  EXPECT_EQ(bytes[61], 0x22);
}

TEST(Wire, ResendLayout) {
  const Bytes bytes = Encode(SampleResend());
  ASSERT_EQ(bytes.size(), 37u);
  EXPECT_EQ(Read32(bytes, 28), 0x00A1B2C3u) << "offset at 28";
  EXPECT_EQ(Read32(bytes, 32), 0x00040506u) << "length at 32";
  EXPECT_EQ(bytes[36], 7) << "priority at 36";
  EXPECT_EQ(Read32(bytes, 4), 0x0102A0B0u) << "round in the common header's sequence, at 4";
}

TEST(Wire, RpcUnknownEchoesTheRoundAtOffset4) {
  const Bytes bytes = Encode(SampleRpcUnknown());
  ASSERT_EQ(bytes.size(), 28u);
  EXPECT_EQ(Read32(bytes, 4), 0x0102A0B0u) << "resend_round in sequence, at 4";
  Packet got;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  EXPECT_EQ(got.unknown.resend_round, 0x0102A0B0u);
}

// ---- Encoder contract ----

TEST(Wire, HeaderSizesMatchTheReference) {
  EXPECT_EQ(HeaderSize(PacketType::kData), 56u);
  EXPECT_EQ(HeaderSize(PacketType::kGrant), 33u);
  EXPECT_EQ(HeaderSize(PacketType::kResend), 37u);
  EXPECT_EQ(HeaderSize(PacketType::kRpcUnknown), 28u);
  EXPECT_EQ(HeaderSize(PacketType::kBusy), 28u);
  EXPECT_EQ(HeaderSize(PacketType::kCutoffs), 62u);
  EXPECT_EQ(HeaderSize(PacketType::kNeedAck), 28u);
  EXPECT_EQ(HeaderSize(PacketType::kAck), 80u);
  EXPECT_EQ(HeaderSize(PacketType::kRefused), 29u);
  EXPECT_EQ(HeaderSize(static_cast<PacketType>(0x16)), 0u) << "FREEZE is not ours";
  EXPECT_EQ(HeaderSize(static_cast<PacketType>(0x00)), 0u);
}

TEST(Wire, EncodeWritesExactlyTheHeaderAndZeroesUnusedBytes) {
  for (const Packet& p : AllSamples()) {
    SCOPED_TRACE(PacketTypeName(p.type));
    // Encode over two different backgrounds: the written bytes must not depend on them, and
    // nothing past the header may be touched.
    uint8_t over_a5[kMaxHeaderSize + 8];
    uint8_t over_5a[kMaxHeaderSize + 8];
    std::memset(over_a5, 0xA5, sizeof(over_a5));
    std::memset(over_5a, 0x5A, sizeof(over_5a));
    const size_t n = EncodeHeader(p, over_a5);
    ASSERT_EQ(n, HeaderSize(p.type));
    ASSERT_EQ(EncodeHeader(p, over_5a), n);
    EXPECT_EQ(std::memcmp(over_a5, over_5a, n), 0);
    for (size_t i = n; i < sizeof(over_a5); ++i) ASSERT_EQ(over_a5[i], 0xA5) << "byte " << i;
    // Unused slots of the common header: ack[3] at 8..10 and urgent at 18..19.
    for (size_t i : {8, 9, 10, 18, 19}) EXPECT_EQ(over_a5[i], 0) << "byte " << i;
  }
}

TEST(Wire, EncodeWritesDoffAndSequenceAsHomaDoes) {
  const Bytes data = Encode(SampleData());
  EXPECT_EQ(data[12], 14 << 4);
  EXPECT_EQ(Read32(data, 4), SampleData().data.offset);
  for (const Packet& p : AllSamples()) {
    if (p.type == PacketType::kData) continue;
    SCOPED_TRACE(PacketTypeName(p.type));
    const Bytes bytes = Encode(p);
    EXPECT_EQ(bytes[12], 5 << 4);
    // RESEND and RPC_UNKNOWN put the round there (ResendLayout, RpcUnknownEchoes...).
    if (p.type != PacketType::kResend && p.type != PacketType::kRpcUnknown) {
      EXPECT_EQ(Read32(bytes, 4), 0u);
    }
  }
}

TEST(Wire, EncodeOfUnknownTypeWritesNothing) {
  Packet p = Common(static_cast<PacketType>(0x16));
  uint8_t buf[kMaxHeaderSize];
  std::memset(buf, 0xA5, sizeof(buf));
  EXPECT_EQ(EncodeHeader(p, buf), 0u);
  EXPECT_EQ(buf[0], 0xA5);
}

TEST(Wire, AckEncodesOnlyExistingEntries) {
  Packet p = SampleAck();
  p.ack.num_acks = 2;
  const Bytes bytes = Encode(p);
  for (size_t i = 30 + 2 * 10; i < 80; ++i) EXPECT_EQ(bytes[i], 0) << "byte " << i;
}

TEST(Wire, NamesAreStable) {
  EXPECT_STREQ(PacketTypeName(PacketType::kData), "DATA");
  EXPECT_STREQ(PacketTypeName(PacketType::kGrant), "GRANT");
  EXPECT_STREQ(PacketTypeName(PacketType::kResend), "RESEND");
  EXPECT_STREQ(PacketTypeName(PacketType::kRpcUnknown), "RPC_UNKNOWN");
  EXPECT_STREQ(PacketTypeName(PacketType::kBusy), "BUSY");
  EXPECT_STREQ(PacketTypeName(PacketType::kCutoffs), "CUTOFFS");
  EXPECT_STREQ(PacketTypeName(PacketType::kNeedAck), "NEED_ACK");
  EXPECT_STREQ(PacketTypeName(PacketType::kAck), "ACK");
  EXPECT_STREQ(PacketTypeName(PacketType::kRefused), "REFUSED");
  EXPECT_STREQ(PacketTypeName(static_cast<PacketType>(0x16)), "UNKNOWN");

  EXPECT_STREQ(DecodeErrorName(DecodeError::kOk), "ok");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kTooShort), "too_short");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kBadMagic), "bad_magic");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kBadVersion), "bad_version");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kUnknownType), "unknown_type");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kTruncated), "truncated");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kBadField), "bad_field");
  EXPECT_STREQ(DecodeErrorName(DecodeError::kCount), "unknown_error");
}

// ---- Structural errors ----

TEST(Wire, ShorterThanCommonHeaderIsTooShort) {
  const Bytes full = Encode(Common(PacketType::kBusy));
  Packet got;
  for (size_t len = 0; len < kCommonHeaderSize; ++len) {
    EXPECT_EQ(Decode(absl::MakeConstSpan(full.data(), len), &got), DecodeError::kTooShort)
        << "length " << len;
  }
}

TEST(Wire, WrongMagicIsBadMagic) {
  for (size_t byte = 14; byte < 18; ++byte) {
    Bytes bytes = Encode(SampleGrant());
    bytes[byte] ^= 0x01;
    Packet got;
    EXPECT_EQ(DecodeBytes(bytes, &got), DecodeError::kBadMagic) << "flipped byte " << byte;
  }
}

TEST(Wire, MagicIsCheckedBeforeVersionAndType) {
  // A stray datagram is "not ours", not "a broken Homa packet".
  Bytes bytes(kCommonHeaderSize, 0);
  Packet got;
  EXPECT_EQ(DecodeBytes(bytes, &got), DecodeError::kBadMagic);
}

TEST(Wire, OtherVersionIsBadVersion) {
  for (uint8_t version : {0, 2, 6, 0xFF}) {  // 6 is Homa's TCP-hijack marker in `flags`
    Bytes bytes = Encode(SampleGrant());
    bytes[13] = version;
    Packet got;
    EXPECT_EQ(DecodeBytes(bytes, &got), DecodeError::kBadVersion) << "version " << int{version};
  }
}

TEST(Wire, UnknownTypeIsRejected) {
  // FREEZE (0x16) is a debugging aid of the Homa module, not part of this protocol.
  for (uint8_t type : {0x00, 0x0F, 0x16, 0x19, 0x1F, 0x21, 0xFF}) {
    Bytes bytes = Encode(Common(PacketType::kBusy));
    bytes.resize(kMaxHeaderSize + 16, 0);  // long enough for any header
    bytes[11] = type;
    Packet got;
    EXPECT_EQ(DecodeBytes(bytes, &got), DecodeError::kUnknownType) << "type " << int{type};
  }
}

TEST(Wire, EveryTypeTruncatedAtEveryLengthIsRejected) {
  for (const Packet& p : AllSamples()) {
    SCOPED_TRACE(PacketTypeName(p.type));
    const Bytes full = Encode(p);
    const size_t header = HeaderSize(p.type);
    ASSERT_EQ(full.size(), header);
    Packet got;
    for (size_t len = 0; len < header; ++len) {
      const DecodeError expected =
          len < kCommonHeaderSize ? DecodeError::kTooShort : DecodeError::kTruncated;
      EXPECT_EQ(Decode(absl::MakeConstSpan(full.data(), len), &got), expected) << "length " << len;
    }
    EXPECT_EQ(Decode(absl::MakeConstSpan(full.data(), header), &got), DecodeError::kOk);
  }
}

// ---- Field ranges ----

TEST(Wire, DataLongerThanWireMaximumIsBadField) {
  Packet p = SampleData();
  p.data.offset = 0;
  p.data.message_length = kMaxWireMessageLength;
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(10)), &got), DecodeError::kOk) << "1 GiB is allowed";
  p.data.message_length = kMaxWireMessageLength + 1;
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(10)), &got), DecodeError::kBadField);
  p.data.message_length = 0xFFFFFFFF;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField);
}

TEST(Wire, DataPayloadPastMessageEndIsBadField) {
  Packet p = SampleData();
  p.data.message_length = 100;
  p.data.offset = 90;
  Packet got;
  // Bytes [90, 100) end exactly at the message end.
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(10)), &got), DecodeError::kOk);
  // One more byte lies about the message.
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(11)), &got), DecodeError::kBadField);
}

TEST(Wire, DataOffsetPastMessageEndIsBadFieldEvenWithoutPayload) {
  Packet p = SampleData();
  p.data.message_length = 100;
  p.data.offset = 100;  // an empty packet at the very end is harmless
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kOk);
  p.data.offset = 101;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField);
}

TEST(Wire, DataOffsetThatWrapsIn32BitsIsBadField) {
  // 0xFFFFFFF0 + 32 wraps to 16 in 32-bit arithmetic, which would look inside the message.
  Packet p = SampleData();
  p.data.message_length = kMaxWireMessageLength;
  p.data.offset = 0xFFFFFFF0;
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(32)), &got), DecodeError::kBadField);
}

TEST(Wire, DataPayloadInEmptyMessageIsBadField) {
  Packet p = SampleData();
  p.data.message_length = 0;
  p.data.offset = 0;
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kOk) << "an empty message is legal";
  EXPECT_EQ(DecodeBytes(Encode(p, Bytes(1)), &got), DecodeError::kBadField);
}

TEST(Wire, AckWithMoreThanFiveEntriesIsBadField) {
  Packet p = SampleAck();
  Packet got;
  for (uint16_t n : {6, 7, 0x0100, 0xFFFF}) {
    p.ack.num_acks = n;
    EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField) << "num_acks " << n;
  }
}

TEST(Wire, PriorityAboveSevenIsBadField) {
  Packet got;
  for (uint8_t prio : {8, 0x80, 0xFF}) {
    Packet grant = SampleGrant();
    grant.grant.priority = prio;
    EXPECT_EQ(DecodeBytes(Encode(grant), &got), DecodeError::kBadField) << "GRANT " << int{prio};
    Packet resend = SampleResend();
    resend.resend.priority = prio;
    EXPECT_EQ(DecodeBytes(Encode(resend), &got), DecodeError::kBadField) << "RESEND " << int{prio};
  }
  Packet grant = SampleGrant();
  grant.grant.priority = 0;
  EXPECT_EQ(DecodeBytes(Encode(grant), &got), DecodeError::kOk) << "priority 0 is valid";
}

TEST(Wire, ResendRangeThatWrapsIsBadField) {
  Packet p = SampleResend();
  p.resend.offset = 0xFFFFFF00;
  p.resend.length = 0x100;  // ends exactly at 2^32 - 1 + 1: one past representable
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField);
  p.resend.length = 0xFF;  // ends at 0xFFFFFFFF: representable
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kOk);
  p.resend.length = kResendAll;  // the marker wraps by design
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kOk);
  p.resend.length = kResendAll - 1;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField);
}

TEST(Wire, CutoffsVersionZeroIsBadField) {
  Packet p = SampleCutoffs();
  p.cutoffs.cutoff_version = 0;
  Packet got;
  EXPECT_EQ(DecodeBytes(Encode(p), &got), DecodeError::kBadField);
}

TEST(Wire, RefusedReasonOutsideEnumIsBadField) {
  for (uint8_t reason : {0, 6, 0x20, 0xFF}) {
    Bytes bytes = Encode(SampleRefused());
    bytes[28] = reason;
    Packet got;
    EXPECT_EQ(DecodeBytes(bytes, &got), DecodeError::kBadField) << "reason " << int{reason};
  }
}

// ---- What receivers ignore and accept ----

TEST(Wire, ControlPacketPaddingIsAccepted) {
  for (const Packet& p : AllSamples()) {
    if (p.type == PacketType::kData) continue;
    SCOPED_TRACE(PacketTypeName(p.type));
    const Bytes padded = Encode(p, Bytes(23, 0xEE));
    Packet got;
    ASSERT_EQ(DecodeBytes(padded, &got), DecodeError::kOk);
    ExpectSamePacket(p, got);
    EXPECT_TRUE(got.payload.empty()) << "padding is not payload";
  }
}

TEST(Wire, IgnoredBytesDoNotChangeTheDecode) {
  for (const Packet& p : AllSamples()) {
    SCOPED_TRACE(PacketTypeName(p.type));
    Bytes bytes = Encode(p);
    // sequence (4..7; RESEND and RPC_UNKNOWN carry the round there), ack[3] (8..10),
    // doff (12), urgent (18..19).
    for (size_t i : {8, 9, 10, 12, 18, 19}) bytes[i] = 0xC3;
    if (p.type != PacketType::kResend && p.type != PacketType::kRpcUnknown) {
      for (size_t i : {4, 5, 6, 7}) bytes[i] = 0xC3;
    }
    if (p.type == PacketType::kData) {
      for (size_t i : {49, 50, 51}) bytes[i] = 0xC3;  // pad
    }
    Packet got;
    ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
    ExpectSamePacket(p, got);
  }
}

TEST(Wire, DataSequenceIsIgnoredInFavourOfSegOffset) {
  Packet p = SampleData();
  Bytes bytes = Encode(p);
  bytes[4] = 0x7F;  // sequence now says something else
  Packet got;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  EXPECT_EQ(got.data.offset, p.data.offset);
}

TEST(Wire, AnyNonZeroRetransmitByteMeansRetransmit) {
  Bytes bytes = Encode(SampleData());
  Packet got;
  bytes[48] = 0x80;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  EXPECT_TRUE(got.data.retransmit);
  bytes[48] = 0;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  EXPECT_FALSE(got.data.retransmit);
}

TEST(Wire, AckEntriesPastNumAcksAreIgnored) {
  Packet p = SampleAck();
  p.ack.num_acks = 2;
  Bytes bytes = Encode(p);
  for (size_t i = 30 + 2 * 10; i < 80; ++i) bytes[i] = 0x99;  // garbage in unused entries
  Packet got;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  ASSERT_EQ(got.ack.num_acks, 2);
  EXPECT_EQ(got.ack.acks[0].client_id, p.ack.acks[0].client_id);
  EXPECT_EQ(got.ack.acks[1].server_port, p.ack.acks[1].server_port);
  for (size_t i = 2; i < kMaxAcksPerPacket; ++i) {
    EXPECT_EQ(got.ack.acks[i].client_id, 0u) << "entry " << i;
    EXPECT_EQ(got.ack.acks[i].server_port, 0u) << "entry " << i;
  }
}

TEST(Wire, DataPayloadAliasesTheDatagram) {
  const Bytes bytes = Encode(SampleData(), Bytes(300, 0x42));
  Packet got;
  ASSERT_EQ(DecodeBytes(bytes, &got), DecodeError::kOk);
  EXPECT_EQ(got.payload.data(), bytes.data() + kDataHeaderSize) << "no copy";
  EXPECT_EQ(got.payload.size(), 300u) << "everything after the 56-byte header";
}

TEST(Wire, DecodeIsAFixedPointOfEncode) {
  // Decode -> EncodeHeader -> same bytes, for every sample: nothing is lost or invented.
  for (const Packet& p : AllSamples()) {
    SCOPED_TRACE(PacketTypeName(p.type));
    const Bytes first = Encode(p);
    Packet got;
    ASSERT_EQ(DecodeBytes(first, &got), DecodeError::kOk);
    EXPECT_EQ(Encode(got), first);
  }
}

}  // namespace
}  // namespace homarpc::transport::wire
