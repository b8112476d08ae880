// greeter_async_client: calls Greeter.SayHello (helloworld.proto) through the callback API,
// several calls in flight at once from one thread.
//
// stub->async()->SayHello() returns at once; the callback runs exactly once when the call
// completes, on one of the channel's threads (it must not block). The request, the reply and
// the context belong to the caller and must live until then. Exits 0 when every call
// succeeded, 1 otherwise.
//
//   greeter_async_client --target=localhost:50051 --name=world --calls=3
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <homarpc/homarpc.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "helloworld.homarpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "Server address (Homa over UDP)");
ABSL_FLAG(std::string, name, "world", "Name to greet");
ABSL_FLAG(int, calls, 3, "Calls to have in flight at once");

namespace {

// One call's state, alive until its callback has run.
struct Call {
  homarpc::ClientContext context;
  helloworld::HelloRequest request;
  helloworld::HelloReply reply;
  homarpc::Status status;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto channel = homarpc::CreateChannel(absl::GetFlag(FLAGS_target),
                                        homarpc::InsecureChannelCredentials());
  std::unique_ptr<helloworld::Greeter::Stub> stub = helloworld::Greeter::NewStub(channel);

  std::mutex mu;
  std::condition_variable all_done;
  int pending = absl::GetFlag(FLAGS_calls);
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < absl::GetFlag(FLAGS_calls); ++i) {
    calls.push_back(std::make_unique<Call>());
    Call* call = calls.back().get();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    call->request.set_name(absl::GetFlag(FLAGS_name));
    stub->async()->SayHello(&call->context, &call->request, &call->reply,
                            [call, &mu, &all_done, &pending](homarpc::Status status) {
                              std::lock_guard<std::mutex> lock(mu);
                              call->status = std::move(status);
                              if (--pending == 0) all_done.notify_one();
                            });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    all_done.wait(lock, [&pending] { return pending == 0; });
  }

  int failed = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& call = *calls[i];
    if (call.status.ok()) {
      std::cout << "Greeter received: " << call.reply.message() << " (call " << i + 1 << " of "
                << calls.size() << ")" << std::endl;
    } else {
      std::cout << "RPC failed: " << call.status.ToString() << std::endl;
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
