// transport_echo: the "transport-echo" scenario and its raw floors.
//
// The client sends a request of `size` bytes and waits for the response; the next request
// goes out when the response is in (per slot, with --concurrency slots). The shape:
//   - size <= kFullEchoMaxBytes (65000): the response is the request echoed, `size` bytes —
//     one datagram each way in the UDP floors;
//   - larger sizes: the response is a kAckBytes-byte ack, so the round trip is a one-way bulk
//     transfer and goodput is the one-way rate (the shape of a large KV-cache put).
// Point::request_bytes and Point::response_bytes carry the shape to every system, so a system
// that honours them (homarpc's: a request message of request_bytes, a response message of
// response_bytes) measures the same thing as the floors.
//
// Floors registered here: udp-floor, udp-floor-blocking (sizes <= 65000), tcp-floor
// (sizes >= 64 KiB). homarpc's systems come from RegisterHomarpcSystems().
#ifndef HOMARPC_TOOLS_BENCH_TRANSPORT_ECHO_H_
#define HOMARPC_TOOLS_BENCH_TRANSPORT_ECHO_H_

#include <cstdint>

#include "tools/bench/system.h"

namespace homarpc::bench {

inline constexpr const char kTransportEcho[] = "transport-echo";
inline constexpr uint64_t kFullEchoMaxBytes = 65000;
inline constexpr uint64_t kAckBytes = 8;

// The transport-echo response size for a request of `size` bytes.
uint64_t TransportEchoResponseBytes(uint64_t size);

// Adds the transport-echo scenario and its floors to `registry`.
void RegisterTransportEcho(Registry& registry);

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_TRANSPORT_ECHO_H_
