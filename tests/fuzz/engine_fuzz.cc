// Fuzz target for the engine's packet input: a sequence of datagrams from two fake peers is
// fed to an engine that is at once a server (with a request in service) and a client (with a
// request in flight), with time advancing between datagrams so timers run too. Whatever the
// bytes, the engine must not crash, leak (ASan) or break its own accounting.
//
// Input format: repeated [1 byte: peer (bit 0) and time step (bits 1..7, in 100 us units)]
// [2 bytes big-endian: length L] [L bytes: the datagram].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "transport/engine.h"

namespace {

using namespace homarpc::transport;

class Sink : public PacketSink, public EngineHandler {
 public:
  void Send(const OutPacket& p) override {
    // Every packet the engine emits must itself decode.
    uint8_t buf[wire::kMaxHeaderSize + 2048];
    size_t n = p.header_len;
    __builtin_memcpy(buf, p.header, n);
    wire::Packet decoded;
    if (p.payload.size() <= 2048) {
      __builtin_memcpy(buf + n, p.payload.data(), p.payload.size());
      n += p.payload.size();
      if (wire::Decode(absl::MakeConstSpan(buf, n), &decoded) != wire::DecodeError::kOk) {
        std::fprintf(stderr, "engine emitted an undecodable packet\n");
        std::abort();
      }
    }
  }
  void OnRequest(const ServerRpcHandle& rpc, Buffer request) override {
    // Answer every other request at once, leave the rest in service.
    if ((++requests & 1) == 0 && engine != nullptr) {
      (void)engine->SendResponse(rpc, Buffer::CopyOf(request.view()));
    }
  }
  void OnResponse(RpcId, uint64_t, absl::StatusOr<Buffer>) override { ++responses; }
  Engine* engine = nullptr;
  uint64_t requests = 0;
  uint64_t responses = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ManualClock clock;
  Sink sink;
  Config config;
  config.max_message_length = 1 << 20;  // keep allocations small
  config.max_rx_bytes_held = 4 << 20;
  Engine engine(config, &clock, &sink, &sink, 5000, false);
  sink.engine = &engine;
  const Address peers[2] = {Address::Parse("10.0.0.1:40000").value(),
                            Address::Parse("10.0.0.2:5000").value()};
  // A client RPC in flight to peer 1 (id 2), so response packets have something to hit.
  (void)engine.SendRequest(peers[1], Buffer(3000), 1);
  size_t i = 0;
  while (i + 3 <= size) {
    const uint8_t control = data[i];
    const size_t len = (size_t{data[i + 1]} << 8) | data[i + 2];
    i += 3;
    if (len > size - i) break;
    clock.Advance(int64_t{control >> 1} * 100 * kNanosPerMicro);
    engine.OnTimer();
    engine.HandlePacket(peers[control & 1], absl::MakeConstSpan(data + i, len));
    engine.Reap();
    i += len;
  }
  // Let every timer run out: the engine must then hold no state for anyone.
  for (int t = 0; t < 1200; ++t) {
    clock.Advance(kNanosPerMilli);
    engine.OnTimer();
    engine.Reap();
  }
  const EngineStats& s = engine.stats();
  if (s.client_rpcs != 0 || s.rx_bytes_held != 0) {
    std::fprintf(stderr, "state left behind: client_rpcs=%llu rx_bytes_held=%llu\n",
                 static_cast<unsigned long long>(s.client_rpcs),
                 static_cast<unsigned long long>(s.rx_bytes_held));
    std::abort();
  }
  return 0;
}
