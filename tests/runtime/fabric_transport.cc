// FabricNetwork: engines on the in-memory fabric behind MessageTransport (fabric_transport.h).
//
// DESIGN NOTES
// One driver thread owns the fabric, the ManualClock and every engine, as a Loop owns its
// engine: each iteration it runs the closures other threads posted, sets the clock to
// MonotonicClock's now, aborts client RPCs whose deadline passed, and steps the fabric through
// every event due by then (packet deliveries, engine timers, reaping). Setting the clock only
// forward to the real time makes the fabric a real-time network: its latency (2 us by default)
// is honoured as wall-clock time, and silence timeouts mean what they mean over UDP. When an
// iteration finds nothing to do the driver spins for spin_nanos, then sleeps on a CondVar
// until the next fabric event or deadline, or a Post().
//
// Calls from the driver thread itself (a response callback starting another call, a callback
// service replying inline) run inline, as Endpoint does on its loop thread: the engine allows
// SendRequest/SendResponse/AbortClientRpc from inside its callbacks, and the fabric allows
// sends, attaches and detaches from inside steps.
//
// Lifetime: a transport's Node (engine + fabric adapter) is shared between the transport, the
// network's list and the closures posted for it. Stopping (or destroying) the transport
// closes the node on the driver (fail client RPCs CANCELLED, detach, stop delivering) and
// leaves it in a graveyard that is emptied only between steps: Stop or the destructor may run
// inside one of the node's own engine callbacks (a channel dropped in its last completion),
// and the engine must outlive that call. Closures posted before the close find the node
// closed and fail or drop their work.
#include "tests/runtime/fabric_transport.h"

#include <algorithm>
#include <queue>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "transport/engine.h"
#include "transport/log.h"
#include "transport/packet_sink.h"

