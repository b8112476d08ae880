// An outside program built against an installed homarpc: creates a Service and a Stub from
// the generated code and checks what it can without a server (the method table, and that a
// call to a target that does not resolve fails UNAVAILABLE). Exit status 0 = all good.
#include <homarpc/homarpc.h>

#include <cstdio>
#include <memory>

#include "api/greeter.homarpc.pb.h"

namespace {

class GreeterImpl final : public outside::api::Greeter::Service {
  homarpc::Status SayHello(homarpc::ServerContext* context,
                           const outside::api::HelloRequest* request,
                           outside::api::HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    return homarpc::Status::OK;
  }
};

int Fail(const char* what) {
  std::fprintf(stderr, "outside_greeter: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  GreeterImpl service;
  if (service.methods().size() != 2 ||
      service.methods()[0].name != "/outside.api.Greeter/SayHello") {
    return Fail("unexpected method table");
  }

  auto channel =
      homarpc::CreateChannel("ipv4:not-an-address", homarpc::InsecureChannelCredentials());
  std::unique_ptr<outside::api::Greeter::Stub> stub = outside::api::Greeter::NewStub(channel);
  homarpc::ClientContext context;
  outside::api::HelloRequest request;
  request.set_name("world");
  outside::api::HelloReply reply;
  homarpc::Status status = stub->SayHello(&context, request, &reply);
  if (status.error_code() != homarpc::StatusCode::UNAVAILABLE) {
    return Fail("a call to an unresolvable target did not fail UNAVAILABLE");
  }
  std::printf("outside_greeter: ok (%s)\n", status.error_message().c_str());
  return 0;
}
