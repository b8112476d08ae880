// Writes the seed corpus of the `wire` fuzz target: one small file per packet shape.
//
//   make_wire_corpus <directory>      (normally tests/fuzz/corpus/wire)
//
// Seeds are built with wire::EncodeHeader, so they follow the codec; run this again after a
// change to the wire format and commit the result. The output is deterministic (same bytes
// on every run) so an unchanged format gives an unchanged corpus. Besides one valid packet of
// every type, a few seeds sit just past a validation rule (a payload one byte past the
// message end, an ACK with 6 entries, a FREEZE packet) so the fuzzer starts at the edges.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "transport/wire.h"

namespace homarpc::transport::wire {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes Encode(const Packet& p, size_t payload_size = 0) {
  uint8_t header[kMaxHeaderSize];
  const size_t n = EncodeHeader(p, header);
  Bytes out(header, header + n);
  for (size_t i = 0; i < payload_size; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 3));
  return out;
}

Packet Common(PacketType type, uint64_t sender_id) {
  Packet p;
  p.type = type;
  p.sport = 40001;
  p.dport = 5000;
  p.sender_id = sender_id;
  return p;
}

struct Seed {
  std::string name;
  Bytes bytes;
};

std::vector<Seed> MakeSeeds() {
  std::vector<Seed> seeds;

  // A whole small request in one packet, with a piggybacked ack and known cutoffs.
  Packet data = Common(PacketType::kData, 42);
  data.data.message_length = 200;
  data.data.incoming = 200;
  data.data.ack = {40, 5000};
  data.data.cutoff_version = 1;
  data.data.offset = 0;
  seeds.push_back({"data_whole", Encode(data, 200)});

  // The middle of a long message, retransmitted.
  data.sender_id = 43;
  data.data.message_length = 1u << 20;
  data.data.incoming = 40000;
  data.data.ack = {};
  data.data.retransmit = true;
  data.data.offset = 2832;
  seeds.push_back({"data_middle_retransmit", Encode(data, 300)});

  // An empty message: legal, no payload.
  data.sender_id = 44;
  data.data.message_length = 0;
  data.data.incoming = 0;
  data.data.retransmit = false;
  data.data.offset = 0;
  data.data.cutoff_version = 0;
  seeds.push_back({"data_empty_message", Encode(data)});

  // The last byte of the largest message the wire admits.
  data.data.message_length = kMaxWireMessageLength;
  data.data.offset = kMaxWireMessageLength - 1;
  seeds.push_back({"data_last_byte_of_1GiB", Encode(data, 1)});

  // One byte past the message end: rejected (kBadField).
  data.data.message_length = 100;
  data.data.offset = 0;
  seeds.push_back({"bad_data_past_end", Encode(data, 101)});

  Packet grant = Common(PacketType::kGrant, 43);
  grant.grant.offset = 80000;
  grant.grant.priority = 3;
  seeds.push_back({"grant", Encode(grant)});

  Packet resend = Common(PacketType::kResend, 43);
  resend.resend.offset = 1416;
  resend.resend.length = 2832;
  resend.resend.priority = 7;
  resend.resend.round = 3;
  seeds.push_back({"resend_range", Encode(resend)});
  resend.resend.offset = 0;
  resend.resend.length = kResendAll;
  seeds.push_back({"resend_all", Encode(resend)});

  Packet unknown = Common(PacketType::kRpcUnknown, 43);
  unknown.unknown.resend_round = 3;
  seeds.push_back({"rpc_unknown", Encode(unknown)});
  seeds.push_back({"busy", Encode(Common(PacketType::kBusy, 43))});
  seeds.push_back({"need_ack", Encode(Common(PacketType::kNeedAck, 43))});

  Packet cutoffs = Common(PacketType::kCutoffs, 43);
  cutoffs.cutoffs.unsched_cutoffs = {0xFFFFFFFF, 0, 0, 0, 1000000, 15000, 2800, 200};
  cutoffs.cutoffs.cutoff_version = 1;
  seeds.push_back({"cutoffs", Encode(cutoffs)});

  Packet ack = Common(PacketType::kAck, 42);
  ack.ack.num_acks = 3;
  ack.ack.acks[0] = {2, 5000};
  ack.ack.acks[1] = {4, 5000};
  ack.ack.acks[2] = {6, 5001};
  seeds.push_back({"ack_three", Encode(ack)});
  ack.ack.num_acks = 6;  // rejected (kBadField)
  seeds.push_back({"bad_ack_six", Encode(ack)});

  Packet refused = Common(PacketType::kRefused, 43);
  refused.refused.reason = RefuseReason::kMessageTooLong;
  seeds.push_back({"refused_too_long", Encode(refused)});
  refused.refused.reason = RefuseReason::kNoMemory;
  seeds.push_back({"refused_no_memory", Encode(refused)});

  // A control packet with padding after its header: accepted.
  Bytes padded = Encode(Common(PacketType::kBusy, 43));
  padded.resize(64, 0);
  seeds.push_back({"busy_padded", padded});

  // FREEZE (0x16) from the Homa module: not ours (kUnknownType).
  Bytes freeze = Encode(Common(PacketType::kBusy, 43));
  freeze[11] = 0x16;
  seeds.push_back({"bad_freeze", freeze});

  return seeds;
}

}  // namespace
}  // namespace homarpc::transport::wire

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  for (const auto& seed : homarpc::transport::wire::MakeSeeds()) {
    const std::string path = std::string(argv[1]) + "/" + seed.name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      std::perror(path.c_str());
      return 1;
    }
    const size_t written = std::fwrite(seed.bytes.data(), 1, seed.bytes.size(), f);
    if (std::fclose(f) != 0 || written != seed.bytes.size()) {
      std::perror(path.c_str());
      return 1;
    }
    std::printf("%s: %zu bytes\n", path.c_str(), seed.bytes.size());
  }
  return 0;
}
