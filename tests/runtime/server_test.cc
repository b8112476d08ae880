// Tests of the server side of the runtime (server.cc, server_builder.cc, server_call.cc,
// server_context.cc) without generated code and without a Channel: services are built by hand
// from SyncUnaryHandler / CallbackUnaryHandler, and the client is a raw transport::Endpoint
// that sends hand-built request envelopes over UDP loopback and decodes the responses.
//
// Waits are on conditions with generous bounds (30 s); nothing sleeps and hopes.
#include "runtime/server.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"
#include "runtime/envelope.h"
#include "runtime/server_builder.h"
#include "runtime/server_context.h"
#include "runtime/service.h"
#include "tests/runtime/fabric_transport.h"
#include "transport/endpoint.h"

namespace homarpc {
namespace {

using google::protobuf::StringValue;
using internal::Envelope;
using internal::EnvelopeKind;

constexpr absl::Duration kBound = absl::Seconds(30);

// Waits (with `mu` held) until `cond()` or kBound; returns whether `cond()` became true.
template <typename F>
bool AwaitFor(absl::Mutex* mu, F cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  // The analysis cannot see that Await calls the condition with `mu` held.
  auto call = +[](F* f) ABSL_NO_THREAD_SAFETY_ANALYSIS { return (*f)(); };
  return mu->AwaitWithTimeout(absl::Condition(call, &cond), kBound);
}

// ---- What the handlers share with the tests ----

struct TestState {
  absl::Mutex mu;
  int started ABSL_GUARDED_BY(mu) = 0;  // handlers that block (Wait*, Later) that have begun
  bool release ABSL_GUARDED_BY(mu) = false;
  int saw_cancelled ABSL_GUARDED_BY(mu) = 0;
  bool saw_deadline ABSL_GUARDED_BY(mu) = false;
  ServerUnaryReactor* parked ABSL_GUARDED_BY(mu) = nullptr;
  StringValue* parked_response ABSL_GUARDED_BY(mu) = nullptr;
  int on_cancel ABSL_GUARDED_BY(mu) = 0;
  int on_done ABSL_GUARDED_BY(mu) = 0;
  bool on_cancel_after_done ABSL_GUARDED_BY(mu) = false;
  std::thread::id sync_thread ABSL_GUARDED_BY(mu);
  std::thread::id slow_thread ABSL_GUARDED_BY(mu);  // /test.Echo/SlowThread's last call
  std::thread::id wait_thread ABSL_GUARDED_BY(mu);  // /test.Echo/WaitRelease's last call
  std::thread::id callback_thread ABSL_GUARDED_BY(mu);
  Server* server ABSL_GUARDED_BY(mu) = nullptr;  // for Shutdown from a handler
};

// Waits until the handler sees IsCancelled() (or kBound) and records it.
void WaitUntilCancelled(TestState* state, const ServerContextBase* context) {
  {
    absl::MutexLock lock(&state->mu);
    ++state->started;
    state->saw_deadline = context->deadline() != std::chrono::system_clock::time_point::max();
  }
  // IsCancelled() has no notification to wait on; poll it, bounded.
  const absl::Time give_up = absl::Now() + kBound;
  while (!context->IsCancelled() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  if (context->IsCancelled()) {
    absl::MutexLock lock(&state->mu);
    ++state->saw_cancelled;
  }
}

class SyncEcho final : public Service {
 public:
  explicit SyncEcho(TestState* state) : state_(state) {
    Add("/test.Echo/Echo", [](ServerContext* context, const StringValue* req, StringValue* resp) {
      for (const auto& [key, value] : context->client_metadata()) {
        if (key == "x-echo") {
          context->AddInitialMetadata("x-echo", std::string(value));
          context->AddTrailingMetadata("x-trail", std::string(value) + "!");
        }
      }
      const std::string& v = req->value();
      if (v == "throw") throw std::runtime_error("boom");
      if (v == "bad-metadata") context->AddInitialMetadata("Bad Key", "x");
      if (v == "status") {
        context->AddTrailingMetadata("x-why-bin", std::string("\0\1\2", 3));
        return Status(StatusCode::NOT_FOUND, "no such thing", std::string("det\0ails", 7));
      }
      if (v.rfind("code:", 0) == 0) {  // a code outside gRPC's 17 (DO_NOT_USE, a cast)
        return Status(static_cast<StatusCode>(std::stoi(v.substr(5))), "weird",
                      std::string("de\0tails", 8));
      }
      if (v.rfind("big:", 0) == 0) {
        resp->set_value(std::string(std::stoi(v.substr(4)), 'b'));
        return Status::OK;
      }
      resp->set_value(v);
      return Status::OK;
    });
    AddMethod("/test.Echo/Stream", internal::RpcType::SERVER_STREAMING, nullptr);
    Add("/test.Echo/WaitCancel",
        [this](ServerContext* context, const StringValue*, StringValue* resp) {
          WaitUntilCancelled(state_, context);
          resp->set_value("done");
          return Status::OK;
        });
    Add("/test.Echo/WaitRelease", [this](ServerContext*, const StringValue*, StringValue* resp) {
      absl::MutexLock lock(&state_->mu);
      ++state_->started;
      state_->wait_thread = std::this_thread::get_id();
      AwaitFor(&state_->mu,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) { return state_->release; });
      resp->set_value("released");
      return Status::OK;
    });
    Add("/test.Echo/TryCancel", [](ServerContext* context, const StringValue*, StringValue* resp) {
      context->TryCancel();
      EXPECT_TRUE(context->IsCancelled());
      resp->set_value("ignored");
      return Status::OK;
    });
    Add("/test.Echo/Thread", [this](ServerContext* context, const StringValue*, StringValue* resp) {
      absl::MutexLock lock(&state_->mu);
      state_->sync_thread = std::this_thread::get_id();
      resp->set_value(context->peer());
      return Status::OK;
    });
    // Runs 2 ms (at least): far above the server's quick-handler average.
    Add("/test.Echo/SlowThread", [this](ServerContext*, const StringValue*, StringValue* resp) {
      absl::SleepFor(absl::Milliseconds(2));
      absl::MutexLock lock(&state_->mu);
      state_->slow_thread = std::this_thread::get_id();
      resp->set_value("slow");
      return Status::OK;
    });
    Add("/test.Echo/Shutdown", [this](ServerContext*, const StringValue*, StringValue* resp) {
      Server* server;
      {
        absl::MutexLock lock(&state_->mu);
        server = state_->server;
      }
      server->Shutdown();  // from a handler: must not wait for this very call
      resp->set_value("shutting down");
      return Status::OK;
    });
  }

 private:
  void Add(std::string name,
           std::function<Status(ServerContext*, const StringValue*, StringValue*)> fn) {
    AddMethod(
        std::move(name), internal::RpcType::NORMAL_RPC,
        std::make_unique<internal::SyncUnaryHandler<StringValue, StringValue>>(std::move(fn)));
  }
  TestState* state_;
};

// A reactor the test finishes from its own thread; deletes itself in OnDone.
class ParkedReactor final : public ServerUnaryReactor {
 public:
  explicit ParkedReactor(TestState* state) : state_(state) {}
  void OnCancel() override {
    absl::MutexLock lock(&state_->mu);
    ++state_->on_cancel;
  }
  void OnDone() override {
    {
      absl::MutexLock lock(&state_->mu);
      ++state_->on_done;
    }
    delete this;
  }