namespace homarpc::testing {

using internal::MessageTransport;
using transport::Address;
using transport::Buffer;
using transport::MessageBytes;
using transport::kNanosPerMicro;
using transport::MonotonicClock;

// ---------------------------------------------------------------------------------------------
// Node: one engine on the fabric. Driver thread only.

class FabricNetwork::Node final : public transport::FabricNode,
                                  public transport::PacketSink,
                                  public transport::EngineHandler {
 public:
  Node(transport::Fabric* fabric, const transport::Clock* clock, const Address& address,
       const transport::Config& config, MessageTransport::RequestHandler handler)
      : fabric_(fabric), address_(address), handler_(std::move(handler)) {
    engine_ = std::make_unique<transport::Engine>(config, clock, this, this, address.port(),
                                                  address.is_v6());
    out_ = fabric_->Attach(address, this);
  }

  const Address& address() const { return address_; }
  bool closed() const { return closed_; }
  transport::Engine& engine() { return *engine_; }

  void StartClientRpc(uint64_t token, const Address& dest, MessageBytes request,
                      MessageTransport::ResponseCallback done, int64_t deadline_nanos) {
    if (closed_) {
      done(absl::CancelledError("transport destroyed"));
      return;
    }
    absl::StatusOr<transport::RpcId> id = engine_->SendRequest(dest, std::move(request), token);
    if (!id.ok()) {  // refused before sending: the engine reports no completion
      done(id.status());
      return;
    }
    pending_.emplace(token, Pending{*id, std::move(done)});
    if (deadline_nanos != INT64_MAX) deadlines_.emplace(deadline_nanos, token);
  }

  void AbortClientRpc(uint64_t token, absl::Status status) {
    auto it = pending_.find(token);
    if (it == pending_.end()) return;
    engine_->AbortClientRpc(it->second.id, std::move(status));  // fires OnResponse
  }

  void SendResponse(const transport::ServerRpcHandle& rpc, MessageBytes response) {
    if (closed_) return;
    absl::Status s = engine_->SendResponse(rpc, std::move(response));
    if (!s.ok()) HOMARPC_LOG(INFO) << "fabric response not sent: " << s.ToString();
  }

  // Aborts client RPCs whose deadline has passed; returns whether any was due.
  bool RunDeadlines(int64_t now) {
    bool any = false;
    while (!deadlines_.empty() && deadlines_.top().first <= now) {
      const uint64_t token = deadlines_.top().second;
      deadlines_.pop();
      any = true;
      AbortClientRpc(token, absl::DeadlineExceededError("deadline exceeded"));
    }
    return any;
  }
  int64_t NextDeadlineNanos() {
    // Entries of RPCs that already completed linger until due (like Loop's); drop them from
    // the top so they do not wake the driver for nothing.
    while (!deadlines_.empty() && !pending_.contains(deadlines_.top().second)) deadlines_.pop();
    return deadlines_.empty() ? INT64_MAX : deadlines_.top().first;
  }

  // Fails every client RPC with CANCELLED and leaves the fabric. Idempotent.
  void Close() {
    if (closed_) return;
    closed_ = true;
    // Callbacks may start new RPCs on this node (they fail at once: closed_).
    while (!pending_.empty()) {
      std::vector<uint64_t> tokens;
      tokens.reserve(pending_.size());
      for (auto& [token, pending] : pending_) tokens.push_back(token);
      for (uint64_t token : tokens)
        AbortClientRpc(token, absl::CancelledError("transport destroyed"));
    }
    fabric_->Detach(address_);
    handler_ = nullptr;  // may hold the runtime's objects; never called again
  }

  // FabricNode
  void Deliver(const Address& from, absl::Span<const uint8_t> bytes) override {
    if (!closed_) engine_->HandlePacket(from, bytes);
  }
  int64_t NextTimerNanos() const override {
    return closed_ ? INT64_MAX : engine_->NextTimerNanos();
  }
  void OnTimer() override {
    if (!closed_) engine_->OnTimer();
  }
  void AfterStep() override { engine_->Reap(); }

  // PacketSink
  void Send(const transport::OutPacket& packet) override { out_->Send(packet); }

  // EngineHandler
  void OnRequest(const transport::ServerRpcHandle& rpc, Buffer request) override {
    // Client-only nodes run with accept_requests = false and never get here.
    if (closed_ || !handler_) return;
    transport::IncomingRequest in;
    in.peer = rpc.client;
    in.payload = std::move(request);
    in.loop_index = 0;
    in.rpc = rpc;
    handler_(std::move(in));
  }
  void OnResponse(transport::RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) override {
    auto it = pending_.find(cookie);
    if (it == pending_.end()) return;  // cannot happen: every engine RPC was started here
    MessageTransport::ResponseCallback done = std::move(it->second.done);
    pending_.erase(it);
    done(std::move(response));
  }

 private:
  struct Pending {
    transport::RpcId id = 0;
    MessageTransport::ResponseCallback done;
  };

  transport::Fabric* const fabric_;
  const Address address_;
  MessageTransport::RequestHandler handler_;
  std::unique_ptr<transport::Engine> engine_;
  transport::PacketSink* out_ = nullptr;
  bool closed_ = false;
  absl::flat_hash_map<uint64_t, Pending> pending_;  // transport token -> engine RPC
  std::priority_queue<std::pair<int64_t, uint64_t>, std::vector<std::pair<int64_t, uint64_t>>,
                      std::greater<>>
      deadlines_;  // (deadline, token), earliest on top
};

// ---------------------------------------------------------------------------------------------
// Transport: the thread-safe face of a Node.

class FabricNetwork::Transport final : public MessageTransport {
 public:
  Transport(FabricNetwork* network, std::shared_ptr<Node> node, int64_t spin_nanos)
      : network_(network), node_(std::move(node)), spin_nanos_(spin_nanos) {}
  ~Transport() override { Stop(); }

  // Closes the node on the driver and waits: afterwards no callback of this transport runs
  // (the driver is the only thread that runs them, and the closed node delivers nothing), and
  // the closures posted for it find it closed. Idempotent (CloseOnDriver ignores a node it
  // no longer has). From the driver thread it runs inline, so callbacks may call it too.
  void Stop() override {
    network_->RunOnDriver([&] { network_->CloseOnDriver(node_); });
  }

