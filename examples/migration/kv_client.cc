// kv_client: calls kv_server (kvstore.proto) through gRPC's blocking and callback APIs, and
// checks that every call ends as it should.
//
// An ordinary gRPC C++ program, built against gRPC as written and against homarpc after the
// three textual replacements (see kv_server.cc and docs/migrating-from-grpc.md). Each step
// prints one line; the program exits 0 when every outcome was the expected one, 1 otherwise.
//
//   kv_client --target=localhost:50051 [--client_id=kv-client]
//
// It uses what unary clients commonly use: deadlines on every call, request metadata,
// trailing metadata from the server, status codes, TryCancel(), and both call styles.
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "kvstore.grpc.pb.h"

ABSL_FLAG(std::string, target, "localhost:50051", "Server address");
ABSL_FLAG(std::string, client_id, "kv-client", "Sent as x-client-id metadata with each Put");

namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    default: return "another code";
  }
}

std::string Describe(const grpc::Status& status) {
  std::string text = CodeName(status.error_code());
  if (!status.error_message().empty()) text += " (" + status.error_message() + ")";
  return text;
}

// Trailing metadata `key` of a completed call, or "" when the server sent none.
std::string Trailer(const grpc::ClientContext& context, const std::string& key) {
  const std::multimap<grpc::string_ref, grpc::string_ref>& trailers =
      context.GetServerTrailingMetadata();
  auto it = trailers.find(key);
  if (it == trailers.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// Always set a deadline (gRPC's advice; a call without one may wait forever).
void SetTimeout(grpc::ClientContext* context, std::chrono::milliseconds timeout) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

class KeyValueClient {
 public:
  KeyValueClient(std::shared_ptr<grpc::Channel> channel, std::string client_id)
      : stub_(kvstore::KeyValueStore::NewStub(channel)), client_id_(std::move(client_id)) {}

  // Blocking call with request metadata.
  grpc::Status Put(const std::string& key, const std::string& value, bool* replaced) {
    grpc::ClientContext context;
    SetTimeout(&context, std::chrono::seconds(5));
    context.AddMetadata("x-client-id", client_id_);
    kvstore::PutRequest request;
    request.set_key(key);
    request.set_value(value);
    kvstore::PutReply reply;
    grpc::Status status = stub_->Put(&context, request, &reply);
    *replaced = reply.replaced();
    return status;
  }

  // Blocking call; reads trailing metadata. `work_ms` asks the server to take that long.
  grpc::Status Get(const std::string& key, std::chrono::milliseconds timeout, int work_ms,
                   kvstore::GetReply* reply, std::string* store_size) {
    grpc::ClientContext context;
    SetTimeout(&context, timeout);
    if (work_ms > 0) context.AddMetadata("x-simulate-work-ms", std::to_string(work_ms));
    kvstore::GetRequest request;
    request.set_key(key);
    grpc::Status status = stub_->Get(&context, request, reply);
    *store_size = Trailer(context, "x-store-size");
    return status;
  }

  // The callback API: the call returns at once and the lambda runs when it completes (on a
  // library thread). With `cancel`, the call is cancelled right after it starts; the server
  // is asked for 10 s of work, so the cancel always comes first.
  grpc::Status GetWithCallback(const std::string& key, bool cancel, kvstore::GetReply* reply) {
    grpc::ClientContext context;
    SetTimeout(&context, std::chrono::seconds(20));
    if (cancel) context.AddMetadata("x-simulate-work-ms", "10000");
    kvstore::GetRequest request;
    request.set_key(key);

    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status result;
    stub_->async()->Get(&context, &request, reply, [&](grpc::Status status) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(status);
      done = true;
      cv.notify_one();
    });
    if (cancel) context.TryCancel();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return result;
  }

 private:
  std::unique_ptr<kvstore::KeyValueStore::Stub> stub_;
  std::string client_id_;
};

int failures = 0;

void Check(const std::string& step, const grpc::Status& status, grpc::StatusCode expected,
           bool extra_ok = true, const std::string& extra = "") {
  bool ok = status.error_code() == expected && extra_ok;
  std::cout << step << " -> " << Describe(status) << extra
            << (ok ? "" : std::string("   MISMATCH: expected ") + CodeName(expected))
            << std::endl;
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string client_id = absl::GetFlag(FLAGS_client_id);
  KeyValueClient client(
      grpc::CreateChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials()),
      client_id);

  bool replaced = false;
  grpc::Status status = client.Put("greeting", "hello", &replaced);
  Check("Put(greeting, hello)", status, grpc::StatusCode::OK, true,
        replaced ? ", replaced a value" : ", new key");

  kvstore::GetReply reply;
  std::string store_size;
  status = client.Get("greeting", std::chrono::seconds(5), 0, &reply, &store_size);
  Check("Get(greeting)", status, grpc::StatusCode::OK,
        reply.value() == "hello" && reply.written_by() == client_id && !store_size.empty(),
        ": \"" + reply.value() + "\" written by " + reply.written_by() + ", " + store_size +
            " key(s) stored");

  reply.Clear();
  status = client.Get("no-such-key", std::chrono::seconds(5), 0, &reply, &store_size);
  Check("Get(no-such-key)", status, grpc::StatusCode::NOT_FOUND);

  status = client.Put("", "value", &replaced);
  Check("Put(\"\", value)", status, grpc::StatusCode::INVALID_ARGUMENT);

  reply.Clear();
  status = client.Get("greeting", std::chrono::milliseconds(100), 10000, &reply, &store_size);
  Check("Get(greeting) taking 10 s, deadline 100 ms", status,
        grpc::StatusCode::DEADLINE_EXCEEDED);

  reply.Clear();
  status = client.GetWithCallback("greeting", /*cancel=*/false, &reply);
  Check("callback Get(greeting)", status, grpc::StatusCode::OK, reply.value() == "hello",
        ": \"" + reply.value() + "\"");

  reply.Clear();
  status = client.GetWithCallback("greeting", /*cancel=*/true, &reply);
  Check("callback Get(greeting) taking 10 s, TryCancel()", status, grpc::StatusCode::CANCELLED);

  if (failures > 0) {
    std::cout << "kv_client: " << failures << " unexpected outcome(s)" << std::endl;
    return 1;
  }
  std::cout << "kv_client: every call ended as expected" << std::endl;
  return 0;
}
