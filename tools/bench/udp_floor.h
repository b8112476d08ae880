// udp_floor: the raw-UDP floors of the transport-echo scenario.
//
// "udp-floor": a client and a server process ping-pong one datagram per message over
// loopback, both spinning on non-blocking recv (the best small-message round trip the kernel
// offers; about 5 us on the reference machine). "udp-floor-blocking": the same exchange with
// plain blocking recv on both sides, so every message pays a thread wake-up (about 55 us
// there). Together they bracket what homarpc's spin-then-sleep loops can reach.
//
// One datagram per message means sizes above kMaxUdpFloorBytes are skipped: a bigger message
// needs segmentation and reassembly, which is exactly the work homarpc adds, so a floor that
// did it would no longer be a floor. The floor also ignores --mtu (loopback carries a 64 KiB
// datagram without fragmenting), which makes it an optimistic bound for sizes above the MTU.
//
// "udp-floor-work" (unary scenario; run only when --systems names it): the busy-polled floor
// plus --floor_work_ns of busy work per call, half on the server between its receive and its
// send, a quarter in the client before its send and a quarter after its receive, all inside
// the timed call. It stands for an RPC system whose own code takes that long: on a machine
// whose CPUs are taken away now and then, a call's share of interrupted calls grows with its
// length, and with it p99 (docs/rpc-benchmarks.md, session 23). Not a floor: ratios still
// divide by udp-floor.
//
// Each request starts with an 8-byte tag (slot, sequence number) that the server echoes, so
// --concurrency > 1 keeps several requests in flight on one socket, and a reply that never
// comes (loopback drops when a socket buffer overflows) is detected and the request resent
// after kUdpResendMillis rather than hanging the run; resends are reported as the extra
// "lost_replies". Samples are taken only from replies to the latest send of a slot.
#ifndef HOMARPC_TOOLS_BENCH_UDP_FLOOR_H_
#define HOMARPC_TOOLS_BENCH_UDP_FLOOR_H_

#include <cstdint>
#include <string>

#include "tools/bench/system.h"

namespace homarpc::bench {

// The largest message the UDP floors send: one IPv4 UDP datagram carries at most 65507 bytes;
// this rounds down to a figure that reads as "about 64 KiB" and is not itself a test size.
inline constexpr uint64_t kMaxUdpFloorBytes = 65000;
// Bytes at the front of each request that identify it (4-byte slot, 4-byte sequence).
inline constexpr uint64_t kUdpTagBytes = 8;
// A reply missing this long counts as lost and the request is sent again.
inline constexpr int64_t kUdpResendMillis = 200;

class UdpFloor final : public System {
 public:
  enum class Wait { kBusyPoll, kBlock };
  // `with_work`: udp-floor-work (the work is RunSettings::floor_work_ns; busy-polled only,
  // the name says nothing of a wait).
  explicit UdpFloor(Wait wait, bool with_work = false)
      : wait_(wait), with_work_(with_work && wait == Wait::kBusyPoll) {}

  std::string name() const override;
  bool is_floor() const override { return !with_work_; }
  bool in_default_run() const override { return !with_work_; }
  std::string SkipReason(const Point& point) const override;
  absl::Status Serve(const Point& point, ServerEnv& env) const override;
  absl::StatusOr<ClientSamples> RunClient(const Point& point, uint16_t server_port) const override;

 private:
  const Wait wait_;
  const bool with_work_;
};

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_UDP_FLOOR_H_
