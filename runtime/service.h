// Service and method handlers: what generated service classes derive from and register.
//
// A generated `Greeter::Service` (sync) or `Greeter::CallbackService` derives from Service
// and, in its constructor, calls AddMethod() once per RPC with a handler that calls the
// virtual method. The server looks handlers up by full name ("/helloworld.Greeter/SayHello").
// Streaming methods are registered with a null handler: callers get UNIMPLEMENTED until
// streaming ships.
//
// Services are owned by the application and must outlive the Server they are registered
// with (as in gRPC). Handlers are immutable after construction and called from many threads.
#ifndef HOMARPC_RUNTIME_SERVICE_H_
#define HOMARPC_RUNTIME_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "google/protobuf/message_lite.h"
#include "runtime/channel.h"
#include "runtime/message_pool.h"
#include "runtime/server_context.h"
#include "runtime/status.h"

namespace homarpc {

namespace internal {

// The request and response objects of one call, allocated together (the server constructs
// them inside its per-call object: one allocation per call, see MethodHandler).
class CallMessages {
 public:
  virtual ~CallMessages() = default;
  virtual google::protobuf::MessageLite* request() = 0;
  virtual google::protobuf::MessageLite* response() = 0;
  // Moves the response out into a new heap object (protobuf's move: the fields' storage is
  // swapped, not copied), leaving response() empty. The server sends a large response from
  // it zero-copy while the call itself is freed (payload_encoder.h).
  virtual std::unique_ptr<google::protobuf::MessageLite> TakeResponse() = 0;

  // Internal to the server (message_pool.h): what the response's storage is known to hold
  // when it came from the method's pool, 0 for a fresh one; TakeResponse() leaves none.
  size_t response_storage_bytes = 0;
};

template <typename Request, typename Response>
class TypedCallMessages final : public CallMessages {
 public:
  google::protobuf::MessageLite* request() override { return &request_; }
  google::protobuf::MessageLite* response() override { return &response_; }
  std::unique_ptr<google::protobuf::MessageLite> TakeResponse() override {
    response_storage_bytes = 0;
    return std::make_unique<Response>(std::move(response_));
  }
  Response& typed_response() { return response_; }

 private:
  Request request_;
  Response response_;
};

class MethodHandler {
 public:
  enum class Kind {
    kSync,      // RunSync on the server's executor (worker pool or inline)
    kCallback,  // RunCallback on the loop thread that received the request
  };
  virtual ~MethodHandler() = default;
  virtual Kind kind() const = 0;
  // The call's messages on the heap (tests, tools).
  virtual std::unique_ptr<CallMessages> NewMessages() const = 0;
  // The same in storage the caller provides: `storage` holds messages_size() bytes aligned to
  // at least messages_align(). The caller destroys the result with ~CallMessages() (virtual)
  // and then frees the storage. The server uses this to put the messages inside its per-call
  // object, so a call costs one allocation.
  virtual size_t messages_size() const = 0;
  virtual size_t messages_align() const = 0;
  virtual CallMessages* ConstructMessages(void* storage) const = 0;
  // kSync only.
  virtual Status RunSync(ServerContext* context, const google::protobuf::MessageLite* request,
                         google::protobuf::MessageLite* response) const {
    return Status(StatusCode::UNIMPLEMENTED, "");
  }
  // kCallback only. Returns the reactor that will be (or was) finished.
  virtual ServerUnaryReactor* RunCallback(CallbackServerContext* context,
                                          const google::protobuf::MessageLite* request,
                                          google::protobuf::MessageLite* response) const {
    return nullptr;
  }
  // Recycling (message_pool.h): ConstructMessages() gives the new response the storage of an
  // earlier call's large one. The server offers a finished call's messages here before it
  // destroys them, and gives a large response that left the call (TakeResponse) to
  // response_pool() once the transport has sent it. Requests are not pooled: their size is
  // the client's to choose, and what a parsed request holds can be many times its wire size
  // (repeated sub-messages), which the pool's bounds could not see. Never throws.
  virtual void Recycle(CallMessages* messages) const {}
  virtual std::shared_ptr<MessagePool> response_pool() const { return nullptr; }

