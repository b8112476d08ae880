// End-to-end semantics of unary calls (issue 3's table), each case through the blocking and
// the callback stub against a sync Service and a CallbackService, on every wire (e2e_env.h):
// message sizes, UNIMPLEMENTED for unknown services and methods, INTERNAL for bytes that do
// not parse, statuses with message, details and metadata delivered intact, UNKNOWN for a
// handler that throws, metadata rules and limits, message size limits, peer strings. IPv6 has
// a suite of its own at the end.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/runtime/e2e/e2e_env.h"

namespace homarpc::e2e {
namespace {

constexpr char kEchoMethod[] = "/homarpc.e2e.EchoService/Echo";

std::string AllByteValues() {
  std::string s(256, '\0');
  for (int i = 0; i < 256; ++i) s[i] = static_cast<char>(i);
  return s;
}

// The values of `key` in a metadata multimap, in order.
std::vector<std::string> Values(const std::multimap<string_ref, string_ref>& md,
                                const std::string& key) {
  std::vector<std::string> out;
  auto [begin, end] = md.equal_range(key);
  for (auto it = begin; it != end; ++it) out.emplace_back(it->second);
  return out;
}

void AddEntry(google::protobuf::RepeatedPtrField<Entry>* entries, const std::string& key,
              const std::string& value) {
  Entry* e = entries->Add();
  e->set_key(key);
  e->set_value(value);
}

class Semantics : public E2eTest {
 protected:
  // A plain call on `stub` that must succeed: the server is still serving.
  void ExpectServing(EchoService::Stub* stub) {
    ClientContext context;
    EchoRequest request;
    request.set_payload("still serving");
    EchoResponse response;
    Status s = stub->Echo(&context, request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(response.payload(), "still serving");
  }
};

INSTANTIATE_TEST_SUITE_P(Wires, Semantics, ::testing::ValuesIn(Ipv4Envs()), EnvName);

TEST_P(Semantics, MessagesOfEverySizeArriveByteExact) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      uint64_t id = 0;
      for (size_t size : {size_t{0}, size_t{1}, size_t{1400}, size_t{5000}, size_t{1} << 20}) {
        ClientContext context;
        EchoRequest request;
        request.set_payload(Pattern(size, size));
        request.set_call_id(++id);
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        ASSERT_TRUE(s.ok()) << "size " << size << ": " << Describe(s);
        EXPECT_TRUE(response.payload() == request.payload()) << "size " << size;
        EXPECT_EQ(response.call_id(), id);
        EXPECT_EQ(response.method(), kEchoMethod);
      }
      {  // A request that serializes to 0 bytes, and a 0-byte response.
        ClientContext context;
        EchoRequest empty;
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, empty, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_TRUE(response.payload().empty());
        ClientContext context2;
        EchoRequest request;
        request.set_empty_response(true);
        response.set_payload("stale");
        s = Call(api, stub.get(), &context2, request, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_EQ(response.ByteSizeLong(), 0u);
      }
      {  // A 1 MiB response to a small request.
        ClientContext context;
        EchoRequest request;
        request.set_response_bytes(1 << 20);
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_EQ(response.payload(), std::string(1 << 20, 'r'));
      }
    }
  }
}

TEST_P(Semantics, UnknownServiceOrMethodIsUnimplemented) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    std::shared_ptr<Channel> channel = NewChannel(TargetOf(server));
    auto unregistered = UnregisteredService::NewStub(channel);
    auto stub = EchoService::NewStub(channel);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      {  // A service the server does not have.
        ClientContext context;
        EchoRequest request;
        EchoResponse response;
        Status s = api == Api::kBlocking
                       ? unregistered->Echo(&context, request, &response)
                       : CallMethod(api, channel.get(), "/homarpc.e2e.UnregisteredService/Echo",
                                    &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::UNIMPLEMENTED) << Describe(s);
      }
      if (api == Api::kCallback) {  // ... through the generated callback stub too
        ClientContext context;
        EchoRequest request;
        EchoResponse response;
        absl::Notification done;
        Status s;
        unregistered->async()->Echo(&context, &request, &response, [&](Status status) {
          s = std::move(status);
          done.Notify();
        });
        ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGuard));
        EXPECT_EQ(s.error_code(), StatusCode::UNIMPLEMENTED) << Describe(s);
      }
      // A method the service does not have, and one with no handler (streaming).
      for (const char* method :
           {"/homarpc.e2e.EchoService/NoSuchMethod", "/homarpc.e2e.EchoService/EchoStream",
            "/no.Such/Thing", "not even a method name"}) {
        ClientContext context;
        EchoRequest request;
        EchoResponse response;
        Status s = CallMethod(api, channel.get(), method, &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::UNIMPLEMENTED) << method << ": " << Describe(s);
      }
      ExpectServing(stub.get());
    }
  }
}