 private:
  TestState* state_;
};

// Finishes CANCELLED from OnCancel; deletes itself in OnDone.
class CancelReactor final : public ServerUnaryReactor {
 public:
  explicit CancelReactor(TestState* state) : state_(state) {}
  void OnCancel() override {
    {
      absl::MutexLock lock(&state_->mu);
      ++state_->on_cancel;
      if (state_->on_done > 0) state_->on_cancel_after_done = true;
    }
    Finish(Status(StatusCode::CANCELLED, "from OnCancel"));
  }
  void OnDone() override {
    {
      absl::MutexLock lock(&state_->mu);
      ++state_->on_done;
    }
    delete this;
  }

 private:
  TestState* state_;
};

// Finishes in its constructor, before the handler has returned it.
class CtorFinishReactor final : public ServerUnaryReactor {
 public:
  explicit CtorFinishReactor(TestState* state) : state_(state) { Finish(Status::OK); }
  void OnDone() override {
    {
      absl::MutexLock lock(&state_->mu);
      ++state_->on_done;
    }
    delete this;
  }

 private:
  TestState* state_;
};

class CallbackEcho final : public Service {
 public:
  explicit CallbackEcho(TestState* state) : state_(state) {
    Add("/test.Cb/Echo",
        [this](CallbackServerContext* context, const StringValue* req, StringValue* resp) {
          {
            absl::MutexLock lock(&state_->mu);
            state_->callback_thread = std::this_thread::get_id();
          }
          resp->set_value(req->value());
          ServerUnaryReactor* reactor = context->DefaultReactor();
          reactor->Finish(Status::OK);
          return reactor;
        });
    Add("/test.Cb/Later", [this](CallbackServerContext*, const StringValue*, StringValue* resp) {
      auto* reactor = new ParkedReactor(state_);
      absl::MutexLock lock(&state_->mu);
      ++state_->started;
      state_->parked = reactor;
      state_->parked_response = resp;
      return reactor;
    });
    Add("/test.Cb/WaitCancel", [this](CallbackServerContext*, const StringValue*, StringValue*) {
      auto* reactor = new CancelReactor(state_);
      absl::MutexLock lock(&state_->mu);
      ++state_->started;
      return reactor;
    });
    Add("/test.Cb/FinishInCtor",
        [this](CallbackServerContext*, const StringValue*, StringValue* resp) {
          resp->set_value("ctor");
          return new CtorFinishReactor(state_);
        });
    Add("/test.Cb/Throw",
        [](CallbackServerContext*, const StringValue*, StringValue*) -> ServerUnaryReactor* {
          throw std::runtime_error("callback boom");
        });
  }

 private:
  void Add(
      std::string name,
      std::function<ServerUnaryReactor*(CallbackServerContext*, const StringValue*, StringValue*)>
          fn) {
    AddMethod(
        std::move(name), internal::RpcType::NORMAL_RPC,
        std::make_unique<internal::CallbackUnaryHandler<StringValue, StringValue>>(std::move(fn)));
  }
  TestState* state_;
};

// ---- The raw client ----

struct RequestOptions {
  uint64_t call_id = 1;
  int64_t timeout_micros = -1;
  std::vector<std::pair<std::string, std::string>> metadata;
  EnvelopeKind kind = EnvelopeKind::kRequest;
  uint16_t flags = internal::kFlagEndOfStream;
  uint32_t stream_id = 0;
  uint32_t sequence = 0;

  RequestOptions& Flags(uint16_t f) {
    flags = f;
    return *this;
  }
  RequestOptions& Stream(uint32_t id, uint32_t seq) {
    stream_id = id;
    sequence = seq;
    return *this;
  }
  RequestOptions& Id(uint64_t id) {
    call_id = id;
    return *this;
  }
  RequestOptions& Timeout(int64_t micros) {
    timeout_micros = micros;
    return *this;
  }
  RequestOptions& Meta(std::string key, std::string value) {
    metadata.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  RequestOptions& Cancel() {
    kind = EnvelopeKind::kCancel;
    return *this;
  }
};
RequestOptions Opts() { return RequestOptions(); }

transport::Buffer EncodeRequest(std::string_view method, const std::string& payload,
                                const RequestOptions& options = {}) {
  Envelope envelope;
  envelope.kind = options.kind;
  envelope.flags = options.flags;
  envelope.stream_id = options.stream_id;
  envelope.sequence = options.sequence;
  envelope.call_id = options.call_id;
  envelope.method = method;
  envelope.timeout_micros = options.timeout_micros;
  for (const auto& [key, value] : options.metadata) envelope.metadata.emplace_back(key, value);
  const size_t header = internal::EncodedHeaderSize(envelope);
  transport::Buffer buffer(header + payload.size());
  internal::EncodeHeader(envelope, absl::MakeSpan(buffer.data(), header));
  if (!payload.empty()) std::memcpy(buffer.data() + header, payload.data(), payload.size());
  return buffer;
}

std::string Value(const std::string& v) {
  StringValue message;
  message.set_value(v);
  return message.SerializeAsString();
}

// A decoded response (or the transport's error).
struct Response {
  absl::Status transport_status;
  transport::Buffer bytes;
  Envelope envelope;