  // How long this method's sync handlers have been running, each with the encoding of its
  // response: an average of weight 1/8 (ServerCall::Start runs quick ones on the loop thread).
  // Thread-safe; concurrent updates may lose one.
  int64_t average_run_nanos() const { return average_run_nanos_.load(std::memory_order_relaxed); }
  void RecordRun(int64_t nanos) const {
    const int64_t old = average_run_nanos_.load(std::memory_order_relaxed);
    average_run_nanos_.store(old + (nanos - old) / 8, std::memory_order_relaxed);
  }

 private:
  mutable std::atomic<int64_t> average_run_nanos_{0};
};

// What every unary handler of a Request/Response pair shares: how its messages are made.
template <typename Request, typename Response>
class TypedUnaryHandler : public MethodHandler {
 public:
  using Messages = TypedCallMessages<Request, Response>;
  std::unique_ptr<CallMessages> NewMessages() const override {
    return std::make_unique<Messages>();
  }
  size_t messages_size() const override { return sizeof(Messages); }
  size_t messages_align() const override { return alignof(Messages); }
  CallMessages* ConstructMessages(void* storage) const override {
    auto* messages = new (storage) Messages();
    // Swapping two heap messages exchanges their fields' storage; what comes back out (the
    // new, empty fields) is freed with the pooled object.
    if (MessagePool::Kept pooled = response_pool_->Take(); pooled.message != nullptr) {
      messages->typed_response().Swap(static_cast<Response*>(pooled.message.get()));
      messages->response_storage_bytes = pooled.bytes;
    }
    return messages;
  }
  void Recycle(CallMessages* messages) const override {
    // A response still here was small (a large one left through TakeResponse), but it may
    // hold a pooled one's storage: that goes back, counted as what it held then (it is
    // recounted at its next large use). Allocation failure: the storage is freed instead.
    if (messages->response_storage_bytes < MessagePool::kMinBytes) return;
    std::unique_ptr<Response> kept(new (std::nothrow) Response());
    if (kept == nullptr) return;
    kept->Swap(&static_cast<Messages*>(messages)->typed_response());
    response_pool_->Put(std::move(kept), messages->response_storage_bytes);
  }
  std::shared_ptr<MessagePool> response_pool() const override { return response_pool_; }

 private:
  // Shared: a response's pool must outlive a transport that releases it late.
  const std::shared_ptr<MessagePool> response_pool_ = std::make_shared<MessagePool>();
};

template <typename Request, typename Response>
class SyncUnaryHandler final : public TypedUnaryHandler<Request, Response> {
 public:
  using Fn = std::function<Status(ServerContext*, const Request*, Response*)>;
  explicit SyncUnaryHandler(Fn fn) : fn_(std::move(fn)) {}
  MethodHandler::Kind kind() const override { return MethodHandler::Kind::kSync; }
  Status RunSync(ServerContext* context, const google::protobuf::MessageLite* request,
                 google::protobuf::MessageLite* response) const override {
    return fn_(context, static_cast<const Request*>(request), static_cast<Response*>(response));
  }

 private:
  Fn fn_;
};

template <typename Request, typename Response>
class CallbackUnaryHandler final : public TypedUnaryHandler<Request, Response> {
 public:
  using Fn = std::function<ServerUnaryReactor*(CallbackServerContext*, const Request*, Response*)>;
  explicit CallbackUnaryHandler(Fn fn) : fn_(std::move(fn)) {}
  MethodHandler::Kind kind() const override { return MethodHandler::Kind::kCallback; }
  ServerUnaryReactor* RunCallback(CallbackServerContext* context,
                                  const google::protobuf::MessageLite* request,
                                  google::protobuf::MessageLite* response) const override {
    return fn_(context, static_cast<const Request*>(request), static_cast<Response*>(response));
  }

 private:
  Fn fn_;
};

struct ServiceMethod {
  std::string name;  // "/package.Service/Method"
  RpcType type;
  std::unique_ptr<MethodHandler> handler;  // null: not implemented (streaming, for now)
};

}  // namespace internal

class Service {
 public:
  virtual ~Service() = default;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  const std::vector<internal::ServiceMethod>& methods() const { return methods_; }

 protected:
  Service() = default;
  void AddMethod(std::string name, internal::RpcType type,
                 std::unique_ptr<internal::MethodHandler> handler) {
    methods_.push_back({std::move(name), type, std::move(handler)});
  }

 private:
  std::vector<internal::ServiceMethod> methods_;
};

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_SERVICE_H_
