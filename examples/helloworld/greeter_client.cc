// greeter_client: calls Greeter.SayHello (helloworld.proto) once through the blocking API.
//
// The stub's method sends the request and waits for the reply on the calling thread. Exits 0
// when the call succeeded, 1 otherwise (printing the status).
//
//   greeter_client --target=localhost:50051 --name=world
#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include <homarpc/homarpc.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "helloworld.homarpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "Server address (Homa over UDP)");
ABSL_FLAG(std::string, name, "world", "Name to greet");

namespace {

class GreeterClient {
 public:
  explicit GreeterClient(std::shared_ptr<homarpc::Channel> channel)
      : stub_(helloworld::Greeter::NewStub(channel)) {}

  // Sends `user`'s name and returns the greeting, or the failure's status.
  homarpc::Status SayHello(const std::string& user, std::string* greeting) {
    helloworld::HelloRequest request;
    request.set_name(user);
    helloworld::HelloReply reply;

    // Per-call settings: a deadline (always set one), metadata, cancellation.
    homarpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));

    homarpc::Status status = stub_->SayHello(&context, request, &reply);
    if (status.ok()) *greeting = reply.message();
    return status;
  }

 private:
  std::unique_ptr<helloworld::Greeter::Stub> stub_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // A channel is cheap to share and thread-safe: create one per server and reuse it.
  GreeterClient greeter(homarpc::CreateChannel(absl::GetFlag(FLAGS_target),
                                               homarpc::InsecureChannelCredentials()));
  std::string greeting;
  homarpc::Status status = greeter.SayHello(absl::GetFlag(FLAGS_name), &greeting);
  if (!status.ok()) {
    std::cout << "RPC failed: " << status.ToString() << std::endl;
    return 1;
  }
  std::cout << "Greeter received: " << greeting << std::endl;
  return 0;
}
