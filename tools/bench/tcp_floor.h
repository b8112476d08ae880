// tcp_floor: the raw-TCP floor of the transport-echo and unary scenarios, for large messages.
//
// "tcp-floor": a client process writes a request of `request_bytes` on a loopback TCP
// connection and the server process answers with `response_bytes` once the whole request has
// arrived. In transport-echo a request above 65000 bytes gets an 8-byte ack (transport_echo.h),
// so a round trip is a one-way bulk transfer plus a tiny reply — the same shape as a homarpc
// RPC carrying a large request and a small response — and goodput = bytes / time is the
// one-way rate. In unary the response is as long as the request: a raw echo, what a 1 MiB
// unary call could take over TCP on this machine in that minute, without any RPC system's
// framing or copies. Latency is per message, from the first byte written to the reply read.
//
// Kernel TCP is what gRPC rides on, and over loopback it moves bulk data with large segments
// and no per-packet user-space work: it is the bar homarpc's multi-packet messages are held
// to. TCP_NODELAY is set (the ack must not wait for Nagle), and 8 MiB socket buffers are set
// before connecting so a 16 MiB message is not window-limited. Both sides block in the kernel
// (no busy polling): bulk transfers spend their time copying, not waking up.
//
// Runs only sizes >= kMinTcpFloorBytes: below that the UDP floors are the floor.
// --concurrency N opens N connections, each driven by its own client thread and served by its
// own server thread, one message in flight per connection.
#ifndef HOMARPC_TOOLS_BENCH_TCP_FLOOR_H_
#define HOMARPC_TOOLS_BENCH_TCP_FLOOR_H_

#include <cstdint>
#include <string>

#include "tools/bench/system.h"

namespace homarpc::bench {

inline constexpr uint64_t kMinTcpFloorBytes = 64 << 10;

class TcpFloor final : public System {
 public:
  std::string name() const override { return "tcp-floor"; }
  bool is_floor() const override { return true; }
  std::string SkipReason(const Point& point) const override;
  absl::Status Serve(const Point& point, ServerEnv& env) const override;
  absl::StatusOr<ClientSamples> RunClient(const Point& point, uint16_t server_port) const override;
};

}  // namespace homarpc::bench

#endif  // HOMARPC_TOOLS_BENCH_TCP_FLOOR_H_