  Status status() const {
    return Status(static_cast<StatusCode>(envelope.status_code),
                  std::string(envelope.status_message), std::string(envelope.status_details));
  }
  std::string value() const {
    StringValue message;
    EXPECT_TRUE(
        message.ParseFromArray(envelope.payload.data(), static_cast<int>(envelope.payload.size())));
    return message.value();
  }
  static std::multimap<std::string, std::string> Map(
      const std::vector<internal::MetadataEntry>& entries) {
    std::multimap<std::string, std::string> out;
    for (const auto& [k, v] : entries) out.emplace(std::string(k), std::string(v));
    return out;
  }
  std::multimap<std::string, std::string> initial() const { return Map(envelope.metadata); }
  std::multimap<std::string, std::string> trailing() const {
    return Map(envelope.trailing_metadata);
  }
};

Response ToResponse(absl::StatusOr<transport::Buffer> result) {
  Response r;
  if (!result.ok()) {
    r.transport_status = result.status();
    return r;
  }
  r.bytes = std::move(*result);
  absl::StatusOr<Envelope> decoded = internal::Decode(r.bytes.span());
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (decoded.ok()) {
    r.envelope = std::move(*decoded);
    EXPECT_EQ(r.envelope.kind, EnvelopeKind::kResponse);
  }
  return r;
}

// A response that will arrive later.
class Pending {
 public:
  void Set(absl::StatusOr<transport::Buffer> result) {
    response_ = ToResponse(std::move(result));
    done_.Notify();
  }
  const Response& Wait() {
    EXPECT_TRUE(done_.WaitForNotificationWithTimeout(kBound));
    return response_;
  }
  bool done() const { return done_.HasBeenNotified(); }

 private:
  absl::Notification done_;
  Response response_;
};

class RawClient {
 public:
  RawClient() {
    auto endpoint = transport::Endpoint::Create(transport::EndpointOptions{});
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = std::move(*endpoint);
  }
  Response Call(const transport::Address& dest, transport::Buffer request) {
    return ToResponse(endpoint_->Call(dest, std::move(request)));
  }
  // The response bytes as they came, not decoded.
  absl::StatusOr<transport::Buffer> CallRaw(const transport::Address& dest,
                                            transport::Buffer request) {
    return endpoint_->Call(dest, std::move(request));
  }
  // `deadline` bounds the transport wait (for servers that may not answer).
  std::shared_ptr<Pending> Send(const transport::Address& dest, transport::Buffer request,
                                absl::Duration deadline = absl::InfiniteDuration()) {
    auto pending = std::make_shared<Pending>();
    const int64_t deadline_nanos =
        deadline == absl::InfiniteDuration()
            ? INT64_MAX
            : transport::MonotonicClock::Get()->NowNanos() + absl::ToInt64Nanoseconds(deadline);
    endpoint_->SendRequest(
        dest, std::move(request),
        [pending](absl::StatusOr<transport::Buffer> result) { pending->Set(std::move(result)); },
        deadline_nanos);
    return pending;
  }

 private:
  std::unique_ptr<transport::Endpoint> endpoint_;
};

// ---- Fixture ----

class ServerTest : public ::testing::Test {
 protected:
  // Builds and starts a server with both services on 127.0.0.1:0; `configure` adjusts the
  // builder first.
  void Start(const std::function<void(ServerBuilder&)>& configure = nullptr) {
    ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials(), &port_);
    builder.RegisterService(&sync_);
    builder.RegisterService(&callback_);
    if (configure) configure(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port_, 0);
    dest_ = transport::Address::Loopback4(static_cast<uint16_t>(port_));
    absl::MutexLock lock(&state_.mu);
    state_.server = server_.get();
  }

  Response Call(std::string_view method, const std::string& value,
                const RequestOptions& options = {}) {
    return client_.Call(dest_, EncodeRequest(method, Value(value), options));
  }

  void WaitStarted(int n) {
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(AwaitFor(&state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
      return state_.started >= n;
    }));
  }

  TestState state_;
  SyncEcho sync_{&state_};
  CallbackEcho callback_{&state_};
  RawClient client_;
  int port_ = 0;
  transport::Address dest_;
  std::unique_ptr<Server> server_;  // after the services: destroyed before them
};

// ---- Dispatch and answers ----

TEST_F(ServerTest, Server_EchoesPayloadAndMetadata) {
  Start();
  Response r =
      Call("/test.Echo/Echo", "hello", Opts().Id(42).Meta("x-echo", "meta").Meta("other", "v"));
  ASSERT_TRUE(r.transport_status.ok()) << r.transport_status;
  EXPECT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.envelope.call_id, 42u);  // echoed
  EXPECT_EQ(r.value(), "hello");
  EXPECT_EQ(r.initial(), (std::multimap<std::string, std::string>{{"x-echo", "meta"}}));
  EXPECT_EQ(r.trailing(), (std::multimap<std::string, std::string>{{"x-trail", "meta!"}}));
}

TEST_F(ServerTest, Server_CallbackEchoFinishedInHandler) {
  Start();
  Response r = Call("/test.Cb/Echo", "cb", Opts().Id(5));
  EXPECT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.envelope.call_id, 5u);
  EXPECT_EQ(r.value(), "cb");
}

TEST_F(ServerTest, Server_StatusDetailsAndTrailersDeliveredIntact) {
  Start();
  Response r = Call("/test.Echo/Echo", "status");
  EXPECT_EQ(r.status(),
            Status(StatusCode::NOT_FOUND, "no such thing", std::string("det\0ails", 7)));
  EXPECT_TRUE(r.envelope.payload.empty());
  EXPECT_EQ(r.trailing(),
            (std::multimap<std::string, std::string>{{"x-why-bin", std::string("\0\1\2", 3)}}));
}

