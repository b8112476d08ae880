// greeter_callback_server: the Greeter service (helloworld.proto) on homarpc's callback API.
//
// A callback handler does not return the status: it finishes the call through a reactor, from
// this thread or any other, later. The runtime calls it inline on the loop thread that
// received the request, so it must never block; work that blocks belongs on a thread of its
// own, which then calls reactor->Finish(). Ctrl-C or SIGTERM shuts the server down cleanly.
//
//   greeter_callback_server --port=50051    (a UDP port; --port=0 picks one)
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <homarpc/homarpc.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "helloworld.homarpc.pb.h"

ABSL_FLAG(uint16_t, port, 50051, "UDP port to listen on; 0 picks a free one");

namespace {

// Derive from the generated Greeter::CallbackService and override its methods.
class GreeterServiceImpl final : public helloworld::Greeter::CallbackService {
  homarpc::ServerUnaryReactor* SayHello(homarpc::CallbackServerContext* context,
                                        const helloworld::HelloRequest* request,
                                        helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    // The context's own reactor suits a call finished at once; Finish() exactly once.
    homarpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(homarpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  // Stop on Ctrl-C / SIGTERM (see greeter_server.cc).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::string address = "0.0.0.0:" + std::to_string(absl::GetFlag(FLAGS_port));
  GreeterServiceImpl service;
  homarpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(address, homarpc::InsecureServerCredentials(), &selected_port);
  builder.RegisterService(&service);
  std::unique_ptr<homarpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::cerr << "greeter_callback_server: cannot listen on " << address << std::endl;
    return 1;
  }
  std::cout << "Server listening on 0.0.0.0:" << selected_port << " (Homa over UDP)"
            << std::endl;

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server->Wait();
  stopper.join();
  std::cout << "Server stopped" << std::endl;
  return 0;
}
