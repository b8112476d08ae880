// PacketSink: where the engine hands the packets it wants sent.
//
// The engine emits OutPackets; an I/O backend (or the in-memory fabric) implements the sink.
// A packet is a small header copied into the OutPacket plus one or two payload spans that point
// into a message the engine holds (MessageBytes): nothing is copied on the way out. The spans
// stay valid until the engine's next Reap(), which its owner calls only after the sink has
// flushed (see engine.h), so a sink may hold spans across a batch and send them with one
// system call (UDP GSO: consecutive packets with the same destination, priority and size).
#ifndef HOMARPC_TRANSPORT_PACKET_SINK_H_
#define HOMARPC_TRANSPORT_PACKET_SINK_H_

#include <cstdint>

#include "absl/types/span.h"
#include "transport/address.h"
#include "transport/wire.h"

namespace homarpc::transport {

struct OutPacket {
  Address dest;
  uint8_t priority = 0;  // 0..7; the sink sets IP TOS / traffic class to priority << 5
  uint8_t header_len = 0;
  uint8_t header[wire::kMaxHeaderSize];
  // DATA only, held by the engine: the payload is `payload` followed by `payload2` (empty
  // unless the packet spans two segments of a gathered message).
  absl::Span<const uint8_t> payload;
  absl::Span<const uint8_t> payload2;

  size_t payload_size() const { return payload.size() + payload2.size(); }
  size_t size() const { return header_len + payload_size(); }
};

// What the kernel's routing table says about the way to one destination.
struct Route {
  // The route's MTU in bytes; 0 when unknown.
  uint32_t mtu = 0;
  // The destination is this host: a loopback address, or one of this host's own addresses.
  // Its packets go through the loopback device, never through a NIC's queue.
  bool local = false;
};

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  // Queues one packet. Called only from the engine's thread. Must not call back into the
  // engine. Send failures are the sink's to count: Homa recovers lost packets.
  virtual void Send(const OutPacket& packet) = 0;
  // The route to `dest`, or {} when the sink cannot tell (the default: MTU unknown, not
  // local). Asked once per peer, when the engine first meets it (Config::use_path_mtu,
  // Config::pace_local).
  virtual Route RouteTo(const Address& dest) { return {}; }
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_PACKET_SINK_H_