TEST_F(ServerTest, Server_UnknownMethodIsUnimplemented) {
  Start();
  Response r = Call("/test.Echo/Nope", "x", Opts().Id(9));
  EXPECT_EQ(r.status().error_code(), StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(r.status().error_message(), "unknown method /test.Echo/Nope");
  EXPECT_EQ(r.envelope.call_id, 9u);
}

TEST_F(ServerTest, Server_StreamingMethodIsUnimplemented) {
  Start();
  Response r = Call("/test.Echo/Stream", "x");
  EXPECT_EQ(r.status(),
            Status(StatusCode::UNIMPLEMENTED, "streaming methods are not supported yet"));
}

TEST_F(ServerTest, Server_UnparsablePayloadIsInternal) {
  Start();
  Response r = client_.Call(dest_, EncodeRequest("/test.Echo/Echo", "\xff\xff\xff\xff"));
  EXPECT_EQ(r.status().error_code(), StatusCode::INTERNAL);
}

TEST_F(ServerTest, Server_UndecodableEnvelopeIsInternalAndEchoesItsCallId) {
  Start();
  // A whole header, then garbage: the call_id at bytes 12..19 is still read (PROTOCOL.md
  // 14.7), so the client can match the answer to its call.
  transport::Buffer bad = EncodeRequest("/test.Echo/Echo", Value("x"), Opts().Id(77));
  bad.data()[0] = 9;  // unsupported version
  Response r = client_.Call(dest_, std::move(bad));
  ASSERT_TRUE(r.transport_status.ok()) << r.transport_status;
  EXPECT_EQ(r.status().error_code(), StatusCode::INTERNAL);
  EXPECT_EQ(r.envelope.call_id, 77u);
  // Still serving.
  EXPECT_EQ(Call("/test.Echo/Echo", "after").value(), "after");
}

TEST_F(ServerTest, Server_MessageShorterThanAHeaderGetsAnEmptyResponse) {
  Start();
  absl::StatusOr<transport::Buffer> r = client_.CallRaw(dest_, transport::Buffer::CopyOf("tiny"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 0u);  // PROTOCOL.md 14.7: nothing to echo
  EXPECT_EQ(Call("/test.Echo/Echo", "after").value(), "after");
}

TEST_F(ServerTest, Server_StatusCodeOutsideGrpcsIsSentAsUnknown) {
  Start();
  // (StatusCode's valid range is -32..31: casting anything beyond is undefined behaviour.)
  for (const char* code : {"code:17", "code:-1", "code:31", "code:-20"}) {
    SCOPED_TRACE(code);
    Response r = Call("/test.Echo/Echo", code);  // the response must decode (checked inside)
    ASSERT_TRUE(r.transport_status.ok()) << r.transport_status;
    EXPECT_EQ(r.status(), Status(StatusCode::UNKNOWN, "weird", std::string("de\0tails", 8)));
  }
}

TEST_F(ServerTest, Server_CompressedOrStreamingRequestIsUnimplemented) {
  Start();
  Response compressed =
      Call("/test.Echo/Echo", "x",
           Opts().Id(4).Flags(internal::kFlagEndOfStream | internal::kFlagCompressed));
  EXPECT_EQ(compressed.status(), Status(StatusCode::UNIMPLEMENTED, "compression is not supported"));
  EXPECT_EQ(compressed.envelope.call_id, 4u);
  for (auto [stream, sequence] : {std::pair<uint32_t, uint32_t>{1, 0}, {0, 1}, {7, 3}}) {
    Response r = Call("/test.Echo/Echo", "x", Opts().Id(5).Stream(stream, sequence));
    EXPECT_EQ(r.status(), Status(StatusCode::UNIMPLEMENTED, "streaming is not supported yet"))
        << stream << "/" << sequence;
    EXPECT_EQ(r.envelope.call_id, 5u);
  }
  EXPECT_EQ(Call("/test.Echo/Echo", "after").value(), "after");
}

TEST_F(ServerTest, Server_ResponseKindInRequestIsInternal) {
  Start();
  Envelope envelope;
  envelope.kind = EnvelopeKind::kResponse;
  envelope.call_id = 3;
  transport::Buffer bytes(internal::EncodedHeaderSize(envelope));
  internal::EncodeHeader(envelope, absl::MakeSpan(bytes.data(), bytes.size()));
  Response r = client_.Call(dest_, std::move(bytes));
  EXPECT_EQ(r.status().error_code(), StatusCode::INTERNAL);
}

TEST_F(ServerTest, Server_RequestOverReceiveLimitIsResourceExhausted) {
  Start([](ServerBuilder& b) { b.SetMaxReceiveMessageSize(1000); });
  Response r = Call("/test.Echo/Echo", std::string(2000, 'x'));
  EXPECT_EQ(r.status().error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Call("/test.Echo/Echo", std::string(900, 'y')).status(), Status::OK);
}

TEST_F(ServerTest, Server_DefaultReceiveLimitIsFourMebibytesAsInGrpc) {
  Start();  // no limit set
  constexpr size_t kFourMiB = 4 * 1024 * 1024;
  // The limit applies to the request message (a StringValue: the string plus its tag and
  // length, a few bytes). Just over 4 MiB fails; just under passes, echoed whole.
  EXPECT_EQ(Call("/test.Echo/Echo", std::string(kFourMiB + 1, 'x')).status().error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
  Response r = Call("/test.Echo/Echo", std::string(kFourMiB - 16, 'y'));
  ASSERT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.value().size(), kFourMiB - 16);
}

TEST_F(ServerTest, Server_ReceiveLimitFromChannelArgument) {
  Start([](ServerBuilder& b) { b.AddChannelArgument(kArgMaxReceiveMessageLength, 100); });
  EXPECT_EQ(Call("/test.Echo/Echo", std::string(200, 'x')).status().error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ServerTest, Server_ResponseOverSendLimitIsResourceExhausted) {
  Start([](ServerBuilder& b) { b.SetMaxSendMessageSize(100); });
  Response r = Call("/test.Echo/Echo", "big:500");
  EXPECT_EQ(r.status().error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(r.envelope.payload.empty());
  EXPECT_EQ(Call("/test.Echo/Echo", "big:50").value(), std::string(50, 'b'));
}

TEST_F(ServerTest, Server_MetadataOverLimitIsResourceExhausted) {
  Start([](ServerBuilder& b) { b.AddChannelArgument(kArgMaxMetadataSize, 100); });
  Response r = Call("/test.Echo/Echo", "x", Opts().Meta("big", std::string(200, 'm')));
  EXPECT_EQ(r.status().error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Call("/test.Echo/Echo", "x", Opts().Meta("small", "m")).status(), Status::OK);
}

TEST_F(ServerTest, Server_MetadataLimitZeroOrNegativeAllowsNoMetadata) {
  // As the channel reads the same argument (channel.cc): 0 bytes, not "the default".
  for (int limit : {0, -1}) {
    SCOPED_TRACE(limit);
    Start([limit](ServerBuilder& b) { b.AddChannelArgument(kArgMaxMetadataSize, limit); });
    EXPECT_EQ(Call("/test.Echo/Echo", "x", Opts().Meta("k", "v")).status().error_code(),
              StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(Call("/test.Echo/Echo", "x").status(), Status::OK);
    server_.reset();
  }
}

TEST_F(ServerTest, Server_InvalidServerMetadataFailsInternal) {
  Start();
  EXPECT_EQ(Call("/test.Echo/Echo", "bad-metadata").status().error_code(), StatusCode::INTERNAL);
}

TEST_F(ServerTest, Server_HandlerThrowsIsUnknownAndServerKeepsServing) {
  Start();
  EXPECT_EQ(Call("/test.Echo/Echo", "throw").status(),
            Status(StatusCode::UNKNOWN, "handler threw: boom"));
  EXPECT_EQ(Call("/test.Cb/Throw", "x").status(),
            Status(StatusCode::UNKNOWN, "handler threw: callback boom"));
  EXPECT_EQ(Call("/test.Echo/Echo", "still here").value(), "still here");
  EXPECT_EQ(Call("/test.Cb/Echo", "cb still here").value(), "cb still here");
}

// ---- Deadlines and cancellation ----

TEST_F(ServerTest, Server_DeadlinePassingAnswersDeadlineExceededAndSetsIsCancelled) {
  Start();
  // No client-side deadline on the transport: we want to see the server's answer. The
  // handler returns OK once it sees IsCancelled(), too late: the client is answered
  // DEADLINE_EXCEEDED (by the deadline timer, or at the latest when the handler returns).
  auto pending =
      client_.Send(dest_, EncodeRequest("/test.Echo/WaitCancel", Value(""), Opts().Timeout(20000)));
  EXPECT_EQ(pending->Wait().status(), Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(&state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
    return state_.saw_cancelled == 1;
  }));
  EXPECT_TRUE(state_.saw_deadline);
}

TEST_F(ServerTest, Server_DeadlineAnswersAHandlerThatNeverReturnsInTime) {
  Start();
  // The handler blocks until released, without looking at IsCancelled(): only a timer can
  // answer the client before it returns.
  auto pending = client_.Send(
      dest_, EncodeRequest("/test.Echo/WaitRelease", Value(""), Opts().Timeout(20000)));
  WaitStarted(1);
  EXPECT_EQ(pending->Wait().status(), Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
  {
    absl::MutexLock lock(&state_.mu);
    state_.release = true;
  }
  EXPECT_EQ(Call("/test.Echo/Echo", "next").value(), "next");
}

TEST_F(ServerTest, Server_DeadlineRunsTheReactorsOnCancelOnceThenOnDone) {
  Start();
  // CancelReactor finishes only from OnCancel, so the call ends only if the deadline runs it.
  auto pending = client_.Send(
      dest_, EncodeRequest("/test.Cb/WaitCancel", Value(""), Opts().Id(3).Timeout(20000)));
  const Response& r = pending->Wait();
  EXPECT_EQ(r.status(), Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
  EXPECT_EQ(r.envelope.call_id, 3u);
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(
      &state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) { return state_.on_done == 1; }));
  EXPECT_EQ(state_.on_cancel, 1);
  EXPECT_FALSE(state_.on_cancel_after_done);
}

TEST_F(ServerTest, Server_ManyDeadlinesInAnyOrderAllFire) {
  Start();
  // Deadlines pushed later than the earliest, earlier, and equal, on parked callback calls:
  // every one is answered DEADLINE_EXCEEDED and gets OnCancel.
  std::vector<std::shared_ptr<Pending>> pending;
  const int64_t timeouts_us[] = {80000, 20000, 50000, 20000, 5000, 120000, 60000, 1000};
  uint64_t id = 100;
  for (int64_t t : timeouts_us) {
    pending.push_back(client_.Send(
        dest_, EncodeRequest("/test.Cb/WaitCancel", Value(""), Opts().Id(++id).Timeout(t))));
  }
  for (auto& p : pending) {
    EXPECT_EQ(p->Wait().status().error_code(), StatusCode::DEADLINE_EXCEEDED);
  }
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(&state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
    return state_.on_done == static_cast<int>(std::size(timeouts_us));
  }));
  EXPECT_EQ(state_.on_cancel, static_cast<int>(std::size(timeouts_us)));
}

TEST_F(ServerTest, Server_CallsFinishedBeforeTheirDeadlineAreUnaffected) {
  Start();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(Call(i % 2 ? "/test.Echo/Echo" : "/test.Cb/Echo", "in time",
                   Opts().Id(i + 1).Timeout(30'000'000))
                  .value(),
              "in time");
  }
}

TEST_F(ServerTest, Server_ClientCancelAnswersCancelledAndSetsIsCancelled) {
  Start();
  auto pending =
      client_.Send(dest_, EncodeRequest("/test.Echo/WaitCancel", Value(""), Opts().Id(7)));
  WaitStarted(1);
  Response ack = client_.Call(dest_, EncodeRequest("", "", Opts().Id(7).Cancel()));
  EXPECT_EQ(ack.status(), Status::OK);
  EXPECT_EQ(ack.envelope.call_id, 7u);
  EXPECT_EQ(pending->Wait().status(), Status(StatusCode::CANCELLED, "cancelled by the client"));
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(&state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) {
    return state_.saw_cancelled == 1;
  }));
}

