// transport_echo: registers the transport-echo scenario and its floors (see transport_echo.h).
#include "tools/bench/transport_echo.h"

#include <memory>

#include "tools/bench/tcp_floor.h"
#include "tools/bench/udp_floor.h"

namespace homarpc::bench {

uint64_t TransportEchoResponseBytes(uint64_t size) {
  return size <= kFullEchoMaxBytes ? size : kAckBytes;
}

void RegisterTransportEcho(Registry& registry) {
  registry.AddScenario(kTransportEcho,
                       "One request of `size` bytes, answered by its echo up to 65000 bytes and "
                       "by an 8-byte ack above (a one-way bulk transfer).",
                       TransportEchoResponseBytes);
  registry.AddSystem(kTransportEcho, std::make_unique<UdpFloor>(UdpFloor::Wait::kBusyPoll));
  registry.AddSystem(kTransportEcho, std::make_unique<UdpFloor>(UdpFloor::Wait::kBlock));
  registry.AddSystem(kTransportEcho, std::make_unique<TcpFloor>());
}

}  // namespace homarpc::bench