TEST_P(Semantics, UnoverriddenCallbackMethodIsUnimplemented) {
  // A generated service whose method the application did not override answers UNIMPLEMENTED,
  // sync (Status default) and callback (DefaultReactor finished by the generated default).
  // Function-local statics: a service must outlive the fixture's servers.
  static UnregisteredService::Service* const sync_default = new UnregisteredService::Service();
  static UnregisteredService::CallbackService* const callback_default =
      new UnregisteredService::CallbackService();
  for (Service* service : {static_cast<Service*>(sync_default),
                           static_cast<Service*>(callback_default)}) {
    Server* server =
        StartServer(ServerKind::kSync, [service](ServerBuilder& b) { b.RegisterService(service); });
    ASSERT_NE(server, nullptr);
    auto stub = UnregisteredService::NewStub(NewChannel(TargetOf(server)));
    ClientContext context;
    EchoRequest request;
    EchoResponse response;
    Status s = stub->Echo(&context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::UNIMPLEMENTED) << Describe(s);
  }
}

TEST_P(Semantics, BytesThatDoNotParseAsTheRequestTypeAreInternal) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    std::shared_ptr<Channel> channel = NewChannel(TargetOf(server));
    auto stub = EchoService::NewStub(channel);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      // Field 20 is an Entry in EchoRequest; these bytes are a varint that never ends.
      WireIncompatibleRequest bad;
      const std::string tag = NewTag("unparsable");
      bad.set_tag(tag);
      bad.set_probe(std::string(12, '\xff'));
      ClientContext context;
      EchoResponse response;
      Status s = CallMethod(api, channel.get(), kEchoMethod, &context, bad, &response);
      EXPECT_EQ(s.error_code(), StatusCode::INTERNAL) << Describe(s);
      ExpectServing(stub.get());
      EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the handler ran on bytes that do not parse";
    }
  }
}

TEST_P(Semantics, HandlerStatusMessageDetailsAndMetadataArriveIntact) {
  const std::string details = AllByteValues() + std::string("\0details\0", 9);
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      for (int code = 0; code <= 16; ++code) {
        SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api), ", code ", code));
        const std::string message =
            code == 0 ? "" : absl::StrCat("message for ", code, ": ünïcødé, 100% \"quoted\"\t.");
        ClientContext context;
        EchoRequest request;
        request.set_payload("payload");
        request.set_status_code(code);
        request.set_status_message(message);
        if (code != 0) request.set_status_details(details);
        AddEntry(request.mutable_initial_metadata(), "x-initial", "initial value");
        AddEntry(request.mutable_initial_metadata(), "x-initial-bin", AllByteValues());
        AddEntry(request.mutable_trailing_metadata(), "x-trailing", absl::StrCat("code ", code));
        AddEntry(request.mutable_trailing_metadata(), "x-trailing", "second value");
        AddEntry(request.mutable_trailing_metadata(), "x-trailing-bin", details);
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), static_cast<StatusCode>(code)) << Describe(s);
        EXPECT_EQ(s.error_message(), message);
        EXPECT_EQ(s.error_details(), code == 0 ? "" : details);
        if (code == 0) {
          EXPECT_EQ(response.payload(), "payload");
        }
        EXPECT_EQ(Values(context.GetServerInitialMetadata(), "x-initial"),
                  std::vector<std::string>{"initial value"});
        EXPECT_EQ(Values(context.GetServerInitialMetadata(), "x-initial-bin"),
                  std::vector<std::string>{AllByteValues()});
        EXPECT_EQ(Values(context.GetServerTrailingMetadata(), "x-trailing"),
                  (std::vector<std::string>{absl::StrCat("code ", code), "second value"}));
        EXPECT_EQ(Values(context.GetServerTrailingMetadata(), "x-trailing-bin"),
                  std::vector<std::string>{details});
      }
    }
  }
}