TEST_F(ServerTest, Server_ClientCancelRunsOnCancelThenOnDone) {
  Start();
  auto pending =
      client_.Send(dest_, EncodeRequest("/test.Cb/WaitCancel", Value(""), Opts().Id(11)));
  WaitStarted(1);
  client_.Call(dest_, EncodeRequest("", "", Opts().Id(11).Cancel()));
  EXPECT_EQ(pending->Wait().status(), Status(StatusCode::CANCELLED, "cancelled by the client"));
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(
      &state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) { return state_.on_done == 1; }));
  EXPECT_EQ(state_.on_cancel, 1);
  EXPECT_FALSE(state_.on_cancel_after_done);
}

TEST_F(ServerTest, Server_CancelForUnknownCallIsAnsweredOk) {
  Start();
  Response ack = client_.Call(dest_, EncodeRequest("", "", Opts().Id(99).Cancel()));
  EXPECT_EQ(ack.status(), Status::OK);
}

TEST_F(ServerTest, Server_TryCancelFromHandlerAnswersCancelled) {
  Start();
  EXPECT_EQ(Call("/test.Echo/TryCancel", "x").status(),
            Status(StatusCode::CANCELLED, "cancelled by the server"));
  EXPECT_EQ(Call("/test.Echo/Echo", "next").value(), "next");
}

