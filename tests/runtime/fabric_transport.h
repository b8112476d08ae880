// FabricNetwork: an in-memory network for the RPC runtime's tests. It owns a transport::Fabric,
// the ManualClock the fabric and its engines read, and one driver thread; CreateTransport()
// attaches a protocol Engine to the fabric (as tests/transport/fabric_engine.h does) behind the
// internal::MessageTransport interface, so Channels and Servers run over it unchanged:
//
//   homarpc::testing::FabricNetwork net;
//   builder.SetTransportFactoryForTesting(net.factory());          // server
//   auto channel = internal::CreateChannelWithTransport(            // client
//       server->listening_addresses()[0], args, net.factory());
//
// Time is real: the driver sets the ManualClock to MonotonicClock's now on every iteration, so
// deadlines, silence timeouts and retransmissions behave as over UDP, while the network itself
// (latency, drop / duplicate / reorder faults) is the fabric's, reproducible per seed as far as
// the order of sends is (threads make that order vary from run to run).
//
// Threads: every engine and the fabric belong to the driver thread. The transports' methods
// are thread-safe (they post to the driver, or run inline when already on it); their callbacks
// (response `done`, RequestHandler) run on the driver thread. FabricNetwork's own methods are
// thread-safe. The network must outlive every transport it created.
#ifndef HOMARPC_TESTS_RUNTIME_FABRIC_TRANSPORT_H_
#define HOMARPC_TESTS_RUNTIME_FABRIC_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/message_transport.h"
#include "transport/address.h"
#include "transport/clock.h"
#include "transport/config.h"
#include "transport/fabric.h"

namespace homarpc::testing {

struct FabricNetworkOptions {
  // Latency, faults and seed of the network. Defaults: a clean network with 2 us latency.
  transport::FabricOptions fabric;
  // How long the idle driver polls before sleeping on its condition variable.
  int64_t spin_nanos = 20 * transport::kNanosPerMicro;
};

class FabricNetwork {
 public:
  explicit FabricNetwork(FabricNetworkOptions options = {});
  // Stops the driver. Transports still alive are closed first (their client RPCs fail
  // CANCELLED), but they must still not be used afterwards: destroy them before the network.
  ~FabricNetwork();
  FabricNetwork(const FabricNetwork&) = delete;
  FabricNetwork& operator=(const FabricNetwork&) = delete;

  // A transport attached to the fabric at `address`, with an engine configured by `config`
  // (pacing is turned off: fabric links are infinitely fast). `handler` empty = client only:
  // requests to it are refused on the wire and their callers see UNAVAILABLE, as with an
  // Endpoint. ALREADY_EXISTS when `address` is taken; INVALID_ARGUMENT for a bad config.
  // Stopping (MessageTransport::Stop) or destroying the transport fails its client RPCs still
  // in flight with CANCELLED (their callbacks run before Stop returns, or inline when it runs
  // on the driver thread), detaches it, and delivers nothing to its handler afterwards; Reply
  // and Abort then do nothing and SendRequest fails CANCELLED (on the driver thread). Stop is
  // idempotent and may also be called from the transport's own callbacks.
  absl::StatusOr<std::unique_ptr<internal::MessageTransport>> CreateTransport(
      const transport::Address& address, const transport::Config& config,
      internal::MessageTransport::RequestHandler handler);

  // A factory for ServerBuilder::SetTransportFactoryForTesting and
  // internal::CreateChannelWithTransport. Of the options it uses the engine config and, from
  // the bind address, only the family and the port: each transport gets a host of its own,
  // 10.0.x.y (IPv4) or fd00::n (IPv6), with the bind port, or a port it picks when that is 0.
  // So a server's transport is found at the address its Server reports in
  // listening_addresses(). Thread-safe; the factory must not outlive the network.
  internal::TransportFactory factory();

  // The fabric's counters, read on the driver thread now.
  transport::FabricStats stats();
  // Runs `fn` on the driver thread (inline when called there) and waits for it.
  void RunOnDriver(absl::FunctionRef<void()> fn);

 private:
  class Node;
  class Transport;
  friend class Transport;

  bool OnDriver() const { return std::this_thread::get_id() == driver_id_.load(); }
  // Runs `fn` on the driver soon (inline when called there).
  void Post(absl::AnyInvocable<void()> fn);
  void Run();
  bool RunPosted();
  void Sleep(int64_t wake_nanos);
  int64_t NextDeadlineNanos() const;
  // Driver thread: fails the node's client RPCs, detaches it and drops it once the current
  // step has unwound.
  void CloseOnDriver(const std::shared_ptr<Node>& node);
  absl::StatusOr<std::unique_ptr<internal::MessageTransport>> CreateOnDriver(
      const transport::Address& address, const transport::Config& config,
      internal::MessageTransport::RequestHandler handler);

  const int64_t spin_nanos_;
  std::atomic<uint32_t> next_host_{1};

  // Driver thread only.
  transport::ManualClock clock_;
  transport::Fabric fabric_;
  std::vector<std::shared_ptr<Node>> nodes_;      // attached
  std::vector<std::shared_ptr<Node>> graveyard_;  // closed, freed after the current step

  absl::Mutex mu_;
  absl::CondVar wake_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> posted_count_{0};

  std::atomic<std::thread::id> driver_id_{};
  std::thread driver_;
};

}  // namespace homarpc::testing

#endif  // HOMARPC_TESTS_RUNTIME_FABRIC_TRANSPORT_H_
