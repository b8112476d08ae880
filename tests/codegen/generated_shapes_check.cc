// Compile-time checks of the code protoc-gen-homarpc generates (no test binary: if this
// file compiles, the checks hold). Each test .proto's header is included, the gRPC-shaped
// signatures are pinned with static_assert, and services, a callback service, a hand-written
// stub fake and a client are written the way applications write them, with `override`, so
// that a change in the generated shapes breaks the build here first.
#include <concepts>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

#include "comments.homarpc.pb.h"
#include "common/common.homarpc.pb.h"
#include "greeter.homarpc.pb.h"
#include "keywords.homarpc.pb.h"
#include "nested/pkg/deep.homarpc.pb.h"
#include "no_package.homarpc.pb.h"
#include "streaming.homarpc.pb.h"

namespace homarpc_codegen_check {

using homarpc::CallbackServerContext;
using homarpc::ClientContext;
using homarpc::ServerContext;
using homarpc::ServerUnaryReactor;
using homarpc::Status;
using Callback = std::function<void(Status)>;

// ---- helloworld: the shapes gRPC 1.51 generates ----
using helloworld::Greeter;
using helloworld::HelloReply;
using helloworld::HelloRequest;

static_assert(std::string_view(Greeter::service_full_name()) == "helloworld.Greeter");
static_assert(std::is_same_v<decltype(&Greeter::StubInterface::SayHello),
                             Status (Greeter::StubInterface::*)(ClientContext*, const HelloRequest&,
                                                                HelloReply*)>);
static_assert(
    std::is_same_v<decltype(&Greeter::Stub::SayHello),
                   Status (Greeter::Stub::*)(ClientContext*, const HelloRequest&, HelloReply*)>);
static_assert(std::is_same_v<decltype(&Greeter::StubInterface::async_interface::SayHello),
                             void (Greeter::StubInterface::async_interface::*)(
                                 ClientContext*, const HelloRequest*, HelloReply*, Callback)>);
static_assert(
    std::is_same_v<decltype(&Greeter::Service::SayHello),
                   Status (Greeter::Service::*)(ServerContext*, const HelloRequest*, HelloReply*)>);
static_assert(std::is_same_v<
              decltype(&Greeter::CallbackService::SayHello),
              ServerUnaryReactor* (Greeter::CallbackService::*)(CallbackServerContext*,
                                                                const HelloRequest*, HelloReply*)>);
static_assert(std::is_same_v<decltype(Greeter::NewStub(std::shared_ptr<homarpc::Channel>())),
                             std::unique_ptr<Greeter::Stub>>);
static_assert(
    std::is_same_v<decltype(std::declval<Greeter::Stub&>().async()), class Greeter::Stub::async*>);
static_assert(std::is_same_v<decltype(std::declval<Greeter::Stub&>().experimental_async()),
                             Greeter::StubInterface::async_interface*>);
static_assert(std::is_base_of_v<Greeter::StubInterface, Greeter::Stub>);
static_assert(std::is_base_of_v<homarpc::Service, Greeter::Service>);
static_assert(std::is_base_of_v<homarpc::Service, Greeter::CallbackService>);
static_assert(std::is_same_v<Greeter::ExperimentalCallbackService, Greeter::CallbackService>);
static_assert(std::is_same_v<Greeter::StubInterface::experimental_async_interface,
                             Greeter::StubInterface::async_interface>);
static_assert(std::is_abstract_v<Greeter::StubInterface>);
static_assert(!std::is_abstract_v<Greeter::Service>);
static_assert(!std::is_abstract_v<Greeter::CallbackService>);
// gRPC's Stub converts from a channel.
static_assert(std::is_convertible_v<std::shared_ptr<homarpc::Channel>, Greeter::Stub>);

// A sync service, as in gRPC's greeter_server.cc.
class GreeterServiceImpl final : public Greeter::Service {
  Status SayHello(ServerContext* context, const HelloRequest* request, HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    return Status::OK;
  }
};

// A callback service, as in gRPC's greeter_callback_server.cc.
class GreeterCallbackServiceImpl final : public Greeter::CallbackService {
  ServerUnaryReactor* SayHello(CallbackServerContext* context, const HelloRequest* request,
                               HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(Status::OK);
    return reactor;
  }
};

// A fake stub that implements only the blocking calls (as gmock mocks do) is instantiable:
// async() has a default, as in gRPC.
class FakeGreeterStub final : public Greeter::StubInterface {
 public:
  Status SayHello(ClientContext* context, const HelloRequest& request,
                  HelloReply* response) override {
    return Status::OK;
  }
};
static_assert(!std::is_abstract_v<FakeGreeterStub>);

// A client, as in gRPC's greeter_client.cc and greeter_callback_client.cc.
Status CallGreeter(const std::shared_ptr<homarpc::Channel>& channel) {
  std::unique_ptr<Greeter::Stub> stub = Greeter::NewStub(channel);
  HelloRequest request;
  request.set_name("world");
  HelloReply reply;
  ClientContext async_context;
  stub->async()->SayHello(&async_context, &request, &reply, [](Status status) {});
  ClientContext experimental_context;
  stub->experimental_async()->SayHello(&experimental_context, &request, &reply,
                                       [](Status status) {});
  ClientContext context;
  return stub->SayHello(&context, request, &reply);
}

// ---- comments.proto: comments with '$', "*/" and a trailing backslash still compile ----
static_assert(
    std::is_same_v<decltype(&comments::test::Documented::Stub::Awkward),
                   Status (comments::test::Documented::Stub::*)(
                       ClientContext*, const comments::test::Req&, comments::test::Resp*)>);

// ---- no package: global namespace, nested message type Outer.Inner -> Outer_Inner ----
static_assert(std::string_view(::Echo::service_full_name()) == "Echo");
static_assert(
    std::is_same_v<decltype(&::Echo::Stub::Measure),
                   Status (::Echo::Stub::*)(ClientContext*, const ::Outer_Inner&, ::Reply*)>);

// ---- nested package, imported and well-known types, several services per file ----
static_assert(std::string_view(a::b::c::Clock::service_full_name()) == "a.b.c.Clock");
static_assert(std::is_same_v<decltype(&a::b::c::Pinger::Stub::Ping),
                             Status (a::b::c::Pinger::Stub::*)(
                                 ClientContext*, const common::v1::Ping&, common::v1::Pong*)>);
static_assert(std::is_same_v<decltype(&a::b::c::Clock::Service::Now),
                             Status (a::b::c::Clock::Service::*)(ServerContext*,
                                                                 const google::protobuf::Empty*,
                                                                 google::protobuf::Timestamp*)>);
static_assert(std::is_same_v<decltype(&a::b::c::Clock::Stub::Deepest),
                             Status (a::b::c::Clock::Stub::*)(ClientContext*,
                                                              const a::b::c::Outer_Middle_Inner&,
                                                              a::b::c::Outer_Middle*)>);
static_assert(std::is_same_v<decltype(&a::b::c::Clock::Stub::Lookup),
                             Status (a::b::c::Clock::Stub::*)(ClientContext*,
                                                              const google::protobuf::StringValue&,
                                                              a::b::c::Outer_Middle_Inner*)>);
// A method named like its service.
static_assert(std::is_same_v<decltype(&a::b::c::Echo::Stub::Echo),
                             Status (a::b::c::Echo::Stub::*)(ClientContext*, const a::b::c::Outer&,
                                                             a::b::c::Outer*)>);

// ---- keywords and reserved names get "_" in C++; wire names unchanged ----
static_assert(std::string_view(kw::union_::service_full_name()) == "kw.union");
static_assert(std::string_view(kw::Service_::service_full_name()) == "kw.Service");
static_assert(std::string_view(kw::Stub_::service_full_name()) == "kw.Stub");
static_assert(std::string_view(kw::NewStub_::service_full_name()) == "kw.NewStub");
static_assert(std::is_same_v<decltype(&kw::union_::Stub::delete_),
                             Status (kw::union_::Stub::*)(ClientContext*, const kw::class_&,
                                                          kw::class__new*)>);

class KeywordServiceImpl final : public kw::union_::Service {
  Status delete_(ServerContext* context, const kw::class_* request,
                 kw::class__new* response) override {
    return Status::OK;
  }
  Status new_(ServerContext* context, const kw::class__new* request,
              kw::class_* response) override {
    return Status::OK;
  }
  Status async_(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
  Status Stub_(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
  Status Service_(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
  Status AddMethod(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
  Status methods(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
  Status context(ServerContext*, const kw::class_*, kw::class_*) override { return Status::OK; }
};

Status CallKeywordStub(kw::union_::Stub* stub) {
  ClientContext context;
  kw::class_ request;
  kw::class__new response;
  stub->async()->delete_(&context, &request, &response, [](Status) {});
  kw::class_ other;
  ClientContext async_context;
  stub->async_(&async_context, request, &other);
  return stub->delete_(&context, request, &response);
}

// ---- streaming: no C++ method for streaming rpcs, unary ones as usual ----
template <typename T>
concept HasUpload = requires {
  &T::Upload;
};
template <typename T>
concept HasDownload = requires {
  &T::Download;
};
template <typename T>
concept HasChat = requires {
  &T::Chat;
};
template <typename T>
concept HasUnary = requires {
  &T::Unary;
};
static_assert(!HasUpload<streaming::Mixed::Stub> && !HasDownload<streaming::Mixed::Stub> &&
              !HasChat<streaming::Mixed::Stub>);
static_assert(!HasUpload<streaming::Mixed::Service> && !HasChat<streaming::Mixed::Service>);
static_assert(!HasDownload<streaming::Mixed::CallbackService>);
static_assert(HasUnary<streaming::Mixed::Stub> && HasUnary<streaming::Mixed::Service> &&
              HasUnary<streaming::Mixed::CallbackService>);
static_assert(std::is_default_constructible_v<streaming::OnlyStreaming::Service>);
static_assert(std::is_default_constructible_v<streaming::NoMethods::CallbackService>);

}  // namespace homarpc_codegen_check