// ---- Callback reactors ----

TEST_F(ServerTest, Server_ReactorFinishedLaterFromAnotherThread) {
  Start();
  auto pending = client_.Send(dest_, EncodeRequest("/test.Cb/Later", Value("")));
  WaitStarted(1);
  std::thread finisher([this] {
    ServerUnaryReactor* reactor;
    {
      absl::MutexLock lock(&state_.mu);
      reactor = state_.parked;
      state_.parked_response->set_value("finished elsewhere");
    }
    reactor->Finish(Status::OK);
  });
  finisher.join();
  const Response& r = pending->Wait();
  EXPECT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.value(), "finished elsewhere");
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.on_done, 1);  // ran inside Finish, after the reply was handed over
  EXPECT_EQ(state_.on_cancel, 0);
}

TEST_F(ServerTest, Server_ReactorFinishedInItsConstructor) {
  Start();
  Response r = Call("/test.Cb/FinishInCtor", "x");
  EXPECT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.value(), "ctor");
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(AwaitFor(
      &state_.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu) { return state_.on_done == 1; }));
}

// ---- Shutdown ----

TEST_F(ServerTest, Server_ShutdownLetsCallsInFlightFinishAndRefusesNewOnes) {
  Start();
  auto in_flight = client_.Send(dest_, EncodeRequest("/test.Echo/WaitRelease", Value("")));
  WaitStarted(1);
  std::atomic<bool> shutdown_returned{false};
  std::thread shutdown([&] {
    server_->Shutdown();
    shutdown_returned = true;
  });
  // Until the shutdown begins calls succeed; afterwards they are refused.
  Response refused;
  const absl::Time give_up = absl::Now() + kBound;
  do {
    refused = Call("/test.Echo/Echo", "new");
  } while (refused.status().ok() && absl::Now() < give_up);
  EXPECT_EQ(refused.status(), Status(StatusCode::UNAVAILABLE, "server shutting down"));
  EXPECT_FALSE(shutdown_returned);  // the call in flight holds it
  EXPECT_FALSE(in_flight->done());
  {
    absl::MutexLock lock(&state_.mu);
    state_.release = true;
  }
  EXPECT_EQ(in_flight->Wait().value(), "released");
  shutdown.join();
  server_->Wait();  // already shut down: returns at once
}

TEST_F(ServerTest, Server_ShutdownDeadlineCancelsCallsInFlight) {
  Start();
  auto sync_call = client_.Send(dest_, EncodeRequest("/test.Echo/WaitCancel", Value("")));
  auto callback_call = client_.Send(dest_, EncodeRequest("/test.Cb/WaitCancel", Value("")));
  WaitStarted(2);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
  // Shutdown returned: both handlers have finished.
  EXPECT_EQ(sync_call->Wait().status(), Status(StatusCode::CANCELLED, "server shutting down"));
  EXPECT_EQ(callback_call->Wait().status(), Status(StatusCode::CANCELLED, "server shutting down"));
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.saw_cancelled, 1);
    EXPECT_EQ(state_.on_cancel, 1);
    EXPECT_EQ(state_.on_done, 1);
  }
  // Nothing listens any more: the call fails in the transport.
  auto late =
      client_.Send(dest_, EncodeRequest("/test.Echo/Echo", Value("late")), absl::Milliseconds(300));
  EXPECT_FALSE(late->Wait().transport_status.ok());
}

TEST_F(ServerTest, Server_ShutdownFromHandlerDoesNotDeadlock) {
  Start();
  Response r = Call("/test.Echo/Shutdown", "x");
  EXPECT_EQ(r.value(), "shutting down");
  server_->Wait();  // the asynchronous shutdown completes
}

TEST_F(ServerTest, Server_DestructorShutsDown) {
  Start();
  EXPECT_EQ(Call("/test.Echo/Echo", "x").value(), "x");
  server_.reset();
  auto late =
      client_.Send(dest_, EncodeRequest("/test.Echo/Echo", Value("late")), absl::Milliseconds(300));
  EXPECT_FALSE(late->Wait().transport_status.ok());
}

// ---- Admission ----

TEST_F(ServerTest, Server_MaxConcurrentCallsAnswersResourceExhaustedBeyondIt) {
  Start([](ServerBuilder& b) { b.SetMaxConcurrentCalls(1); });
  auto held = client_.Send(dest_, EncodeRequest("/test.Echo/WaitRelease", Value("")));
  WaitStarted(1);
  EXPECT_EQ(Call("/test.Echo/Echo", "one too many").status(),
            Status(StatusCode::RESOURCE_EXHAUSTED, "server overloaded"));
  EXPECT_EQ(Call("/test.Cb/Echo", "one too many").status(),
            Status(StatusCode::RESOURCE_EXHAUSTED, "server overloaded"));
  {
    absl::MutexLock lock(&state_.mu);
    state_.release = true;
  }
  EXPECT_EQ(held->Wait().value(), "released");
  // The held call has left: room again (its slot frees once it is fully finished).
  Response r;
  const absl::Time give_up = absl::Now() + kBound;
  do {
    r = Call("/test.Echo/Echo", "room");
  } while (!r.status().ok() && absl::Now() < give_up);
  EXPECT_EQ(r.value(), "room");
}

TEST_F(ServerTest, Server_MaxConcurrentCallsFromChannelArgument) {
  Start([](ServerBuilder& b) { b.AddChannelArgument(kArgMaxConcurrentCalls, 1); });
  auto held = client_.Send(dest_, EncodeRequest("/test.Echo/WaitRelease", Value("")));
  WaitStarted(1);
  EXPECT_EQ(Call("/test.Echo/Echo", "x").status().error_code(), StatusCode::RESOURCE_EXHAUSTED);
  absl::MutexLock lock(&state_.mu);
  state_.release = true;
}

// ---- Transports ----

