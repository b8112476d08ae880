// homarpc_rpc_echo: homarpc Echo server and clients for the RPC scenarios (see
// homarpc_rpc_echo.h). Written like grpc_echo.cc, line for line where the APIs match, so that
// the two differ only in the system under test.
#include "tools/bench/homarpc_rpc_echo.h"


#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "homarpc/homarpc.h"
#include "tools/bench/echo_homa.homarpc.pb.h"
#include "tools/bench/homarpc_settings.h"
#include "tools/bench/rpc_driver.h"

namespace homarpc::bench {
namespace {

using homa_echo::EchoRequest;
using homa_echo::EchoResponse;
using Stub = homa_echo::Echo::Stub;

absl::StatusOr<uint64_t> ResponseBytes(const homarpc::Status& status,
                                       const EchoResponse& response) {
  if (!status.ok()) return HomarpcCallError(status);
  return response.payload().size();
}

class SyncEcho final : public homa_echo::Echo::Service {
 public:
  homarpc::Status Echo(homarpc::ServerContext* context, const EchoRequest* request,
                       EchoResponse* response) override {
    response->set_payload(request->payload());
    return homarpc::Status::OK;
  }
};

class CallbackEcho final : public homa_echo::Echo::CallbackService {
 public:
  homarpc::ServerUnaryReactor* Echo(homarpc::CallbackServerContext* context,
                                    const EchoRequest* request, EchoResponse* response) override {
    response->set_payload(request->payload());
    homarpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(homarpc::Status::OK);
    return reactor;
  }
};

absl::Status ServeEcho(const Point& point, ServerEnv& env, homarpc::Service* service,
                       homarpc::ServerExecutor executor, absl::string_view kind) {
  homarpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat(point.settings.server_host, ":0"), homarpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(MessageLimitFor(point));
  builder.SetMaxSendMessageSize(MessageLimitFor(point));
  builder.SetNumLoops(1);
  builder.SetExecutor(executor);
  ApplySettings(point.settings, &builder);
  std::unique_ptr<homarpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) {
    return absl::UnavailableError("homarpc server did not start");
  }
  env.Ready(static_cast<uint16_t>(port));
  // The loop thread serves; this one sleeps until the stop (on 2 cores every wake-up would
  // preempt a spinning loop).
  env.WaitForStop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  env.AddExtra(Extra::String("server", kind));
  return absl::OkStatus();
}

std::shared_ptr<homarpc::Channel> Connect(const Point& point, uint16_t port) {
  homarpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(MessageLimitFor(point));
  args.SetMaxSendMessageSize(MessageLimitFor(point));
  ApplySettings(point.settings, &args);
  return homarpc::CreateCustomChannel(absl::StrCat(point.settings.server_host, ":", port),
                                      homarpc::InsecureChannelCredentials(), args);
}

class BlockingEcho final : public BlockingCaller {
 public:
  BlockingEcho(Stub* stub, uint64_t request_bytes) : stub_(stub) {
    request_.set_payload(std::string(request_bytes, 'x'));
  }
  absl::StatusOr<uint64_t> Call() override {
    homarpc::ClientContext context;
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
    context_ = std::make_unique<homarpc::ClientContext>();
    stub_->async()->Echo(context_.get(), &request_, &response_, [this](homarpc::Status status) {
      absl::StatusOr<uint64_t> result = ResponseBytes(status, response_);
      driver_->Complete(index_, std::move(result));  // may restart or destroy this slot
    });
  }

 private:
  Stub* const stub_;
  CallbackDriver* const driver_;
  const size_t index_;
  std::unique_ptr<homarpc::ClientContext> context_;  // one per call, as in gRPC
  EchoRequest request_;
  EchoResponse response_;
};

// The channel and stub the slots use, kept alive by DriveCallbacks.
struct Client {
  std::shared_ptr<homarpc::Channel> channel;
  std::unique_ptr<Stub> stub;
};

class HomarpcUnary final : public System {
 public:
  explicit HomarpcUnary(HomarpcExecutor executor) : executor_(executor) {}
  std::string name() const override { return kHomarpcSystem; }
  bool is_floor() const override { return false; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override {
    SyncEcho service;
    switch (executor_) {
      case HomarpcExecutor::kInline:
        return ServeEcho(point, env, &service, homarpc::ServerExecutor::kInline, "sync-inline");
      case HomarpcExecutor::kPool:
        return ServeEcho(point, env, &service, homarpc::ServerExecutor::kWorkerPool, "sync-pool");
      case HomarpcExecutor::kPoolOnly:
        break;
    }
    return ServeEcho(point, env, &service, homarpc::ServerExecutor::kWorkerPoolOnly,
                     "sync-pool-only");
  }
  absl::StatusOr<ClientSamples> RunClient(const Point& point,
                                          uint16_t server_port) const override {
    std::shared_ptr<homarpc::Channel> channel = Connect(point, server_port);
    std::unique_ptr<Stub> stub = homa_echo::Echo::NewStub(channel);
    return DriveBlocking(point, [&] {
      return std::make_unique<BlockingEcho>(stub.get(), point.request_bytes);
    });
  }

 private:
  const HomarpcExecutor executor_;
};

class HomarpcThroughput final : public System {
 public:
  std::string name() const override { return kHomarpcSystem; }
  bool is_floor() const override { return false; }
  absl::Status Serve(const Point& point, ServerEnv& env) const override {
    CallbackEcho service;
    // Callback handlers run on the loop thread whatever the executor.
    return ServeEcho(point, env, &service, homarpc::ServerExecutor::kInline, "callback");
  }
  absl::StatusOr<ClientSamples> RunClient(const Point& point,
                                          uint16_t server_port) const override {
    auto client = std::make_shared<Client>();
    client->channel = Connect(point, server_port);
    client->stub = homa_echo::Echo::NewStub(client->channel);
    Stub* stub = client->stub.get();
    return DriveCallbacks(point, client, [&](CallbackDriver* driver, size_t index) {
      return std::make_unique<AsyncEcho>(stub, point.request_bytes, driver, index);
    });
  }
};

}  // namespace

std::unique_ptr<System> NewHomarpcUnary(HomarpcExecutor executor) {
  return std::make_unique<HomarpcUnary>(executor);
}
std::unique_ptr<System> NewHomarpcThroughput() { return std::make_unique<HomarpcThroughput>(); }

}  // namespace homarpc::bench
