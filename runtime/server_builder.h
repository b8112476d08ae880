// ServerBuilder: configures and starts a Server, shaped like grpc::ServerBuilder.
//
//   homarpc::ServerBuilder builder;
//   int port = 0;
//   builder.AddListeningPort("0.0.0.0:50051", homarpc::InsecureServerCredentials(), &port);
//   builder.RegisterService(&service);
//   std::unique_ptr<homarpc::Server> server = builder.BuildAndStart();
//   server->Wait();
//
// Addresses: "host:port", "[v6]:port", "0.0.0.0:port", "[::]:port", "localhost:port",
// "ipv4:..."/"ipv6:..."/"dns:///" forms as for channels (first address). Port 0 picks a free
// port, reported through `selected_port` when BuildAndStart() succeeds (0 when it fails).
// BuildAndStart() returns nullptr on any error (bad address, port in use, two services with
// the same name), logging the reason, as gRPC does.
//
// One thread builds; a builder is used for one server.
#ifndef HOMARPC_RUNTIME_SERVER_BUILDER_H_
#define HOMARPC_RUNTIME_SERVER_BUILDER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/channel.h"
#include "runtime/message_transport.h"
#include "runtime/server.h"
#include "runtime/service.h"

namespace homarpc {

// Where sync handlers run.
enum class ServerExecutor {
  // Default; handlers may block. A handler whose method has been quick (an average under
  // ~50 us) runs on the loop thread that received its request, right after that loop's round,
  // and if it holds that thread past kArgLoopTakeoverMicros (1 ms) the loop's standby thread
  // takes the socket over; other handlers, and a second request in the same round, run on a
  // pool of worker threads. (A quick call then costs no hand-off between threads.)
  kWorkerPool,
  kInline,  // on the loop thread that received the request (handlers must never block)
  // Every sync handler on a worker thread; the loops only receive and send. For services
  // whose handlers all run long, or to keep the loops free of any handler's stalls.
  kWorkerPoolOnly,
};

class ServerBuilder {
 public:
  ServerBuilder();
  ~ServerBuilder();

  ServerBuilder& AddListeningPort(const std::string& addr_uri,
                                  std::shared_ptr<ServerCredentials> creds,
                                  int* selected_port = nullptr);
  // Not owned; must outlive the server. Each service name may be registered once.
  ServerBuilder& RegisterService(Service* service);
  // Largest request accepted; larger ones fail RESOURCE_EXHAUSTED. Default 4 MiB, as gRPC;
  // -1 = the transport's ceiling (64 MiB).
  ServerBuilder& SetMaxReceiveMessageSize(int max_receive_message_size);
  // Largest response sent; a larger one fails RESOURCE_EXHAUSTED. Default: the ceiling.
  ServerBuilder& SetMaxSendMessageSize(int max_send_message_size);
  ServerBuilder& SetMaxMessageSize(int max_message_size) {
    return SetMaxReceiveMessageSize(max_message_size);
  }
  // Channel-argument keys from channel.h: kArgSpinMicros, kArgMtu, kArgIoBackend,
  // kArgMaxMetadataSize, kArgServerLoops, kArgMaxReceiveMessageLength,
  // kArgMaxConcurrentCalls, ...
  ServerBuilder& AddChannelArgument(const std::string& arg, int value);
  ServerBuilder& AddChannelArgument(const std::string& arg, const std::string& value);

  // homarpc: loop threads (sockets sharing the port) per listening port; default 1.
  ServerBuilder& SetNumLoops(int loops);
  // homarpc: where sync handlers run; `worker_threads` 0 = one per core (at least 2).
  ServerBuilder& SetExecutor(ServerExecutor executor, int worker_threads = 0);
  // homarpc: the most calls the server holds at once (from arrival until answered and, for
  // callback handlers, OnDone returned); a request beyond it is answered RESOURCE_EXHAUSTED
  // ("server overloaded") at once, without running a handler. Default 100000; 0 or negative
  // = no bound. Also the channel argument kArgMaxConcurrentCalls (whichever was set last).
  ServerBuilder& SetMaxConcurrentCalls(int max_calls);

  std::unique_ptr<Server> BuildAndStart();

  // Tests: build the server's transports with `factory` instead of UDP sockets.
  void SetTransportFactoryForTesting(internal::TransportFactory factory);

 private:
  struct Port {
    std::string addr_uri;
    int* selected_port;
  };
  std::vector<Port> ports_;
  std::vector<Service*> services_;
  ChannelArguments args_;
  int max_receive_message_size_ = 4 * 1024 * 1024;
  int max_send_message_size_ = -1;
  int num_loops_ = 1;
  ServerExecutor executor_ = ServerExecutor::kWorkerPool;
  int worker_threads_ = 0;
  int max_concurrent_calls_ = 100000;
  internal::TransportFactory transport_factory_;
};

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_SERVER_BUILDER_H_
