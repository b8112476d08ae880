// greeter_server: the Greeter service (helloworld.proto) on homarpc's synchronous API.
//
// The handler is an ordinary blocking function; the server runs it on a worker pool, so it
// may take its time and several calls run at once. Ctrl-C or SIGTERM shuts the server down
// cleanly: calls in flight finish, then the program exits 0.
//
//   greeter_server --port=50051    (a UDP port: Homa runs over UDP; --port=0 picks one)
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

// The service: derive from the generated Greeter::Service and override its methods.
class GreeterServiceImpl final : public helloworld::Greeter::Service {
  homarpc::Status SayHello(homarpc::ServerContext* context,
                           const helloworld::HelloRequest* request,
                           helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    return homarpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  // Stop on Ctrl-C / SIGTERM: block the signals before the server starts its threads (they
  // inherit the mask) and wait for them on a thread of our own.
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
    std::cerr << "greeter_server: cannot listen on " << address << std::endl;
    return 1;
  }
  std::cout << "Server listening on 0.0.0.0:" << selected_port << " (Homa over UDP)"
            << std::endl;

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    // Calls still running after 5 s are cancelled.
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server->Wait();
  stopper.join();
  std::cout << "Server stopped" << std::endl;
  return 0;
}