// Forwards to a fabric transport and records, in order, when it is stopped and destroyed and
// whether a request reached the server after Stop() returned.
class RecordingTransport final : public internal::MessageTransport {
 public:
  struct Log {
    absl::Mutex mu;
    std::vector<std::string> events ABSL_GUARDED_BY(mu);
    void Add(std::string e) {
      absl::MutexLock lock(&mu);
      events.push_back(std::move(e));
    }
  };
  RecordingTransport(std::unique_ptr<internal::MessageTransport> inner,
                     std::shared_ptr<std::atomic<bool>> stopped, Log* log)
      : inner_(std::move(inner)), stopped_(std::move(stopped)), log_(log) {}
  ~RecordingTransport() override { log_->Add("destroy"); }
  transport::Address local_address() const override { return inner_->local_address(); }
  uint64_t SendRequest(const transport::Address& dest, transport::MessageBytes request,
                       ResponseCallback done, int64_t deadline_nanos) override {
    return inner_->SendRequest(dest, std::move(request), std::move(done), deadline_nanos);
  }
  void Abort(uint64_t id, absl::Status status) override { inner_->Abort(id, std::move(status)); }
  void Reply(const transport::IncomingRequest& request, transport::MessageBytes response) override {
    inner_->Reply(request, std::move(response));
  }
  int64_t spin_nanos() const override { return inner_->spin_nanos(); }
  uint64_t live_server_rpcs() const override { return inner_->live_server_rpcs(); }
  void Stop() override {
    inner_->Stop();
    stopped_->store(true);
    log_->Add("stop");
  }

 private:
  std::unique_ptr<internal::MessageTransport> inner_;
  std::shared_ptr<std::atomic<bool>> stopped_;
  Log* log_;
};

TEST(ServerTransportTest, Server_StopsItsTransportsBeforeDestroyingThem) {
  testing::FabricNetwork net;
  RecordingTransport::Log log;
  TestState state;
  SyncEcho service(&state);
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials());
  builder.RegisterService(&service);
  builder.SetTransportFactoryForTesting(
      [&](const internal::UdpTransportOptions& options,
          internal::MessageTransport::RequestHandler handler)
          -> absl::StatusOr<std::unique_ptr<internal::MessageTransport>> {
        auto stopped = std::make_shared<std::atomic<bool>>(false);
        // Requests reaching the server once Stop() has returned would be a use of a
        // transport the server is tearing down.
        auto inner = net.factory()(
            options, [&log, stopped, handler = std::move(handler)](transport::IncomingRequest r) {
              if (stopped->load()) log.Add("request after stop");
              handler(std::move(r));
            });
        if (!inner.ok()) return inner.status();
        return std::unique_ptr<internal::MessageTransport>(
            new RecordingTransport(std::move(*inner), stopped, &log));
      });
  std::unique_ptr<Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  server->Shutdown();
  server.reset();
  absl::MutexLock lock(&log.mu);
  EXPECT_EQ(log.events, (std::vector<std::string>{"stop", "destroy"}));
}

// ---- Builder ----

TEST_F(ServerTest, Server_PortZeroReportsSelectedPort) {
  Start();
  EXPECT_GT(port_, 0);
  EXPECT_EQ(server_->listening_addresses(),
            std::vector<std::string>{"ipv4:127.0.0.1:" + std::to_string(port_)});
}

TEST_F(ServerTest, Server_PeerIsTheClientsAddress) {
  Start();
  const std::string peer = Call("/test.Echo/Thread", "x").value();
  EXPECT_EQ(peer.rfind("ipv4:127.0.0.1:", 0), 0u) << peer;
}

TEST(ServerBuilderTest, ServerBuilder_ServesIpv6) {
  TestState state;
  SyncEcho service(&state);
  int port = 0;
  ServerBuilder builder;
  builder.AddListeningPort("[::1]:0", InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<Server> server = builder.BuildAndStart();
  if (server == nullptr) GTEST_SKIP() << "cannot bind [::1] here (no IPv6 loopback)";
  EXPECT_EQ(server->listening_addresses(),
            std::vector<std::string>{"ipv6:[::1]:" + std::to_string(port)});
  transport::EndpointOptions options;
  options.io.bind_address = transport::Address::Loopback6(0);
  auto endpoint = transport::Endpoint::Create(options);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  Response r = ToResponse((*endpoint)->Call(transport::Address::Loopback6(port),
                                            EncodeRequest("/test.Echo/Echo", Value("six"))));
  EXPECT_EQ(r.status(), Status::OK);
  EXPECT_EQ(r.value(), "six");
}

TEST(ServerBuilderTest, ServerBuilder_DuplicateServiceFails) {
  TestState state;
  SyncEcho service(&state);
  int port = -1;
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.RegisterService(&service);
  EXPECT_EQ(builder.BuildAndStart(), nullptr);
  EXPECT_EQ(port, 0);
}

TEST(ServerBuilderTest, ServerBuilder_BadAddressFails) {
  TestState state;
  SyncEcho service(&state);
  int port = -1;
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials());
  builder.AddListeningPort("ipv4:not-an-address:5", InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  EXPECT_EQ(builder.BuildAndStart(), nullptr);
  EXPECT_EQ(port, 0);
}

TEST(ServerBuilderTest, ServerBuilder_BadIoBackendFails) {
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials());
  builder.AddChannelArgument(kArgIoBackend, "carrier-pigeon");
  EXPECT_EQ(builder.BuildAndStart(), nullptr);
}

TEST(ServerBuilderTest, ServerBuilder_LoopTakeoverBelowAHundredMicrosecondsFails) {
  for (int bad : {99, 0, -5}) {
    ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials());
    builder.AddChannelArgument(kArgLoopTakeoverMicros, bad);
    EXPECT_EQ(builder.BuildAndStart(), nullptr) << bad;
  }
}

TEST_F(ServerTest, Server_MultiLoopServesManyClients) {
  Start([](ServerBuilder& b) { b.SetNumLoops(3); });
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(std::make_unique<RawClient>());
  std::vector<std::shared_ptr<Pending>> pending;
  for (int round = 0; round < 10; ++round) {
    for (size_t c = 0; c < clients.size(); ++c) {
      const bool sync = (round + c) % 2 == 0;
      pending.push_back(
          clients[c]->Send(dest_, EncodeRequest(sync ? "/test.Echo/Echo" : "/test.Cb/Echo",
                                                Value(std::to_string(round * 100 + c)),
                                                Opts().Id(static_cast<uint64_t>(round + 1)))));
    }
  }
  size_t i = 0;
  for (int round = 0; round < 10; ++round) {
    for (size_t c = 0; c < clients.size(); ++c, ++i) {
      const Response& r = pending[i]->Wait();
      EXPECT_EQ(r.status(), Status::OK);
      EXPECT_EQ(r.value(), std::to_string(round * 100 + c));
    }
  }
}

