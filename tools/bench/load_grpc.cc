// load_grpc: gRPC C++ (1.51, the distribution's) as a LoadSystem (load.h) for the load
// scenarios (load_scenarios.h). Written like load_homarpc.cc, line for line where the APIs
// match, so that the two differ only in the system under test.
//
// Server: the sync Echo::Service (Echo and Fetch) on gRPC's own handler threads; Fetch answers
// with a prefix of one preallocated buffer of the point's max_message_bytes (the copy into the
// response is the only per-call work). With --server_api=callback (LoadOptions::
// callback_handlers), Echo::CallbackService instead: the same Fetch, finished through the
// context's default reactor on gRPC's callback threads. Sync on both systems, as most gRPC servers are written:
// a bulk Fetch copies megabytes, which a callback handler would do on the thread that also
// receives the small calls (homarpc's loop; measured: p99 of mixed's small calls 2.5-3 ms with
// callback handlers, ~1 ms with sync ones). gRPC's defaults otherwise, listening on
// settings.server_host.
// Client: one channel per client process (Connect), and per call a ClientContext with the
// point's deadline and stub->async()->Fetch(); the completion runs on gRPC's callback threads.
// Message limits on both sides: LoadMessageLimit().
//
// Only this file includes gRPC's generated echo header (package homarpc.bench.grpc_echo); see
// echo.proto. gRPC is first touched in the forked server and client processes, so no gRPC
// thread exists when the harness forks.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tools/bench/echo_grpc.grpc.pb.h"
#include "tools/bench/grpc_status.h"
#include "tools/bench/load.h"
#include "tools/bench/load_scenarios.h"
#include "tools/bench/rpc_scenarios.h"

namespace homarpc::bench {
namespace {

using grpc_echo::EchoRequest;
using grpc_echo::EchoResponse;
using Stub = grpc_echo::Echo::Stub;

// What both server APIs answer: Echo copies the request's payload back, Fetch a prefix of
// `payload` of the requested size.
::grpc::Status AnswerFetch(const std::string& payload, const EchoRequest& request,
                           EchoResponse* response) {
  if (request.response_bytes() > payload.size()) {
    return ::grpc::Status(
        ::grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("response_bytes ", request.response_bytes(),
                     " is above the point's max_message_bytes ", payload.size()));
  }
  // assign() copies into the field's own string: a response the server reuses (homarpc's
  // MessagePool) keeps its storage. set_payload(data, size) would first build a temporary
  // std::string of the payload (protobuf 3.21's SetBytes), a second allocation and copy.
  response->mutable_payload()->assign(payload.data(), request.response_bytes());
  return ::grpc::Status::OK;
}

class FetchService final : public grpc_echo::Echo::Service {
 public:
  explicit FetchService(uint64_t max_message_bytes) : payload_(max_message_bytes, 'x') {}

  ::grpc::Status Echo(::grpc::ServerContext* context, const EchoRequest* request,
                       EchoResponse* response) override {
    response->set_payload(request->payload());
    return ::grpc::Status::OK;
  }

  ::grpc::Status Fetch(::grpc::ServerContext* context, const EchoRequest* request,
                        EchoResponse* response) override {
    return AnswerFetch(payload_, *request, response);
  }

 private:
  const std::string payload_;
};

// Fetch only: the load scenarios call nothing else (Echo answers UNIMPLEMENTED).
class CallbackFetchService final : public grpc_echo::Echo::CallbackService {
 public:
  explicit CallbackFetchService(uint64_t max_message_bytes) : payload_(max_message_bytes, 'x') {}

  ::grpc::ServerUnaryReactor* Fetch(::grpc::CallbackServerContext* context,
                                    const EchoRequest* request, EchoResponse* response) override {
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(AnswerFetch(payload_, *request, response));
    return reactor;
  }

