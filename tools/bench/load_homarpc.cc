// load_homarpc: homarpc's RPC runtime as a LoadSystem (load.h) for the load scenarios
// (load_scenarios.h). Written like load_grpc.cc, line for line where the APIs match, so that
// the two differ only in the system under test.
//
// Server: the sync Echo::Service (Echo and Fetch) on the default worker-pool executor (or, with
// --executor=inline, on the loop thread: LoadOptions::homarpc_inline_handlers); Fetch
// answers with a prefix of one preallocated buffer of the point's max_message_bytes (the copy
// into the response is the only per-call work). With --server_api=callback (LoadOptions::
// callback_handlers), Echo::CallbackService instead: the same Fetch, finished through the
// context's default reactor on the loop thread (large responses are still offloaded). Sync on both systems, as most gRPC servers are
// written: a bulk Fetch copies megabytes, which a callback handler would do on the loop thread
// that also receives the small calls (measured: p99 of mixed's small calls 2.5-3 ms with
// callback handlers, ~1 ms with sync ones). One loop (SetNumLoops(1)), listening on
// settings.server_host.
// Client: one channel per client process (Connect) — one Homa endpoint with its loop thread —
// and per call a ClientContext with the point's deadline and stub->async()->Fetch(); the
// completion runs on the channel's loop thread.
// Both sides take the point's transport settings as channel arguments (homarpc_settings.h,
// shared with homarpc_rpc_echo.cc): kArgSpinMicros (--spin_us), kArgMtu (--mtu),
// kArgIoBackend (--io_backend), kArgLinkMbps (the testbed's link rate; 0 on loopback unless
// --link_mbps). Message limits on both sides: LoadMessageLimit().
//
// Only this file includes homarpc's generated echo header (package homarpc.bench.homa_echo);
// see echo.proto.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "homarpc/homarpc.h"
#include "tools/bench/echo_homa.homarpc.pb.h"
#include "tools/bench/homarpc_settings.h"
#include "tools/bench/load.h"
#include "tools/bench/load_scenarios.h"
#include "tools/bench/rpc_scenarios.h"

namespace homarpc::bench {
namespace {

using homa_echo::EchoRequest;
using homa_echo::EchoResponse;
using Stub = homa_echo::Echo::Stub;

// What both server APIs answer: Echo copies the request's payload back, Fetch a prefix of
// `payload` of the requested size.
homarpc::Status AnswerFetch(const std::string& payload, const EchoRequest& request,
                            EchoResponse* response) {
  if (request.response_bytes() > payload.size()) {
    return homarpc::Status(
        homarpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("response_bytes ", request.response_bytes(),
                     " is above the point's max_message_bytes ", payload.size()));
  }
  // assign() copies into the field's own string: a response the server reuses (homarpc's
  // MessagePool) keeps its storage. set_payload(data, size) would first build a temporary
  // std::string of the payload (protobuf 3.21's SetBytes), a second allocation and copy.
  response->mutable_payload()->assign(payload.data(), request.response_bytes());
  return homarpc::Status::OK;
}

class FetchService final : public homa_echo::Echo::Service {
 public:
  explicit FetchService(uint64_t max_message_bytes) : payload_(max_message_bytes, 'x') {}

  homarpc::Status Echo(homarpc::ServerContext* context, const EchoRequest* request,
                       EchoResponse* response) override {
    response->set_payload(request->payload());
    return homarpc::Status::OK;
  }

  homarpc::Status Fetch(homarpc::ServerContext* context, const EchoRequest* request,
                        EchoResponse* response) override {
    return AnswerFetch(payload_, *request, response);
  }

 private:
  const std::string payload_;
};

// Fetch only: the load scenarios call nothing else (Echo answers UNIMPLEMENTED).
class CallbackFetchService final : public homa_echo::Echo::CallbackService {
 public:
  explicit CallbackFetchService(uint64_t max_message_bytes) : payload_(max_message_bytes, 'x') {}

  homarpc::ServerUnaryReactor* Fetch(homarpc::CallbackServerContext* context,
                                     const EchoRequest* request, EchoResponse* response) override {
    homarpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(AnswerFetch(payload_, *request, response));
    return reactor;
  }