  Address local_address() const override { return node_->address(); }

  uint64_t SendRequest(const Address& dest, MessageBytes request, ResponseCallback done,
                       int64_t deadline_nanos) override {
    const uint64_t token = next_token_.fetch_add(1);
    network_->Post([node = node_, token, dest, request = std::move(request), done = std::move(done),
                    deadline_nanos]() mutable {
      node->StartClientRpc(token, dest, std::move(request), std::move(done), deadline_nanos);
    });
    return token;
  }

  void Abort(uint64_t id, absl::Status status) override {
    if (status.ok()) status = absl::CancelledError("aborted");
    network_->Post([node = node_, id, status = std::move(status)]() mutable {
      node->AbortClientRpc(id, std::move(status));
    });
  }

  void Reply(const transport::IncomingRequest& request, MessageBytes response) override {
    network_->Post([node = node_, rpc = request.rpc, response = std::move(response)]() mutable {
      node->SendResponse(rpc, std::move(response));
    });
  }

  int64_t spin_nanos() const override { return spin_nanos_; }

  uint64_t live_server_rpcs() const override {
    uint64_t n = 0;
    network_->RunOnDriver([&] { n = node_->closed() ? 0 : node_->engine().stats().server_rpcs; });
    return n;
  }

 private:
  FabricNetwork* const network_;
  const std::shared_ptr<Node> node_;
  const int64_t spin_nanos_;
  std::atomic<uint64_t> next_token_{1};
};

// ---------------------------------------------------------------------------------------------
// FabricNetwork

FabricNetwork::FabricNetwork(FabricNetworkOptions options)
    : spin_nanos_(options.spin_nanos),
      clock_(MonotonicClock::Get()->NowNanos()),
      fabric_(&clock_, options.fabric) {
  driver_ = std::thread([this] { Run(); });
}

FabricNetwork::~FabricNetwork() {
  RunOnDriver([&] {
    if (!nodes_.empty()) {
      HOMARPC_LOG(WARNING) << nodes_.size() << " fabric transports outlive their network";
    }
    while (!nodes_.empty()) CloseOnDriver(nodes_.back());
  });
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_.Signal();
  }
  driver_.join();
}

void FabricNetwork::Post(absl::AnyInvocable<void()> fn) {
  if (OnDriver()) {
    fn();
    return;
  }
  absl::MutexLock lock(&mu_);
  posted_.push_back(std::move(fn));
  posted_count_.fetch_add(1);
  if (sleeping_) wake_.Signal();
}

