// kv_server: a key-value store (kvstore.proto) served with gRPC's synchronous API.
//
// An ordinary gRPC C++ program: CMakeLists.txt builds it against gRPC exactly as written, and
// builds it again against homarpc after the three textual replacements of migrate.cmake (the
// umbrella header, the namespace, the generated header's suffix); see
// docs/migrating-from-grpc.md. Nothing in this file knows which of the two it is built for.
//
// It uses what unary services commonly use: status codes with messages (NOT_FOUND,
// INVALID_ARGUMENT), the client's metadata, trailing metadata, a handler that watches the
// call's deadline and cancellation through IsCancelled(), and a clean Shutdown() on Ctrl-C or
// SIGTERM (exit status 0). Handlers run on the server's threads, several at a time, so the map
// is guarded by a mutex.
//
//   kv_server --port=50051     (--port=0 picks a free port; the line it prints names it)
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kvstore.grpc.pb.h"

ABSL_FLAG(uint16_t, port, 50051, "Port to listen on; 0 picks a free one");

namespace {

// The value of client metadata `key`, or "" when the client did not send it.
std::string ClientMetadata(const grpc::ServerContext& context, const std::string& key) {
  const std::multimap<grpc::string_ref, grpc::string_ref>& metadata = context.client_metadata();
  auto it = metadata.find(key);
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

class KeyValueStoreImpl final : public kvstore::KeyValueStore::Service {
 public:
  grpc::Status Get(grpc::ServerContext* context, const kvstore::GetRequest* request,
                   kvstore::GetReply* reply) override {
    // Simulated slow storage: the client asks for `x-simulate-work-ms` of work. A handler
    // that may take long checks IsCancelled(), which turns true when the client's deadline
    // passes or the client cancels, and gives up: nobody waits for the answer any more.
    int work_ms = std::atoi(ClientMetadata(*context, "x-simulate-work-ms").c_str());
    auto work_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(work_ms);
    while (std::chrono::steady_clock::now() < work_end) {
      if (context->IsCancelled()) {
        std::cout << "Get(" << request->key() << "): the caller gave up" << std::endl;
        return grpc::Status(grpc::StatusCode::CANCELLED, "caller gave up");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }

    std::lock_guard<std::mutex> lock(mu_);
    context->AddTrailingMetadata("x-store-size", std::to_string(entries_.size()));
    auto it = entries_.find(request->key());
    if (it == entries_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no value for key \"" + request->key() + "\"");
    }
    reply->set_value(it->second.value);
    reply->set_written_by(it->second.written_by);
    return grpc::Status::OK;
  }

  grpc::Status Put(grpc::ServerContext* context, const kvstore::PutRequest* request,
                   kvstore::PutReply* reply) override {
    if (request->key().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the key must not be empty");
    }
    Entry entry{request->value(), ClientMetadata(*context, "x-client-id")};
    std::lock_guard<std::mutex> lock(mu_);
    bool inserted = entries_.insert_or_assign(request->key(), std::move(entry)).second;
    reply->set_replaced(!inserted);
    context->AddTrailingMetadata("x-store-size", std::to_string(entries_.size()));
    return grpc::Status::OK;
  }

 private:
  struct Entry {
    std::string value;
    std::string written_by;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
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

  KeyValueStoreImpl service;
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::cerr << "kv_server: cannot listen on " << address << std::endl;
    return 1;
  }
  std::cout << "Server listening on 0.0.0.0:" << selected_port << std::endl;
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    // Calls still running after 2 s are cancelled (their IsCancelled() turns true).
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });
  server->Wait();
  stopper.join();
  std::cout << "Server stopped" << std::endl;
  return 0;
}