 private:
  const std::string payload_;
};

// One call in flight: what gRPC needs alive until the completion has run.
struct Call {
  ::grpc::ClientContext context;
  EchoRequest request;
  EchoResponse response;
  std::function<void(absl::StatusOr<uint64_t>)> done;
};

class GrpcLoadChannel final : public LoadChannel {
 public:
  GrpcLoadChannel(std::shared_ptr<::grpc::Channel> channel, uint64_t max_message_bytes)
      : channel_(std::move(channel)),
        stub_(grpc_echo::Echo::NewStub(channel_)),
        payload_(max_message_bytes, 'x') {}

  void StartCall(uint64_t request_bytes, uint64_t response_bytes, int64_t timeout_ns,
                 std::function<void(absl::StatusOr<uint64_t>)> done) override {
    if (request_bytes > payload_.size()) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "request of ", request_bytes, " bytes is above the point's max_message_bytes ",
          payload_.size())));
      return;
    }
    // Owned by the completion below, which deletes it: gRPC lets the context go once the
    // callback has run.
    Call* call = new Call;
    call->request.set_payload(payload_.data(), request_bytes);
    call->request.set_response_bytes(response_bytes);
    call->done = std::move(done);
    if (timeout_ns > 0) {
      call->context.set_deadline(std::chrono::system_clock::now() +
                                 std::chrono::nanoseconds(timeout_ns));
    }
    stub_->async()->Fetch(
        &call->context, &call->request, &call->response, [call](::grpc::Status status) {
          std::unique_ptr<Call> owned(call);
          absl::StatusOr<uint64_t> result =
              status.ok() ? absl::StatusOr<uint64_t>(owned->response.payload().size())
                          : absl::StatusOr<uint64_t>(GrpcCallError(status));
          std::function<void(absl::StatusOr<uint64_t>)> done = std::move(owned->done);
          owned.reset();
          done(std::move(result));
        });
  }

 private:
  const std::shared_ptr<::grpc::Channel> channel_;
  const std::unique_ptr<Stub> stub_;
  const std::string payload_;  // requests copy a prefix of it
};

class GrpcLoadSystem final : public LoadSystem {
 public:
  explicit GrpcLoadSystem(bool callback_handlers) : callback_handlers_(callback_handlers) {}
  std::string name() const override { return kGrpcSystem; }

  absl::Status Serve(const LoadPoint& point, ServerEnv& env) const override {
    // Only the one in use: each holds a buffer of max_message_bytes (8 MiB in mixed).
    std::unique_ptr<::grpc::Service> service;
    if (callback_handlers_) {
      service = std::make_unique<CallbackFetchService>(point.max_message_bytes);
    } else {
      service = std::make_unique<FetchService>(point.max_message_bytes);
    }
    ::grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(absl::StrCat(point.settings.server_host, ":0"),
                             ::grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    builder.SetMaxReceiveMessageSize(LoadMessageLimit(point));
    builder.SetMaxSendMessageSize(LoadMessageLimit(point));
    std::unique_ptr<::grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr || port <= 0) return absl::UnavailableError("gRPC server did not start");
    env.Ready(static_cast<uint16_t>(port));
    // gRPC's threads serve; this one sleeps until the stop (every wake-up would take a core
    // from a server or client thread).
    env.WaitForStop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<LoadChannel>> Connect(const LoadPoint& point,
                                                       uint16_t port) const override {
    ::grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(LoadMessageLimit(point));
    args.SetMaxSendMessageSize(LoadMessageLimit(point));
    std::shared_ptr<::grpc::Channel> channel =
        ::grpc::CreateCustomChannel(absl::StrCat(point.settings.server_host, ":", port),
                                    ::grpc::InsecureChannelCredentials(), args);
    if (channel == nullptr) return absl::UnavailableError("gRPC channel was not created");
    return std::make_unique<GrpcLoadChannel>(std::move(channel), point.max_message_bytes);
  }

 private:
  const bool callback_handlers_;
};

}  // namespace

std::unique_ptr<LoadSystem> MakeGrpcLoadSystem(bool callback_handlers) {
  return std::make_unique<GrpcLoadSystem>(callback_handlers);
}

}  // namespace homarpc::bench