void FabricNetwork::RunOnDriver(absl::FunctionRef<void()> fn) {
  if (OnDriver()) {
    fn();
    return;
  }
  absl::Notification done;
  Post([&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
}

bool FabricNetwork::RunPosted() {
  if (posted_count_.load() == 0) return false;
  std::vector<absl::AnyInvocable<void()>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(posted_);
    posted_count_.store(0);
  }
  for (auto& fn : batch) fn();
  return !batch.empty();
}

int64_t FabricNetwork::NextDeadlineNanos() const {
  int64_t next = INT64_MAX;
  for (const auto& node : nodes_) next = std::min(next, node->NextDeadlineNanos());
  return next;
}

void FabricNetwork::Run() {
  driver_id_.store(std::this_thread::get_id());
  const MonotonicClock* mono = MonotonicClock::Get();
  int64_t idle_since = -1;
  int spins = 0;
  while (true) {
    bool work = RunPosted();
    {
      absl::MutexLock lock(&mu_);
      if (stop_ && posted_.empty()) break;
    }
    const int64_t now = mono->NowNanos();
    if (now > clock_.NowNanos()) clock_.Set(now);
    // A snapshot: aborting an RPC runs callbacks that may create or destroy transports.
    std::vector<std::shared_ptr<Node>> nodes = nodes_;
    for (auto& node : nodes) work |= node->RunDeadlines(clock_.NowNanos());
    if (work) {
      // Free what posted work and aborts ended (the fabric copied every packet at Send).
      for (auto& node : nodes) node->engine().Reap();
    }
    nodes.clear();
    while (fabric_.NextEventNanos() <= clock_.NowNanos()) {
      fabric_.Step();
      work = true;
    }
    graveyard_.clear();
    if (work) {
      idle_since = -1;
      continue;
    }
    if (idle_since < 0) idle_since = now;
    const int64_t wake = std::min(fabric_.NextEventNanos(), NextDeadlineNanos());
    if (now - idle_since < spin_nanos_ || wake - now <= spin_nanos_) {
      // Spin (2 cores are shared by the whole test: yield now and then).
      if (++spins % 16 == 0) std::this_thread::yield();
      continue;
    }
    Sleep(wake);
    idle_since = -1;
  }
}

void FabricNetwork::Sleep(int64_t wake_nanos) {
  absl::MutexLock lock(&mu_);
  if (!posted_.empty() || stop_) return;
  sleeping_ = true;
  if (wake_nanos == INT64_MAX) {
    wake_.Wait(&mu_);
  } else {
    const int64_t timeout = wake_nanos - MonotonicClock::Get()->NowNanos();
    if (timeout > 0) wake_.WaitWithTimeout(&mu_, absl::Nanoseconds(timeout));
  }
  sleeping_ = false;
}

void FabricNetwork::CloseOnDriver(const std::shared_ptr<Node>& node) {
  auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end()) return;
  std::shared_ptr<Node> keep = *it;
  nodes_.erase(it);
  keep->Close();
  graveyard_.push_back(std::move(keep));
}

absl::StatusOr<std::unique_ptr<MessageTransport>> FabricNetwork::CreateTransport(
    const Address& address, const transport::Config& config,
    MessageTransport::RequestHandler handler) {
  absl::StatusOr<std::unique_ptr<MessageTransport>> result =
      absl::InternalError("fabric driver did not run");
  RunOnDriver([&] { result = CreateOnDriver(address, config, std::move(handler)); });
  return result;
}

absl::StatusOr<std::unique_ptr<MessageTransport>> FabricNetwork::CreateOnDriver(
    const Address& address, const transport::Config& config,
    MessageTransport::RequestHandler handler) {
  transport::Config c = config;
  c.link_mbps = 0;  // infinitely fast links: the pacer would only add steps
  c.accept_requests = static_cast<bool>(handler);
  if (absl::Status s = c.Validate(); !s.ok()) return s;
  for (const auto& node : nodes_) {
    if (node->address() == address) {
      return absl::AlreadyExistsError(
          absl::StrCat("fabric address ", address.ToString(), " is taken"));
    }
  }
  auto node = std::make_shared<Node>(&fabric_, &clock_, address, c, std::move(handler));
  nodes_.push_back(node);
  return std::unique_ptr<MessageTransport>(
      new Transport(this, std::move(node), int64_t{c.poll_usecs} * kNanosPerMicro));
}

internal::TransportFactory FabricNetwork::factory() {
  return
      [this](const internal::UdpTransportOptions& options, MessageTransport::RequestHandler handler)
          -> absl::StatusOr<std::unique_ptr<MessageTransport>> {
        const Address& bind = options.endpoint.io.bind_address;
        const uint32_t host = next_host_.fetch_add(1);
        const uint16_t port =
            bind.port() != 0 ? bind.port() : static_cast<uint16_t>(40000 + host % 20000);
        const std::string text =
            bind.is_v6() ? absl::StrCat("[fd00::", absl::Hex(host), "]:", port)
                         : absl::StrCat("10.0.", host / 250, ".", host % 250 + 1, ":", port);
        absl::StatusOr<Address> address = Address::Parse(text);
        if (!address.ok()) return address.status();
        return CreateTransport(*address, options.endpoint.config, std::move(handler));
      };
}

transport::FabricStats FabricNetwork::stats() {
  transport::FabricStats s;
  RunOnDriver([&] { s = fabric_.stats(); });
  return s;
}

}  // namespace homarpc::testing
