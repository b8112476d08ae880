// grpc_echo: gRPC C++ Echo server and clients for the RPC scenarios (see grpc_echo.h).
//
// gRPC is first touched in the forked server and client processes (the parent only registers
// the systems), so no gRPC thread exists at fork time.
#include "tools/bench/grpc_echo.h"


#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tools/bench/echo_grpc.grpc.pb.h"
#include "tools/bench/grpc_status.h"
#include "tools/bench/rpc_driver.h"
#include "tools/bench/rpc_scenarios.h"

namespace homarpc::bench {
namespace {

using grpc_echo::EchoRequest;
using grpc_echo::EchoResponse;
using Stub = grpc_echo::Echo::Stub;

absl::StatusOr<uint64_t> ResponseBytes(const ::grpc::Status& status,
                                       const EchoResponse& response) {
  if (!status.ok()) return GrpcCallError(status);
  return response.payload().size();
}

class SyncEcho final : public grpc_echo::Echo::Service {
 public:
  ::grpc::Status Echo(::grpc::ServerContext* context, const EchoRequest* request,
                      EchoResponse* response) override {
    response->set_payload(request->payload());
    return ::grpc::Status::OK;
  }
};

class CallbackEcho final : public grpc_echo::Echo::CallbackService {
 public:
  ::grpc::ServerUnaryReactor* Echo(::grpc::CallbackServerContext* context,
                                   const EchoRequest* request, EchoResponse* response) override {
    response->set_payload(request->payload());
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }
};

absl::Status ServeEcho(const Point& point, ServerEnv& env, ::grpc::Service* service,
                       absl::string_view kind) {
  ::grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat(point.settings.server_host, ":0"), ::grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(MessageLimitFor(point));
  builder.SetMaxSendMessageSize(MessageLimitFor(point));
  std::unique_ptr<::grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) return absl::UnavailableError("gRPC server did not start");
  env.Ready(static_cast<uint16_t>(port));
  // gRPC's threads serve; this one sleeps until the stop (on 2 cores every wake-up would take
  // a core from a server or client thread).
  env.WaitForStop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  env.AddExtra(Extra::String("server", kind));
  return absl::OkStatus();
}

std::shared_ptr<::grpc::Channel> Connect(const Point& point, uint16_t port) {
  ::grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(MessageLimitFor(point));
  args.SetMaxSendMessageSize(MessageLimitFor(point));
  return ::grpc::CreateCustomChannel(absl::StrCat(point.settings.server_host, ":", port),
                                     ::grpc::InsecureChannelCredentials(), args);
}

class BlockingEcho final : public BlockingCaller {
 public:
  BlockingEcho(Stub* stub, uint64_t request_bytes) : stub_(stub) {
    request_.set_payload(std::string(request_bytes, 'x'));
  }
  absl::StatusOr<uint64_t> Call() override {
    ::grpc::ClientContext context;
    return ResponseBytes(stub_->Echo(&context, request_, &response_), response_);
  }

 private:
  Stub* const stub_;
  EchoRequest request_;
  EchoResponse response_;
};

class AsyncEcho final : public AsyncSlot {
 public:
  AsyncEcho(Stub* stub, uint64_t request_bytes, CallbackDriver* driver, size_t index)
      : stub_(stub), driver_(driver), index_(index) {
    request_.set_payload(std::string(request_bytes, 'x'));
  }
  void Start() override {
    context_ = std::make_unique<::grpc::ClientContext>();
    stub_->async()->Echo(context_.get(), &request_, &response_, [this](::grpc::Status status) {
      absl::StatusOr<uint64_t> result = ResponseBytes(status, response_);
      driver_->Complete(index_, std::move(result));  // may restart or destroy this slot
    });
  }

 private:
  Stub* const stub_;
  CallbackDriver* const driver_;
  const size_t index_;
  std::unique_ptr<::grpc::ClientContext> context_;  // one per call, as gRPC requires
  EchoRequest request_;
  EchoResponse response_;
};

// The channel and stub the slots use, kept alive by DriveCallbacks.
struct Client {
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<Stub> stub;
};

class GrpcUnary final : public System {
 public:
  std::string name() const override { return kGrpcSystem; }
  bool is_floor() const override { return true; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override {
    SyncEcho service;
    return ServeEcho(point, env, &service, "sync");
  }
  absl::StatusOr<ClientSamples> RunClient(const Point& point,
                                          uint16_t server_port) const override {
    std::shared_ptr<::grpc::Channel> channel = Connect(point, server_port);
    std::unique_ptr<Stub> stub = grpc_echo::Echo::NewStub(channel);
    return DriveBlocking(point, [&] {
      return std::make_unique<BlockingEcho>(stub.get(), point.request_bytes);
    });
  }
};

class GrpcThroughput final : public System {
 public:
  std::string name() const override { return kGrpcSystem; }
  bool is_floor() const override { return true; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override {
    CallbackEcho service;
    return ServeEcho(point, env, &service, "callback");
  }
  absl::StatusOr<ClientSamples> RunClient(const Point& point,
                                          uint16_t server_port) const override {
    auto client = std::make_shared<Client>();
    client->channel = Connect(point, server_port);
    client->stub = grpc_echo::Echo::NewStub(client->channel);
    Stub* stub = client->stub.get();
    return DriveCallbacks(point, client, [&](CallbackDriver* driver, size_t index) {
      return std::make_unique<AsyncEcho>(stub, point.request_bytes, driver, index);
    });
  }
};

}  // namespace

std::unique_ptr<System> NewGrpcUnary() { return std::make_unique<GrpcUnary>(); }
std::unique_ptr<System> NewGrpcThroughput() { return std::make_unique<GrpcThroughput>(); }

}  // namespace homarpc::bench
