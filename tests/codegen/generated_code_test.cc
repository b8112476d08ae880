// The generated classes at run time (the compile-time shapes are in
// generated_shapes_check.cc): each Service registers its methods under the right full names
// and RPC types, in .proto order, with handlers of the right kind that call the virtuals
// (default: UNIMPLEMENTED); streaming methods have no handler; stubs reach the channel.
// Calls over a real server are the e2e tests' business (tests/runtime/e2e).
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "greeter.homarpc.pb.h"
#include "gtest/gtest.h"
#include "keywords.homarpc.pb.h"
#include "nested/pkg/deep.homarpc.pb.h"
#include "no_package.homarpc.pb.h"
#include "streaming.homarpc.pb.h"

namespace homarpc {
namespace {

using internal::MethodHandler;
using internal::RpcType;
using ::testing::ElementsAre;

std::vector<std::string> Names(const Service& service) {
  std::vector<std::string> names;
  for (const internal::ServiceMethod& method : service.methods()) names.push_back(method.name);
  return names;
}

class GreeterImpl final : public helloworld::Greeter::Service {
  Status SayHello(ServerContext* context, const helloworld::HelloRequest* request,
                  helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    return Status(StatusCode::ABORTED, "from the override");
  }
};

TEST(GeneratedCode, Service_RegistersUnaryMethodWithSyncHandler) {
  helloworld::Greeter::Service service;
  ASSERT_EQ(service.methods().size(), 1u);
  const internal::ServiceMethod& method = service.methods()[0];
  EXPECT_EQ(method.name, "/helloworld.Greeter/SayHello");
  EXPECT_EQ(method.type, RpcType::NORMAL_RPC);
  ASSERT_NE(method.handler, nullptr);
  EXPECT_EQ(method.handler->kind(), MethodHandler::Kind::kSync);
}

TEST(GeneratedCode, Service_DefaultMethodAnswersUnimplemented) {
  helloworld::Greeter::Service service;
  const MethodHandler& handler = *service.methods()[0].handler;
  std::unique_ptr<internal::CallMessages> messages = handler.NewMessages();
  ServerContext context;
  Status status = handler.RunSync(&context, messages->request(), messages->response());
  EXPECT_EQ(status.error_code(), StatusCode::UNIMPLEMENTED);
}

TEST(GeneratedCode, Service_HandlerCallsOverrideWithTypedMessages) {
  GreeterImpl service;
  const MethodHandler& handler = *service.methods()[0].handler;
  std::unique_ptr<internal::CallMessages> messages = handler.NewMessages();
  auto* request = dynamic_cast<helloworld::HelloRequest*>(messages->request());
  auto* reply = dynamic_cast<helloworld::HelloReply*>(messages->response());
  ASSERT_NE(request, nullptr);
  ASSERT_NE(reply, nullptr);
  request->set_name("world");
  ServerContext context;
  Status status = handler.RunSync(&context, request, reply);
  EXPECT_EQ(status.error_code(), StatusCode::ABORTED);
  EXPECT_EQ(status.error_message(), "from the override");
  EXPECT_EQ(reply->message(), "Hello world");
}

TEST(GeneratedCode, CallbackService_RegistersCallbackHandler) {
  helloworld::Greeter::CallbackService service;
  ASSERT_EQ(service.methods().size(), 1u);
  EXPECT_EQ(service.methods()[0].name, "/helloworld.Greeter/SayHello");
  ASSERT_NE(service.methods()[0].handler, nullptr);
  EXPECT_EQ(service.methods()[0].handler->kind(), MethodHandler::Kind::kCallback);
}

TEST(GeneratedCode, CallbackService_DefaultMethodReturnsTheDefaultReactor) {
  // That the call is then answered UNIMPLEMENTED end to end: tests/runtime/e2e
  // (Semantics.UnoverriddenCallbackMethodIsUnimplemented).
  helloworld::Greeter::CallbackService service;
  const MethodHandler& handler = *service.methods()[0].handler;
  std::unique_ptr<internal::CallMessages> messages = handler.NewMessages();
  CallbackServerContext context;
  ServerUnaryReactor* reactor =
      handler.RunCallback(&context, messages->request(), messages->response());
  EXPECT_EQ(reactor, context.DefaultReactor());
}

TEST(GeneratedCode, Streaming_RegisteredInOrderWithoutHandlers) {
  streaming::Mixed::Service service;
  EXPECT_THAT(Names(service), ElementsAre("/streaming.Mixed/Unary", "/streaming.Mixed/Upload",
                                          "/streaming.Mixed/Download", "/streaming.Mixed/Chat",
                                          "/streaming.Mixed/AfterStreams"));
  const auto& methods = service.methods();
  EXPECT_EQ(methods[0].type, RpcType::NORMAL_RPC);
  EXPECT_NE(methods[0].handler, nullptr);
  EXPECT_EQ(methods[1].type, RpcType::CLIENT_STREAMING);
  EXPECT_EQ(methods[1].handler, nullptr);
  EXPECT_EQ(methods[2].type, RpcType::SERVER_STREAMING);
  EXPECT_EQ(methods[2].handler, nullptr);
  EXPECT_EQ(methods[3].type, RpcType::BIDI_STREAMING);
  EXPECT_EQ(methods[3].handler, nullptr);
  EXPECT_EQ(methods[4].type, RpcType::NORMAL_RPC);
  EXPECT_NE(methods[4].handler, nullptr);

  streaming::Mixed::CallbackService callback_service;
  EXPECT_EQ(Names(callback_service), Names(service));
  EXPECT_EQ(callback_service.methods()[2].handler, nullptr);

  EXPECT_THAT(Names(streaming::OnlyStreaming::Service()),
              ElementsAre("/streaming.OnlyStreaming/Watch"));
  EXPECT_TRUE(streaming::NoMethods::Service().methods().empty());
}

TEST(GeneratedCode, FullNames_NoPackageNestedPackageAndKeywords) {
  EXPECT_THAT(Names(::Echo::Service()), ElementsAre("/Echo/Measure", "/Echo/Wrap"));
  EXPECT_THAT(Names(a::b::c::Clock::Service()),
              ElementsAre("/a.b.c.Clock/Now", "/a.b.c.Clock/Reset", "/a.b.c.Clock/Lookup",
                          "/a.b.c.Clock/Deepest"));
  EXPECT_THAT(Names(a::b::c::Pinger::CallbackService()), ElementsAre("/a.b.c.Pinger/Ping"));
  // C++ names get "_"; the wire names keep the .proto's. (kw.union has an rpc named
  // "methods", which hides Service::methods() in the generated class: Names() goes through
  // the base, as the server does.)
  std::vector<std::string> keywords = Names(kw::union_::Service());
  ASSERT_GE(keywords.size(), 2u);
  EXPECT_EQ(keywords[0], "/kw.union/delete");
  EXPECT_EQ(keywords[1], "/kw.union/new");
  EXPECT_THAT(Names(kw::Service_::Service()), ElementsAre("/kw.Service/Get"));
}

// A channel whose target does not resolve fails every call UNAVAILABLE without sending
// anything (channel.h): enough to see the generated stub reach the channel, both ways.
TEST(GeneratedCode, Stub_CallsReachTheChannel) {
  std::shared_ptr<Channel> channel =
      CreateChannel("ipv4:not-an-address", InsecureChannelCredentials());
  std::unique_ptr<helloworld::Greeter::Stub> stub = helloworld::Greeter::NewStub(channel);
  helloworld::HelloRequest request;
  helloworld::HelloReply reply;

  ClientContext blocking_context;
  EXPECT_EQ(stub->SayHello(&blocking_context, request, &reply).error_code(),
            StatusCode::UNAVAILABLE);

  absl::Mutex mu;
  bool done = false;
  Status async_status;
  ClientContext async_context;
  stub->async()->SayHello(&async_context, &request, &reply, [&](Status status) {
    absl::MutexLock lock(&mu);
    async_status = std::move(status);
    done = true;
  });
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30)));
  EXPECT_EQ(async_status.error_code(), StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace homarpc