 private:
  const std::string payload_;
};

// One call in flight: what gRPC needs alive until the completion has run.
struct Call {
  homarpc::ClientContext context;
  EchoRequest request;
  EchoResponse response;
  std::function<void(absl::StatusOr<uint64_t>)> done;
};

class HomarpcLoadChannel final : public LoadChannel {
 public:
  HomarpcLoadChannel(std::shared_ptr<homarpc::Channel> channel, uint64_t max_message_bytes)
      : channel_(std::move(channel)),
        stub_(homa_echo::Echo::NewStub(channel_)),
        payload_(max_message_bytes, 'x') {}

  void StartCall(uint64_t request_bytes, uint64_t response_bytes, int64_t timeout_ns,
                 std::function<void(absl::StatusOr<uint64_t>)> done) override {
    if (request_bytes > payload_.size()) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "request of ", request_bytes, " bytes is above the point's max_message_bytes ",
          payload_.size())));
      return;
    }
    // Owned by the completion below, which deletes it: homarpc lets the context go once
    // the callback has run (client_call.cc), as gRPC does.
    Call* call = new Call;
    call->request.set_payload(payload_.data(), request_bytes);
    call->request.set_response_bytes(response_bytes);
    call->done = std::move(done);
    if (timeout_ns > 0) {
      call->context.set_deadline(std::chrono::system_clock::now() +
                                 std::chrono::nanoseconds(timeout_ns));
    }
    stub_->async()->Fetch(
        &call->context, &call->request, &call->response, [call](homarpc::Status status) {
          std::unique_ptr<Call> owned(call);
          absl::StatusOr<uint64_t> result =
              status.ok() ? absl::StatusOr<uint64_t>(owned->response.payload().size())
                          : absl::StatusOr<uint64_t>(HomarpcCallError(status));
          std::function<void(absl::StatusOr<uint64_t>)> done = std::move(owned->done);
          owned.reset();
          done(std::move(result));
        });
  }

 private:
  const std::shared_ptr<homarpc::Channel> channel_;
  const std::unique_ptr<Stub> stub_;
  const std::string payload_;  // requests copy a prefix of it
};

class HomarpcLoadSystem final : public LoadSystem {
 public:
  HomarpcLoadSystem(bool inline_handlers, bool callback_handlers)
      : inline_handlers_(inline_handlers), callback_handlers_(callback_handlers) {}
  std::string name() const override { return kHomarpcSystem; }

  absl::Status Serve(const LoadPoint& point, ServerEnv& env) const override {
    // Only the one in use: each holds a buffer of max_message_bytes (8 MiB in mixed).
    std::unique_ptr<homarpc::Service> service;
    if (callback_handlers_) {
      service = std::make_unique<CallbackFetchService>(point.max_message_bytes);
    } else {
      service = std::make_unique<FetchService>(point.max_message_bytes);
    }
    homarpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(absl::StrCat(point.settings.server_host, ":0"),
                             homarpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    builder.SetMaxReceiveMessageSize(LoadMessageLimit(point));
    builder.SetMaxSendMessageSize(LoadMessageLimit(point));
    builder.SetNumLoops(1);
    if (inline_handlers_) builder.SetExecutor(homarpc::ServerExecutor::kInline);
    ApplySettings(point.settings, &builder);
    std::unique_ptr<homarpc::Server> server = builder.BuildAndStart();
    if (server == nullptr || port <= 0)
      return absl::UnavailableError("homarpc server did not start");
    env.Ready(static_cast<uint16_t>(port));
    // The loop thread serves; this one sleeps until the stop (every wake-up would preempt a
    // spinning loop).
    env.WaitForStop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<LoadChannel>> Connect(const LoadPoint& point,
                                                       uint16_t port) const override {
    homarpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(LoadMessageLimit(point));
    args.SetMaxSendMessageSize(LoadMessageLimit(point));
    ApplySettings(point.settings, &args);
    std::shared_ptr<homarpc::Channel> channel =
        homarpc::CreateCustomChannel(absl::StrCat(point.settings.server_host, ":", port),
                                     homarpc::InsecureChannelCredentials(), args);
    if (channel == nullptr) return absl::UnavailableError("homarpc channel was not created");
    return std::make_unique<HomarpcLoadChannel>(std::move(channel), point.max_message_bytes);
  }

 private:
  const bool inline_handlers_;
  const bool callback_handlers_;
};

}  // namespace

std::unique_ptr<LoadSystem> MakeHomarpcLoadSystem(bool inline_handlers, bool callback_handlers) {
  return std::make_unique<HomarpcLoadSystem>(inline_handlers, callback_handlers);
}

}  // namespace homarpc::bench
