// How many heap allocations the server makes per unary call on its dispatch path (server.cc,
// server_call.cc): one for the call with its request and response objects, one for the
// response message, nothing else (no copy of the method name, no separate messages object,
// no default reactor on the heap). A binary of its own because it replaces the global
// operator new to count the allocations of the calling thread.
//
// The server runs on a fake transport that hands its RequestHandler to the test, with the
// inline executor, so a whole call -- decode, dispatch, handler, encode, Reply -- runs on the
// test thread inside one handler() call, and only what the server itself allocates is
// counted (requests are built before counting starts).
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"
#include "runtime/envelope.h"
#include "runtime/message_transport.h"
#include "runtime/server.h"
#include "runtime/server_builder.h"
#include "runtime/service.h"

namespace {

thread_local bool tls_counting = false;
thread_local long tls_allocations = 0;

void* Count(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  if (tls_counting) ++tls_allocations;
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return Count(std::malloc(n == 0 ? 1 : n)); }
void* operator new[](std::size_t n) { return Count(std::malloc(n == 0 ? 1 : n)); }
void* operator new(std::size_t n, std::align_val_t a) {
  return Count(std::aligned_alloc(static_cast<std::size_t>(a),
                                  (n + static_cast<std::size_t>(a) - 1) /
                                      static_cast<std::size_t>(a) * static_cast<std::size_t>(a)));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace homarpc {
namespace {

using google::protobuf::StringValue;

// Longer than the standard library's small-string buffer, as real method names are.
constexpr char kSyncMethod[] = "/homarpc.test.AllocationCounting/SyncEcho";
constexpr char kCallbackMethod[] = "/homarpc.test.AllocationCounting/CallbackEcho";

class EchoService final : public Service {
 public:
  EchoService() {
    AddMethod(kSyncMethod, internal::RpcType::NORMAL_RPC,
              std::make_unique<internal::SyncUnaryHandler<StringValue, StringValue>>(
                  [](ServerContext*, const StringValue*, StringValue*) { return Status::OK; }));
    AddMethod(kCallbackMethod, internal::RpcType::NORMAL_RPC,
              std::make_unique<internal::CallbackUnaryHandler<StringValue, StringValue>>(
                  [](CallbackServerContext* context, const StringValue*, StringValue*) {
                    ServerUnaryReactor* reactor = context->DefaultReactor();
                    reactor->Finish(Status::OK);
                    return reactor;
                  }));
  }
};

// Hands requests to the server on the caller's thread and keeps the last reply.
class FakeTransport final : public internal::MessageTransport {
 public:
  transport::Address local_address() const override {
    return transport::Address::Parse("10.0.0.1:7").value();
  }
  uint64_t SendRequest(const transport::Address&, transport::MessageBytes, ResponseCallback done,
                       int64_t) override {
    done(absl::UnimplementedError("fake"));
    return 0;
  }
  void Abort(uint64_t, absl::Status) override {}
  void Reply(const transport::IncomingRequest&, transport::MessageBytes response) override {
    ++replies;
    last = std::move(response);
  }
  int64_t spin_nanos() const override { return 0; }
  uint64_t live_server_rpcs() const override { return 0; }
  void Stop() override {}

  int replies = 0;
  transport::MessageBytes last;
};

transport::Buffer Request(const char* method, uint64_t call_id) {
  internal::Envelope envelope;
  envelope.call_id = call_id;
  envelope.method = method;
  transport::Buffer buffer(internal::EncodedHeaderSize(envelope));  // empty payload
  internal::EncodeHeader(envelope, absl::MakeSpan(buffer.data(), buffer.size()));
  return buffer;
}

TEST(ServerAllocTest, ServerAlloc_TwoAllocationsPerCall) {
  EchoService service;
  FakeTransport* fake = nullptr;
  internal::MessageTransport::RequestHandler deliver;
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials());
  builder.RegisterService(&service);
  builder.SetExecutor(ServerExecutor::kInline);
  builder.SetTransportFactoryForTesting(
      [&](const internal::UdpTransportOptions&, internal::MessageTransport::RequestHandler h)
          -> absl::StatusOr<std::unique_ptr<internal::MessageTransport>> {
        auto t = std::make_unique<FakeTransport>();
        fake = t.get();
        deliver = std::move(h);
        return std::unique_ptr<internal::MessageTransport>(std::move(t));
      });
  std::unique_ptr<Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(fake, nullptr);
  const transport::Address peer = transport::Address::Parse("10.0.0.2:9").value();

  for (const char* method : {kSyncMethod, kCallbackMethod}) {
    SCOPED_TRACE(method);
    constexpr int kWarmUp = 64;
    constexpr int kCalls = 1000;
    std::vector<transport::IncomingRequest> requests(kWarmUp + kCalls);
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].peer = peer;
      requests[i].payload = Request(method, i + 1);
    }
    const int replies_before = fake->replies;
    for (int i = 0; i < kWarmUp; ++i) deliver(std::move(requests[i]));
    tls_allocations = 0;
    tls_counting = true;
    for (int i = kWarmUp; i < kWarmUp + kCalls; ++i) deliver(std::move(requests[i]));
    tls_counting = false;
    ASSERT_EQ(fake->replies - replies_before, kWarmUp + kCalls);  // all answered inline
    const transport::Buffer reply = fake->last.Flatten();
    auto decoded = internal::Decode(reply.span());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->status_code, 0u);
    // The call (with its messages) and the response buffer; a little room for the registry's
    // hash table, which may rehash now and then.
    EXPECT_LE(tls_allocations, 2 * kCalls + 4);
    EXPECT_GE(tls_allocations, 2 * kCalls);  // the counter counts
  }
  server->Shutdown();
}

}  // namespace
}  // namespace homarpc