TEST_F(ServerTest, Server_InlineExecutorRunsSyncHandlersOnTheLoop) {
  Start([](ServerBuilder& b) { b.SetExecutor(ServerExecutor::kInline); });
  EXPECT_EQ(Call("/test.Echo/Echo", "inline").value(), "inline");
  Call("/test.Echo/Thread", "x");
  Call("/test.Cb/Echo", "x");  // callback handlers run on the (one) loop thread
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.sync_thread, state_.callback_thread);
}

TEST_F(ServerTest, Server_WorkerPoolOnlyRunsSyncHandlersOffTheLoop) {
  Start([](ServerBuilder& b) { b.SetExecutor(ServerExecutor::kWorkerPoolOnly, 2); });
  Call("/test.Echo/Thread", "x");
  Call("/test.Cb/Echo", "x");
  absl::MutexLock lock(&state_.mu);
  EXPECT_NE(state_.sync_thread, state_.callback_thread);
}

// The default executor runs a quick method's handler on the loop thread that read the request
// (after its round), and a method whose handlers run long on the workers.
TEST_F(ServerTest, Server_WorkerPoolRunsQuickHandlersOnTheLoopAndSlowOnesOnWorkers) {
  Start([](ServerBuilder& b) {
    b.SetExecutor(ServerExecutor::kWorkerPool, 2);
    // No takeover, whatever a loaded machine does to the loop thread: it stays the one thread.
    b.AddChannelArgument(kArgLoopTakeoverMicros, 100'000'000);
  });
  Call("/test.Cb/Echo", "x");  // callback handlers run on the loop thread
  EXPECT_EQ(Call("/test.Echo/Thread", "x").status(), Status::OK);
  std::thread::id loop_thread;
  {
    absl::MutexLock lock(&state_.mu);
    loop_thread = state_.callback_thread;
    EXPECT_EQ(state_.sync_thread, loop_thread);
  }
  // A method's first call counts as quick; once it has run 2 ms, its calls go to a worker.
  EXPECT_EQ(Call("/test.Echo/SlowThread", "x").value(), "slow");
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.slow_thread, loop_thread);
  }
  EXPECT_EQ(Call("/test.Echo/SlowThread", "x").value(), "slow");
  absl::MutexLock lock(&state_.mu);
  EXPECT_NE(state_.slow_thread, loop_thread);
  // (Whether /test.Echo/Thread stays on the loop depends on how long its calls took: on a
  // loaded machine one descheduled call can make it look slow for a while.)
}

// A server told to use io_uring keeps its loop on one thread (a ring has one issuer), so no
// handler runs on it: whether by channel argument or by HOMARPC_IO_BACKEND.
TEST_F(ServerTest, Server_WorkerPoolOnIoUringRunsSyncHandlersOffTheLoop) {
  Start([](ServerBuilder& b) {
    b.SetExecutor(ServerExecutor::kWorkerPool, 2);
    b.AddChannelArgument(kArgIoBackend, "uring");
  });
  Call("/test.Cb/Echo", "x");
  Call("/test.Echo/Thread", "x");
  absl::MutexLock lock(&state_.mu);
  EXPECT_NE(state_.sync_thread, state_.callback_thread);
}

TEST(ServerBuilderTest, ServerBuilder_IoUringFromTheEnvironmentKeepsHandlersOffTheLoop) {
  const char* saved = std::getenv("HOMARPC_IO_BACKEND");
  const std::string restore = saved != nullptr ? saved : "";
  ASSERT_EQ(setenv("HOMARPC_IO_BACKEND", "uring", 1), 0);
  TestState state;
  SyncEcho sync(&state);
  CallbackEcho callback(&state);
  int port = 0;
  ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", InsecureServerCredentials(), &port);
  builder.RegisterService(&sync);
  builder.RegisterService(&callback);
  std::unique_ptr<Server> server = builder.BuildAndStart();
  if (saved != nullptr) {
    setenv("HOMARPC_IO_BACKEND", restore.c_str(), 1);
  } else {
    unsetenv("HOMARPC_IO_BACKEND");
  }
  ASSERT_NE(server, nullptr);
  RawClient client;
  const transport::Address dest = transport::Address::Loopback4(static_cast<uint16_t>(port));
  EXPECT_EQ(client.Call(dest, EncodeRequest("/test.Cb/Echo", Value("x"))).status(), Status::OK);
  EXPECT_EQ(client.Call(dest, EncodeRequest("/test.Echo/Thread", Value("x"))).status(),
            Status::OK);
  absl::MutexLock lock(&state.mu);
  EXPECT_NE(state.sync_thread, state.callback_thread);
}

// A quick handler's large response is serialized on a worker, not on the loop's thread.
TEST_F(ServerTest, Server_WorkerPoolLargeResponseOfAQuickHandlerArrivesWhole) {
  Start([](ServerBuilder& b) { b.SetExecutor(ServerExecutor::kWorkerPool, 2); });
  for (int i = 0; i < 3; ++i) {
    Response r = Call("/test.Echo/Echo", "big:600000");
    ASSERT_EQ(r.status(), Status::OK);
    EXPECT_EQ(r.value(), std::string(600000, 'b'));
  }
  EXPECT_EQ(Call("/test.Echo/Echo", "small").value(), "small");
}

// A handler on the loop thread that blocks (here until a later call releases it) does not
// stall the server: the loop's standby takes the socket over and serves the next calls.
TEST_F(ServerTest, Server_WorkerPoolHandlerBlockingOnTheLoopIsTakenOver) {
  Start([](ServerBuilder& b) { b.SetExecutor(ServerExecutor::kWorkerPool, 2); });
  Call("/test.Cb/Echo", "x");
  auto blocked = client_.Send(dest_, EncodeRequest("/test.Echo/WaitRelease", Value("")));
  WaitStarted(1);
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.wait_thread, state_.callback_thread);  // it runs on the loop thread
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Call("/test.Echo/Echo", "next").value(), "next");
  EXPECT_FALSE(blocked->done());
  {
    absl::MutexLock lock(&state_.mu);
    state_.release = true;
  }
  EXPECT_EQ(blocked->Wait().value(), "released");
  EXPECT_EQ(Call("/test.Echo/Echo", "after").value(), "after");
}

}  // namespace
}  // namespace homarpc
