// FabricEngineNode / FabricHost: an Engine attached to the in-memory Fabric, answering requests with an echo
// (optionally) and recording every completion, for conformance and chaos tests.
#ifndef HOMARPC_TESTS_TRANSPORT_FABRIC_ENGINE_H_
#define HOMARPC_TESTS_TRANSPORT_FABRIC_ENGINE_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/engine.h"
#include "transport/fabric.h"

namespace homarpc::transport::testing {

// FabricEngineNode: the plumbing of an engine attached to the fabric — packets in through
// FabricNode, packets out through the fabric's sink, reaping after every step (the fabric copies
// each packet at Send). Subclasses decide what to do with requests and completions.
class FabricEngineNode : public FabricNode, public PacketSink, public EngineHandler {
 public:
  FabricEngineNode(Fabric* fabric, ManualClock* clock, const Address& address,
                   const Config& config)
      : address_(address) {
    out_ = fabric->Attach(address, this);
    engine_ = std::make_unique<Engine>(config, clock, this, this, address.port(), address.is_v6());
  }

  // FabricNode
  void Deliver(const Address& from, absl::Span<const uint8_t> bytes) override {
    engine_->HandlePacket(from, bytes);
  }
  int64_t NextTimerNanos() const override { return engine_->NextTimerNanos(); }
  void OnTimer() override { engine_->OnTimer(); }
  void AfterStep() override { engine_->Reap(); }
  // PacketSink
  void Send(const OutPacket& packet) override { out_->Send(packet); }

  Engine& engine() { return *engine_; }
  const Address& address() const { return address_; }

 private:
  Address address_;
  PacketSink* out_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

class FabricHost : public FabricEngineNode {
 public:
  FabricHost(Fabric* fabric, ManualClock* clock, const Address& address, const Config& config,
             bool echo)
      : FabricEngineNode(fabric, clock, address, config), echo_(echo) {}

  // EngineHandler
  void OnRequest(const ServerRpcHandle& rpc, Buffer request) override {
    ++requests;
    if (echo_ && !engine().SendResponse(rpc, std::move(request)).ok()) std::abort();
  }
  void OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) override {
    ++completions[cookie];
    if (response.ok()) {
      results[cookie] = std::string(response->view());
    } else {
      results[cookie] = response.status();
    }
  }

  uint64_t requests = 0;
  std::map<uint64_t, int> completions;  // cookie -> how many times it completed
  std::map<uint64_t, absl::StatusOr<std::string>> results;

 private:
  bool echo_;
};

}  // namespace homarpc::transport::testing

#endif  // HOMARPC_TESTS_TRANSPORT_FABRIC_ENGINE_H_