TEST_P(Semantics, HandlerThatThrowsIsUnknownAndTheServerKeepsServing) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      for (int i = 0; i < 3; ++i) {
        ClientContext context;
        EchoRequest request;
        request.set_throw_exception(true);
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::UNKNOWN) << Describe(s);
        ExpectServing(stub.get());
      }
    }
  }
}

TEST_P(Semantics, BinaryMetadataCarriesEveryByteValueBothWays) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      ClientContext context;
      context.AddMetadata("x-all-bytes-bin", AllByteValues());
      context.AddMetadata("x-empty-bin", "");
      context.AddMetadata("x-text", "printable ASCII, spaces and ~!@#$%^&*()");
      context.AddMetadata("x-text", "a second value");
      EchoRequest request;
      request.set_echo_metadata(true);
      AddEntry(request.mutable_initial_metadata(), "x-back-bin", AllByteValues());
      AddEntry(request.mutable_trailing_metadata(), "x-back-trailing-bin", AllByteValues());
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      ASSERT_TRUE(s.ok()) << Describe(s);
      std::multimap<std::string, std::string> seen;
      for (const Entry& e : response.client_metadata()) seen.emplace(e.key(), e.value());
      auto values = [&](const std::string& key) {
        std::vector<std::string> out;
        auto [b, e] = seen.equal_range(key);
        for (auto it = b; it != e; ++it) out.push_back(it->second);
        return out;
      };
      EXPECT_EQ(values("x-all-bytes-bin"), std::vector<std::string>{AllByteValues()});
      EXPECT_EQ(values("x-empty-bin"), std::vector<std::string>{""});
      EXPECT_EQ(
          values("x-text"),
          (std::vector<std::string>{"printable ASCII, spaces and ~!@#$%^&*()", "a second value"}));
      EXPECT_EQ(Values(context.GetServerInitialMetadata(), "x-back-bin"),
                std::vector<std::string>{AllByteValues()});
      EXPECT_EQ(Values(context.GetServerTrailingMetadata(), "x-back-trailing-bin"),
                std::vector<std::string>{AllByteValues()});
    }
  }
}

TEST_P(Semantics, InvalidClientMetadataIsInternalAndNothingIsSent) {
  const std::vector<std::pair<std::string, std::string>> invalid = {
      {"Upper-Case", "v"},    {"has space", "v"},        {"", "v"},
      {"grpc-reserved", "v"}, {"x-text", "bell\a"},      {"x-text", "newline\n"},
      {"x-text", "\x7f"},     {"x-text", "caf\xc3\xa9"}, {"slash/key", "v"},
  };
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (Api api : kApis) {
    for (const auto& [key, value] : invalid) {
      SCOPED_TRACE(absl::StrCat(Name(api), ", key \"", key, "\""));
      const std::string tag = NewTag("invalid-metadata");
      ClientContext context;
      context.AddMetadata("x-fine", "fine");
      context.AddMetadata(key, value);
      EchoRequest request;
      request.set_tag(tag);
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::INTERNAL) << Describe(s);
      ExpectServing(stub.get());
      EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the call was sent";
    }
  }
}

TEST_P(Semantics, InvalidServerMetadataIsInternal) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      for (bool trailing : {false, true}) {
        SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api), trailing ? ", trailing" : ""));
        ClientContext context;
        EchoRequest request;
        AddEntry(
            trailing ? request.mutable_trailing_metadata() : request.mutable_initial_metadata(),
            "Bad Key", "v");
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::INTERNAL) << Describe(s);
      }
      ExpectServing(stub.get());
    }
  }
}

TEST_P(Semantics, MetadataAboveTheLimitIsResourceExhausted) {
  Server* server = StartServer(ServerKind::kSync);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  // A channel that sends and accepts more than the server's default 8 KiB.
  ChannelArguments big = GuardedArgs();
  big.SetInt(kArgMaxMetadataSize, 64 * 1024);
  auto big_stub = NewStub(server, big);
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    {  // Above the channel's own limit (default 8 KiB): refused before sending.
      const std::string tag = NewTag("client-limit");
      ClientContext context;
      context.AddMetadata("x-big", std::string(9 * 1024, 'm'));
      EchoRequest request;
      request.set_tag(tag);
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
      ExpectServing(stub.get());
      EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the call was sent";
    }
    {  // Within the channel's limit but above the server's.
      const std::string tag = NewTag("server-limit");
      ClientContext context;
      context.AddMetadata("x-big", std::string(12 * 1024, 'm'));
      EchoRequest request;
      request.set_tag(tag);
      EchoResponse response;
      Status s = Call(api, big_stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
      EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the handler ran";
    }
    {  // The server's metadata above the client's limit.
      ClientContext context;
      EchoRequest request;
      AddEntry(request.mutable_trailing_metadata(), "x-big", std::string(12 * 1024, 't'));
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
    }
    {  // Just under the limit passes (8 KiB counted as key + value + 32 per entry).
      ClientContext context;
      context.AddMetadata("x-fits", std::string(8 * 1024 - 64, 'f'));
      EchoRequest request;
      request.set_echo_metadata(true);
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_TRUE(s.ok()) << Describe(s);
    }
    ExpectServing(stub.get());
  }
}

