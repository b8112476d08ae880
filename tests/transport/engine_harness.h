// EngineHarness: engines on a manual clock wired together by hand, for protocol tests that
// assert the exact packets an engine emits. Each Host captures what its engine sends (copied
// and decoded); the test decides which captured packets to deliver, drop, duplicate or
// reorder. Single-threaded, like the engine.
#ifndef HOMARPC_TESTS_TRANSPORT_ENGINE_HARNESS_H_
#define HOMARPC_TESTS_TRANSPORT_ENGINE_HARNESS_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "transport/engine.h"
#include "transport/wire.h"

namespace homarpc::transport::testing {

struct Captured {
  Address dest;
  uint8_t priority = 0;
  std::vector<uint8_t> bytes;
  wire::Packet Decoded() const {
    wire::Packet p;
    wire::DecodeError e = wire::Decode(bytes, &p);
    if (e != wire::DecodeError::kOk) std::abort();
    return p;
  }
  wire::PacketType type() const { return Decoded().type; }
};

struct Response {
  RpcId id;
  uint64_t cookie;
  absl::StatusOr<std::string> result;
};

struct Request {
  ServerRpcHandle handle;
  std::string bytes;
};

class Host : public PacketSink, public EngineHandler {
 public:
  Host(const Config& config, const Clock* clock, const Address& address)
      : address_(address), engine_(config, clock, this, this, address.port(), address.is_v6()) {}

  void Send(const OutPacket& packet) override {
    Captured c;
    c.dest = packet.dest;
    c.priority = packet.priority;
    c.bytes.assign(packet.header, packet.header + packet.header_len);
    c.bytes.insert(c.bytes.end(), packet.payload.begin(), packet.payload.end());
    c.bytes.insert(c.bytes.end(), packet.payload2.begin(), packet.payload2.end());
    outbox.push_back(std::move(c));
  }
  Route RouteTo(const Address& dest) override {
    ++route_queries;
    auto it = routes.find(dest);
    return it == routes.end() ? Route() : it->second;
  }
  void OnRequest(const ServerRpcHandle& rpc, Buffer request) override {
    requests.push_back({rpc, std::string(request.view())});
    if (auto_respond) {
      absl::Status s = engine_.SendResponse(rpc, auto_respond(requests.back().bytes));
      if (!s.ok()) std::abort();
    }
  }
  void OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) override {
    if (response.ok()) {
      responses.push_back({id, cookie, std::string(response->view())});
    } else {
      responses.push_back({id, cookie, response.status()});
    }
  }

  Engine& engine() { return engine_; }
  const Address& address() const { return address_; }
  // Packets of one type in the outbox.
  std::vector<Captured> OfType(wire::PacketType type) const {
    std::vector<Captured> out;
    for (const Captured& c : outbox) {
      if (c.type() == type) out.push_back(c);
    }
    return out;
  }
  size_t CountType(wire::PacketType type) const { return OfType(type).size(); }

  std::deque<Captured> outbox;
  // What RouteTo reports per destination (absent: {}, MTU unknown and not local), and how
  // often it was asked.
  absl::flat_hash_map<Address, Route> routes;
  int route_queries = 0;
  std::vector<Request> requests;
  std::vector<Response> responses;
  // When set, every request is answered at once with this function's result.
  std::function<Buffer(const std::string&)> auto_respond;

 private:
  Address address_;
  Engine engine_;
};

// A set of hosts on one manual clock.
class Net {
 public:
  explicit Net(Config config = Config()) : config_(config) {}
  Host* AddHost(const std::string& address) {
    hosts_.push_back(
        std::make_unique<Host>(config_, &clock, Address::Parse(address).value()));
    return hosts_.back().get();
  }
  Host* Find(const Address& a) {
    for (auto& h : hosts_) {
      if (h->address() == a) return h.get();
    }
    return nullptr;
  }
  // Delivers every packet in `from`'s outbox for which `keep` returns true (default: all),
  // dropping the others. Returns how many were delivered.
  int Flush(Host* from, const std::function<bool(const Captured&)>& keep = nullptr) {
    int n = 0;
    while (!from->outbox.empty()) {
      Captured c = std::move(from->outbox.front());
      from->outbox.pop_front();
      Host* to = Find(c.dest);
      if (to == nullptr || (keep && !keep(c))) continue;
      to->engine().HandlePacket(from->address(), c.bytes);
      ++n;
    }
    from->engine().Reap();
    return n;
  }
  // Moves packets between all hosts until nobody has anything to send (or `max_rounds`).
  void Settle(int max_rounds = 100000,
              const std::function<bool(const Host*, const Captured&)>& keep = nullptr) {
    for (int round = 0; round < max_rounds; ++round) {
      bool any = false;
      for (auto& h : hosts_) {
        if (h->outbox.empty()) continue;
        any = true;
        Host* from = h.get();
        Flush(from, keep ? std::function<bool(const Captured&)>(
                               [&](const Captured& c) { return keep(from, c); })
                         : nullptr);
      }
      if (!any) return;
    }
  }
  // Advances the clock by `nanos` in steps, running timers and settling packets.
  void Run(int64_t nanos, const std::function<bool(const Host*, const Captured&)>& keep = nullptr) {
    const int64_t end = clock.NowNanos() + nanos;
    while (true) {
      int64_t next = end;
      for (auto& h : hosts_) next = std::min(next, h->engine().NextTimerNanos());
      if (next > clock.NowNanos()) clock.Set(next);
      for (auto& h : hosts_) {
        if (h->engine().NextTimerNanos() <= clock.NowNanos()) h->engine().OnTimer();
      }
      Settle(100000, keep);
      if (clock.NowNanos() >= end) return;
    }
  }
  void Ticks(int n) { Run(int64_t{n} * config_.tick_usecs * 1000); }

  ManualClock clock;
  const Config& config() const { return config_; }

 private:
  Config config_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

// The default config with pacing off (link_mbps = 0), so packets flow without the clock
// moving; engine_test's Engine_PacerHoldsBackLongMessage covers the pacer.
inline Config Unpaced() {
  Config c;
  c.link_mbps = 0;
  return c;
}

inline Buffer Bytes(size_t n, uint8_t seed = 1) {
  Buffer b(n);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return b;
}
inline std::string Str(const Buffer& b) { return std::string(b.view()); }

}  // namespace homarpc::transport::testing

#endif  // HOMARPC_TESTS_TRANSPORT_ENGINE_HARNESS_H_