TEST_P(Semantics, RequestAboveTheChannelSendLimitIsResourceExhaustedAndNotSent) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    ChannelArguments args = GuardedArgs();
    args.SetMaxSendMessageSize(1000);
    auto stub = NewStub(server, args);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      const std::string tag = NewTag("send-limit");
      ClientContext context;
      EchoRequest request;
      request.set_tag(tag);
      request.set_payload(std::string(2000, 'p'));
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
      ExpectServing(stub.get());
      EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the call was sent";
    }
  }
}

TEST_P(Semantics, RequestAboveTheServerReceiveLimitIsResourceExhausted) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind, [](ServerBuilder& b) { b.SetMaxReceiveMessageSize(1000); });
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      // The last is beyond what the server's transport accepts at all (limit + 64 KiB).
      for (size_t size : {size_t{2000}, size_t{100 * 1000}, size_t{1} << 20}) {
        const std::string tag = NewTag("receive-limit");
        ClientContext context;
        EchoRequest request;
        request.set_tag(tag);
        request.set_payload(std::string(size, 'p'));
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << size << ": " << Describe(s);
        EXPECT_EQ(recorder_.Count(tag, "ran"), 0) << "the handler ran";
      }
      ExpectServing(stub.get());
    }
  }
}

TEST_P(Semantics, ResponseAboveTheChannelReceiveLimitIsResourceExhausted) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    ChannelArguments args = GuardedArgs();
    args.SetMaxReceiveMessageSize(1000);
    auto stub = NewStub(server, args);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      ClientContext context;
      EchoRequest request;
      request.set_response_bytes(2000);
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
      ExpectServing(stub.get());
    }
  }
  {  // The default receive limit is 4 MiB, as in gRPC.
    Server* server = StartServer(ServerKind::kCallback);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    ClientContext context;
    EchoRequest request;
    request.set_response_bytes(5 << 20);
    EchoResponse response;
    Status s = stub->Echo(&context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  }
}

TEST_P(Semantics, PeerStringsNameBothEnds) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    const std::string target = TargetOf(server);
    EXPECT_TRUE(std::regex_match(target, std::regex(R"(ipv4:[0-9.]+:[0-9]+)"))) << target;
    auto stub1 = NewStub(server);
    auto stub2 = NewStub(server);
    std::vector<std::string> server_seen;
    for (Api api : kApis) {
      for (EchoService::Stub* stub : {stub1.get(), stub1.get(), stub2.get()}) {
        SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
        ClientContext context;
        EchoRequest request;
        EchoResponse response;
        Status s = Call(api, stub, &context, request, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_EQ(context.peer(), target);
        EXPECT_TRUE(std::regex_match(response.peer(), std::regex(env_->ClientPeerPattern())))
            << response.peer();
        server_seen.push_back(response.peer());
      }
    }
    // Through one API, one channel is one peer to the server and two channels are two. (A
    // channel's blocking calls leave from the socket it lends their thread, its callback
    // calls from its loop's: kArgCallerSockets. The same host either way.)
    for (size_t api = 0; api < 2; ++api) {
      const size_t first = api * 3;
      EXPECT_EQ(server_seen[first], server_seen[first + 1]);
      EXPECT_NE(server_seen[first], server_seen[first + 2]);
    }
    const auto host = [](const std::string& peer) { return peer.substr(0, peer.rfind(':')); };
    // Whichever socket carried them, one channel's calls come from one host.
    EXPECT_EQ(host(server_seen[0]), host(server_seen[3]));
    EXPECT_EQ(host(server_seen[2]), host(server_seen[5]));
  }
}

TEST_P(Semantics, InlineExecutorAndHostPortTargetsServeCalls) {
  Server* server = StartServer(ServerKind::kSync,
                               [](ServerBuilder& b) { b.SetExecutor(ServerExecutor::kInline); });
  ASSERT_NE(server, nullptr);
  // "ipv4:1.2.3.4:5" -> "1.2.3.4:5", the host:port form (numeric: no DNS involved).
  const std::string target = TargetOf(server).substr(5);
  auto stub = EchoService::NewStub(NewChannel(target));
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    for (int i = 0; i < 20; ++i) {
      ClientContext context;
      EchoRequest request;
      request.set_payload(Pattern(100 + i, i));
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      ASSERT_TRUE(s.ok()) << Describe(s);
      EXPECT_EQ(response.payload(), request.payload());
      EXPECT_EQ(context.peer(), TargetOf(server));
    }
  }
}

TEST_P(Semantics, ListTargetsAreServedRoundRobin) {
  Server* a = StartServer(ServerKind::kSync);
  Server* b = StartServer(ServerKind::kCallback);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  // "ipv4:x:1" + "y:2" -> "ipv4:x:1,y:2": one channel, two servers.
  const std::string target = absl::StrCat(TargetOf(a), ",", TargetOf(b).substr(5));
  auto stub = EchoService::NewStub(NewChannel(target));
  std::map<std::string, int> calls_per_peer;
  for (int i = 0; i < 10; ++i) {
    ClientContext context;
    EchoRequest request;
    EchoResponse response;
    Status s = Call(kApis[i % 2], stub.get(), &context, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    ++calls_per_peer[context.peer()];
  }
  EXPECT_EQ(calls_per_peer, (std::map<std::string, int>{{TargetOf(a), 5}, {TargetOf(b), 5}}));
}

// ---------------------------------------------------------------------------------------------
// IPv6: the same calls over IPv6 loopback (or fabric addresses).

class Ipv6 : public Semantics {};
INSTANTIATE_TEST_SUITE_P(Wires, Ipv6, ::testing::ValuesIn(Ipv6Envs()), EnvName);

TEST_P(Ipv6, CallsStatusesAndPeerStrings) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    const std::string target = TargetOf(server);
    EXPECT_TRUE(std::regex_match(target, std::regex(R"(ipv6:\[[0-9a-f:]+\]:[0-9]+)"))) << target;
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      for (size_t size : {size_t{0}, size_t{1396}, size_t{1} << 20}) {
        ClientContext context;
        context.AddMetadata("x-bin", AllByteValues());
        EchoRequest request;
        request.set_payload(Pattern(size, 6));
        request.set_echo_metadata(true);
        EchoResponse response;
        Status s = Call(api, stub.get(), &context, request, &response);
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_TRUE(response.payload() == request.payload());
        EXPECT_EQ(context.peer(), target);
        EXPECT_TRUE(std::regex_match(response.peer(), std::regex(env_->ClientPeerPattern())))
            << response.peer();
        ASSERT_EQ(response.client_metadata_size(), 1);
        EXPECT_EQ(response.client_metadata(0).value(), AllByteValues());
      }
      ClientContext context;
      EchoRequest request;
      request.set_status_code(StatusCode::NOT_FOUND);
      request.set_status_message("not here");
      request.set_status_details(AllByteValues());
      AddEntry(request.mutable_trailing_metadata(), "x-t-bin", AllByteValues());
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s, Status(StatusCode::NOT_FOUND, "not here", AllByteValues()));
      EXPECT_EQ(Values(context.GetServerTrailingMetadata(), "x-t-bin"),
                std::vector<std::string>{AllByteValues()});
    }
  }
}

TEST_P(Ipv6, UnknownMethodsAndLimits) {
  Server* server = StartServer(ServerKind::kCallback,
                               [](ServerBuilder& b) { b.SetMaxReceiveMessageSize(1000); });
  ASSERT_NE(server, nullptr);
  std::shared_ptr<Channel> channel = NewChannel(TargetOf(server));
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    ClientContext c1;
    EchoRequest request;
    EchoResponse response;
    Status s = CallMethod(api, channel.get(), "/homarpc.e2e.UnregisteredService/Echo", &c1, request,
                          &response);
    EXPECT_EQ(s.error_code(), StatusCode::UNIMPLEMENTED) << Describe(s);
    ClientContext c2;
    request.set_payload(std::string(2000, 'p'));
    s = CallMethod(api, channel.get(), kEchoMethod, &c2, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  }
}

}  // namespace
}  // namespace homarpc::e2e
