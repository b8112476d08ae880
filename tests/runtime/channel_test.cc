// Tests of the client side of unary calls: runtime/channel.cc, client_call.{h,cc},
// client_context.cc (with the UDP transport of udp_transport.cc), without a homarpc server.
//
// Two kinds of fake server stand in for one, both on loopback:
// - RawSocket, a plain UDP socket that answers nothing: it shows what the client sent (Homa
//   DATA packets, whose first bytes are the RPC envelope) and lets a call hang in flight;
// - FakeServer, a transport::Endpoint whose handler decodes the request envelope and answers
//   with a hand-built response envelope (status, details, metadata, payload), which also tests
//   the client's response decoding and limits.
// Requests and responses are google.protobuf.StringValue with a hand-made RpcMethod.
// Waits are on conditions with generous deadlines; nothing asserts on speed.
#include "runtime/channel.h"

#include <netinet/in.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"
#include "runtime/client_context.h"
#include "runtime/envelope.h"
#include "runtime/executor.h"
#include "runtime/status.h"
#include "transport/address.h"
#include "transport/endpoint.h"
#include "transport/wire.h"

namespace homarpc {
namespace {

using ::google::protobuf::StringValue;
using internal::Envelope;
using internal::EnvelopeKind;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using transport::Address;

const internal::RpcMethod kEcho{"/test.Echo/Echo", internal::RpcType::NORMAL_RPC};

constexpr absl::Duration kGenerous = absl::Seconds(10);

StringValue Text(std::string value) {
  StringValue message;
  message.set_value(std::move(value));
  return message;
}

// Test channels spin little: the machine running the tests may have few cores.
ChannelArguments QuietArgs(int unavailable_timeout_ms = 10000) {
  ChannelArguments args;
  args.SetInt(kArgSpinMicros, 0);
  args.SetInt(kArgUnavailableTimeoutMs, unavailable_timeout_ms);
  return args;
}

bool Ipv6LoopbackWorks() {
  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  const Address a = Address::Loopback6(0);
  const bool ok = bind(fd, a.sockaddr_ptr(), a.sockaddr_len()) == 0;
  close(fd);
  return ok;
}

// What a raw socket saw of one envelope (the first DATA packet of a message).
struct SeenEnvelope {
  EnvelopeKind kind;
  uint64_t call_id;
  std::string method;
  int64_t timeout_micros;
};

// A UDP socket on loopback that never answers.
class RawSocket {
 public:
  explicit RawSocket(bool ipv6 = false) {
    fd_ = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    EXPECT_GE(fd_, 0);
    Address bind_to = ipv6 ? Address::Loopback6(0) : Address::Loopback4(0);
    EXPECT_EQ(bind(fd_, bind_to.sockaddr_ptr(), bind_to.sockaddr_len()), 0);
    sockaddr_storage storage{};
    socklen_t len = sizeof(storage);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &len);
    address_ = Address::FromSockaddr(reinterpret_cast<sockaddr*>(&storage), len);
  }
  ~RawSocket() { close(fd_); }

  const Address& address() const { return address_; }
  std::string target() const { return address_.ToString(); }

  // Reads datagrams until an envelope matching `match` arrives (returned) or `timeout`
  // passes (nullopt). Every envelope seen on the way is appended to `seen` when given.
  std::optional<SeenEnvelope> WaitFor(std::function<bool(const SeenEnvelope&)> match,
                                      absl::Duration timeout,
                                      std::vector<SeenEnvelope>* seen = nullptr) {
    const absl::Time deadline = absl::Now() + timeout;
    std::vector<uint8_t> buffer(65536);
    while (true) {
      const absl::Duration left = deadline - absl::Now();
      pollfd p{fd_, POLLIN, 0};
      const int wait_ms =
          left <= absl::ZeroDuration() ? 0 : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      const int ready = poll(&p, 1, wait_ms);
      if (ready <= 0) return std::nullopt;
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
      if (n <= 0) continue;
      transport::wire::Packet packet;
      if (transport::wire::Decode(absl::MakeConstSpan(buffer.data(), static_cast<size_t>(n)),
                                  &packet) != transport::wire::DecodeError::kOk ||
          packet.type != transport::wire::PacketType::kData || packet.data.offset != 0 ||
          packet.payload.size() != packet.data.message_length) {
        continue;  // not the whole first packet of a small message
      }
      absl::StatusOr<Envelope> envelope = internal::Decode(packet.payload);
      if (!envelope.ok()) continue;
      SeenEnvelope e{envelope->kind, envelope->call_id, std::string(envelope->method),
                     envelope->timeout_micros};
      if (seen != nullptr) seen->push_back(e);
      if (match(e)) return e;
    }
  }

  std::optional<SeenEnvelope> WaitForRequest(absl::Duration timeout = kGenerous) {
    return WaitFor([](const SeenEnvelope& e) { return e.kind == EnvelopeKind::kRequest; }, timeout);
  }

  // True when nothing at all arrives within `quiet`.
  bool ReceivesNothing(absl::Duration quiet) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(quiet))) == 0;
  }

 private:
  int fd_ = -1;
  Address address_;
};

// A request as the fake server saw it (copied out of the message).
struct SeenRequest {
  EnvelopeKind kind;
  uint64_t call_id;
  std::string method;
  int64_t timeout_micros;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::string payload;
  Address peer;
};

// What the fake server answers.
struct Answer {
  uint32_t code = 0;
  std::string message;
  std::string details;
  std::vector<std::pair<std::string, std::string>> initial_metadata;
  std::vector<std::pair<std::string, std::string>> trailing_metadata;
  std::string payload;
  uint16_t flags = internal::kFlagEndOfStream;
  std::optional<std::string> raw;  // bytes to send instead of an envelope
};

transport::Buffer EncodeAnswer(uint64_t call_id, const Answer& answer) {
  if (answer.raw.has_value()) return transport::Buffer::CopyOf(*answer.raw);
  Envelope envelope;
  envelope.kind = EnvelopeKind::kResponse;
  envelope.call_id = call_id;
  envelope.flags = answer.flags;
  envelope.status_code = answer.code;
  envelope.status_message = answer.message;
  envelope.status_details = answer.details;
  for (const auto& [k, v] : answer.initial_metadata) envelope.metadata.emplace_back(k, v);
  for (const auto& [k, v] : answer.trailing_metadata) {
    envelope.trailing_metadata.emplace_back(k, v);
  }
  const size_t header = internal::EncodedHeaderSize(envelope);
  transport::Buffer out(header + answer.payload.size());
  internal::EncodeHeader(envelope, absl::MakeSpan(out.data(), header));
  if (!answer.payload.empty()) {
    std::memcpy(out.data() + header, answer.payload.data(), answer.payload.size());
  }
  return out;
}

// A Homa endpoint that answers every request with `answer(request)`; kCancel envelopes are
// recorded and answered with an empty response.
class FakeServer {
 public:
  using AnswerFn = std::function<Answer(const SeenRequest&)>;

  explicit FakeServer(AnswerFn answer, bool ipv6 = false)
      : FakeServer(std::move(answer), ipv6 ? Address::Loopback6(0) : Address::Loopback4(0)) {}
  FakeServer(AnswerFn answer, const Address& bind) : answer_(std::move(answer)) {
    transport::EndpointOptions options;
    options.config.poll_usecs = 0;  // sleep when idle: keep the test machine's cores free
    options.io.bind_address = bind;
    auto endpoint = transport::Endpoint::Create(
        options, [this](transport::IncomingRequest request) { Handle(std::move(request)); });
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = std::move(*endpoint);
  }

  Address address() const { return endpoint_->local_address(); }
  std::string target() const { return address().ToString(); }

  std::vector<SeenRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  size_t request_count() {
    absl::MutexLock lock(&mu_);
    return requests_.size();
  }

 private:
  void Handle(transport::IncomingRequest request) {
    absl::StatusOr<Envelope> envelope = internal::Decode(request.payload.span());
    ASSERT_TRUE(envelope.ok()) << envelope.status();
    SeenRequest seen{envelope->kind,
                     envelope->call_id,
                     std::string(envelope->method),
                     envelope->timeout_micros,
                     {},
                     {},
                     request.peer};
    for (const auto& [k, v] : envelope->metadata) seen.metadata.emplace_back(k, v);
    seen.payload.assign(reinterpret_cast<const char*>(envelope->payload.data()),
                        envelope->payload.size());
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(seen);
    }
    const Answer answer = seen.kind == EnvelopeKind::kRequest ? answer_(seen) : Answer{};
    endpoint_->Reply(request, EncodeAnswer(seen.call_id, answer));
  }

  AnswerFn answer_;
  absl::Mutex mu_;
  std::vector<SeenRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<transport::Endpoint> endpoint_;  // last: its thread calls Handle()
};

// Echoes the request's StringValue back, prefixed.
Answer EchoAnswer(const SeenRequest& request) {
  StringValue in;
  EXPECT_TRUE(in.ParseFromString(request.payload));
  Answer answer;
  answer.payload = Text("echo:" + in.value()).SerializeAsString();
  return answer;
}

// Runs an async call and waits for its callback; checks that it runs exactly once.
Status AsyncCall(Channel& channel, ClientContext* context, const StringValue& request,
                 StringValue* response) {
  absl::Notification done;
  std::atomic<int> calls{0};
  Status result;
  channel.AsyncUnaryCall(kEcho, context, &request, response, [&](Status status) {
    result = std::move(status);
    calls.fetch_add(1);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(calls.load(), 1);
  return result;
}

// ---- Answered calls --------------------------------------------------------------------------

TEST(Channel_Call, BlockingEchoWithMetadataBothWays) {
  FakeServer server([](const SeenRequest& request) {
    Answer answer = EchoAnswer(request);
    answer.initial_metadata = {{"init-key", "init value"}};
    answer.trailing_metadata = {{"trail-key", "tv"}, {"trail-bin", std::string("\0\xff", 2)}};
    return answer;
  });
  // Default arguments (spinning waits included) for this one.
  auto channel = CreateChannel(server.target(), InsecureChannelCredentials());
  ASSERT_TRUE(channel->resolved());
  ClientContext context;
  context.AddMetadata("user-key", "user value");
  context.AddMetadata("blob-bin", std::string("\x00\x01\xfe", 3));
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("hi"), &response);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(response.value(), "echo:hi");

  const std::vector<SeenRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "/test.Echo/Echo");
  EXPECT_EQ(seen[0].timeout_micros, -1);  // no deadline set
  EXPECT_GE(seen[0].call_id, 1u);
  EXPECT_THAT(seen[0].metadata,
              UnorderedElementsAre(Pair("user-key", "user value"),
                                   Pair("blob-bin", std::string("\x00\x01\xfe", 3))));

  EXPECT_THAT(context.GetServerInitialMetadata(),
              UnorderedElementsAre(Pair("init-key", "init value")));
  EXPECT_THAT(
      context.GetServerTrailingMetadata(),
      UnorderedElementsAre(Pair("trail-key", "tv"), Pair("trail-bin", std::string("\0\xff", 2))));
  EXPECT_EQ(context.peer(), "ipv4:" + server.target());
}

TEST(Channel_Call, DeadlineTravelsAsTimeout) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.set_timeout(std::chrono::seconds(30));
  StringValue response;
  ASSERT_TRUE(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).ok());
  const std::vector<SeenRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_GT(seen[0].timeout_micros, 0);
  EXPECT_LE(seen[0].timeout_micros, 30'000'000);
}

TEST(Channel_Call, ExtremeDeadlinesMeanNoDeadline) {
  // Each of these overflowed in the conversion to system_clock and made the call fail
  // DEADLINE_EXCEEDED at once; beyond what system_clock can represent means no deadline.
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  const std::vector<std::pair<std::string, std::function<void(ClientContext&)>>> settings = {
      {"steady max",
       [](ClientContext& c) { c.set_deadline(std::chrono::steady_clock::time_point::max()); }},
      {"timeout ms max", [](ClientContext& c) { c.set_timeout(std::chrono::milliseconds::max()); }},
      {"system seconds max",
       [](ClientContext& c) {
         c.set_deadline(
             std::chrono::time_point<std::chrono::system_clock, std::chrono::seconds>::max());
       }},
      {"timeout 300 years",
       [](ClientContext& c) { c.set_timeout(std::chrono::hours(24 * 365 * 300)); }},
  };
  for (const auto& [name, set] : settings) {
    SCOPED_TRACE(name);
    ClientContext context;
    set(context);
    EXPECT_EQ(context.deadline(), std::chrono::system_clock::time_point::max());
    StringValue response;
    const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(server.requests().back().timeout_micros, -1);  // none sent
  }
}

TEST(Channel_Call, FarDeadlineTravelsWithoutOverflow) {
  // A real deadline, just inside system_clock's range (~2262): the timeout sent and the
  // transport's deadline are computed without overflowing.
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.set_deadline(std::chrono::system_clock::time_point::max() - std::chrono::hours(1));
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  ASSERT_TRUE(status.ok()) << status.ToString();
  constexpr int64_t kMicrosPer100Years = int64_t{100} * 365 * 24 * 3600 * 1'000'000;
  EXPECT_GT(server.requests().back().timeout_micros, kMicrosPer100Years);
}

TEST(Channel_Call, ErrorStatusWithDetailsAndTrailers) {
  const std::string details("\x08\x05\x12\x00 binary", 11);
  FakeServer server([&](const SeenRequest&) {
    Answer answer;
    answer.code = StatusCode::NOT_FOUND;
    answer.message = "no such thing";
    answer.details = details;
    answer.trailing_metadata = {{"why", "because"}};
    answer.payload = "ignored when the status is not OK";
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status, Status(StatusCode::NOT_FOUND, "no such thing", details));
  EXPECT_THAT(context.GetServerTrailingMetadata(), UnorderedElementsAre(Pair("why", "because")));
  EXPECT_EQ(response.value(), "");
}

TEST(Channel_Call, StatusCodeOutsideGrpcsIsInternal) {
  // The envelope admits codes 0..16 only (PROTOCOL.md §14): anything else is a malformed
  // response, not a status to hand the caller.
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.code = 99;
    answer.message = "from the future";
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("malformed response"));
}

TEST(Channel_Call, ReceiveLimitIsResourceExhausted) {
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.payload = Text(std::string(100, 'r')).SerializeAsString();
    return answer;
  });
  ChannelArguments args = QuietArgs();
  args.SetMaxReceiveMessageSize(50);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::RESOURCE_EXHAUSTED) << status.ToString();
  EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));

  // At the limit it passes.
  args.SetMaxReceiveMessageSize(102);
  auto roomy = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext context2;
  EXPECT_TRUE(roomy->BlockingUnaryCall(kEcho, &context2, Text("x"), &response).ok());
  EXPECT_EQ(response.value().size(), 100u);
}

// gRPC's GRPC_ARG_* macros name the same keys (a migrated program keeps using them): the
// limits they set apply, and the keys homarpc does not use (keepalive, retries, backoff) are
// accepted without changing anything.
TEST(Channel_Call, GrpcArgumentMacrosNameTheSameKeys) {
  static_assert(std::string_view(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH) ==
                kArgMaxReceiveMessageLength);
  static_assert(std::string_view(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH) == kArgMaxSendMessageLength);
  static_assert(std::string_view(GRPC_ARG_MAX_METADATA_SIZE) == kArgMaxMetadataSize);
  static_assert(std::string_view(GRPC_ARG_LB_POLICY_NAME) == kArgLoadBalancingPolicy);
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.payload = Text(std::string(100, 'r')).SerializeAsString();
    return answer;
  });
  ChannelArguments args = QuietArgs();
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "migrated/1.0");
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 102);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext context;
  StringValue response;
  ASSERT_TRUE(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).ok());
  EXPECT_EQ(response.value().size(), 100u);

  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 50);
  auto tight = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext context2;
  EXPECT_EQ(tight->BlockingUnaryCall(kEcho, &context2, Text("x"), &response).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
}

TEST(Channel_Call, UnparsablePayloadIsInternal) {
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.payload = std::string("\xff\xff\xff", 3);  // a truncated varint tag
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status, Status(StatusCode::INTERNAL, "failed to parse response"));
}

TEST(Channel_Call, MalformedEnvelopeIsInternal) {
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.raw = "definitely not an envelope, but long enough";
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("malformed response"));
}

TEST(Channel_Call, OversizeServerMetadataIsResourceExhausted) {
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.trailing_metadata = {{"big", std::string(200, 'm')}};
    return answer;
  });
  ChannelArguments args = QuietArgs();
  args.SetInt(kArgMaxMetadataSize, 100);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext context;
  StringValue response;
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
}

TEST(Channel_Call, ResponseMetadataIsLimitedWhileDecoding) {
  // 100,000 empty trailing entries (700 KB): decoding stops at the first entry over the
  // channel's 8 KiB limit instead of storing 3.2 MB of entries and checking afterwards.
  FakeServer server([](const SeenRequest&) {
    Answer answer;
    answer.trailing_metadata.resize(100'000);
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::RESOURCE_EXHAUSTED) << status.ToString();
  EXPECT_THAT(status.error_message(),
              HasSubstr("trailing metadata of at least 8224 bytes exceeds the limit of 8192"));
  EXPECT_TRUE(context.GetServerTrailingMetadata().empty());
}

TEST(Channel_Call, CompressedResponseIsInternal) {
  FakeServer server([](const SeenRequest& request) {
    Answer answer = EchoAnswer(request);
    answer.flags |= internal::kFlagCompressed;
    return answer;
  });
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("compressed"));
  EXPECT_TRUE(response.value().empty());
}

TEST(Channel_Call, AsyncEchoCallbackRunsOnce) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  for (int i = 0; i < 5; ++i) {
    ClientContext context;
    StringValue response;
    const Status status = AsyncCall(*channel, &context, Text(std::to_string(i)), &response);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(response.value(), "echo:" + std::to_string(i));
  }
  // Call ids are distinct per channel.
  const std::vector<SeenRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 5u);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_NE(seen[i].call_id, seen[0].call_id);
}

TEST(Channel_Call, ManyConcurrentAsyncCallsEachCompleteOnce) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  constexpr int kCalls = 200;
  struct Slot {
    ClientContext context;
    StringValue request;
    StringValue response;
    std::atomic<int> completions{0};
    Status status;
  };
  std::vector<std::unique_ptr<Slot>> slots;
  std::atomic<int> remaining{kCalls};
  absl::Notification all_done;
  for (int i = 0; i < kCalls; ++i) {
    slots.push_back(std::make_unique<Slot>());
    Slot* slot = slots.back().get();
    slot->request = Text(std::to_string(i));
    channel->AsyncUnaryCall(kEcho, &slot->context, &slot->request, &slot->response,
                            [&, slot](Status status) {
                              slot->status = std::move(status);
                              slot->completions.fetch_add(1);
                              if (remaining.fetch_sub(1) == 1) all_done.Notify();
                            });
  }
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(kGenerous));
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(slots[i]->completions.load(), 1);
    EXPECT_TRUE(slots[i]->status.ok()) << slots[i]->status.ToString();
    EXPECT_EQ(slots[i]->response.value(), "echo:" + std::to_string(i));
  }
}

TEST(Channel_Call, RoundRobinAndPickFirst) {
  FakeServer a(EchoAnswer);
  FakeServer b(EchoAnswer);
  const std::string target = "ipv4:" + a.target() + "," + b.target();
  auto channel = CreateCustomChannel(target, InsecureChannelCredentials(), QuietArgs());
  EXPECT_EQ(channel->DebugTarget(), "ipv4:" + a.target() + ",ipv4:" + b.target());
  std::vector<std::string> peers;
  for (int i = 0; i < 4; ++i) {
    ClientContext context;
    StringValue response;
    ASSERT_TRUE(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).ok());
    peers.push_back(context.peer());
  }
  EXPECT_EQ(a.request_count(), 2u);
  EXPECT_EQ(b.request_count(), 2u);
  EXPECT_NE(peers[0], peers[1]);
  EXPECT_EQ(peers[0], peers[2]);

  ChannelArguments args = QuietArgs();
  args.SetLoadBalancingPolicyName("pick_first");
  auto first = CreateCustomChannel(target, InsecureChannelCredentials(), args);
  for (int i = 0; i < 3; ++i) {
    ClientContext context;
    StringValue response;
    ASSERT_TRUE(first->BlockingUnaryCall(kEcho, &context, Text("x"), &response).ok());
    EXPECT_EQ(context.peer(), "ipv4:" + a.target());
  }
  EXPECT_EQ(a.request_count(), 5u);
  EXPECT_EQ(b.request_count(), 2u);
}

TEST(Channel_Call, Ipv6) {
  if (!Ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 loopback on this host";
  FakeServer server(EchoAnswer, /*ipv6=*/true);
  const std::string port = std::to_string(server.address().port());
  for (const std::string& target :
       {"[::1]:" + port, "ipv6:[::1]:" + port, "dns:///[::1]:" + port, "localhost6:" + port}) {
    auto channel = CreateCustomChannel(target, InsecureChannelCredentials(), QuietArgs());
    ClientContext context;
    StringValue response;
    const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("six"), &response);
    ASSERT_TRUE(status.ok()) << target << ": " << status.ToString();
    EXPECT_EQ(response.value(), "echo:six");
    EXPECT_EQ(context.peer(), "ipv6:[::1]:" + port);
    // The server saw the request come from IPv6 loopback (the channel bound [::]).
    EXPECT_TRUE(server.requests().back().peer.is_v6());
  }
}

// A DNS name with two addresses (two /etc/hosts lines) is served round-robin, as an ipv4: list
// is. /etc/hosts is replaced in a private mount namespace of one thread (it needs root), which
// creates the channels: a channel resolves its target once, when it is created. The channels'
// own threads, started there, inherit that namespace; the test's thread and the host keep theirs.
TEST(Channel_Call, NameWithSeveralAddressesIsServedRoundRobin) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a private mount namespace for /etc/hosts)";
  FakeServer a(EchoAnswer, *Address::Parse("127.0.0.2:0"));
  const uint16_t port = a.address().port();
  FakeServer b(EchoAnswer, *Address::Parse("127.0.0.3", port));
  ASSERT_EQ(b.address().port(), port);
  char hosts[] = "/tmp/homarpc-hosts-XXXXXX";
  const int fd = mkstemp(hosts);
  ASSERT_GE(fd, 0);
  absl::Cleanup remove_hosts = [&hosts] { unlink(hosts); };
  const std::string lines = "127.0.0.2 multi.homarpc.test\n127.0.0.3 multi.homarpc.test\n";
  const ssize_t written = write(fd, lines.data(), lines.size());
  close(fd);
  ASSERT_EQ(written, static_cast<ssize_t>(lines.size()));
  const std::string ports = std::to_string(port);
  std::shared_ptr<Channel> plain, dns;
  std::string skip;
  std::thread resolver([&] {
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount(hosts, "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
      skip = absl::StrCat("cannot bind-mount /etc/hosts in a mount namespace: ", strerror(errno));
      return;
    }
    // Where names are looked up elsewhere first (nscd, systemd-resolved), the file is not read.
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    int answers = 0;
    if (getaddrinfo("multi.homarpc.test", nullptr, &hints, &found) == 0) {
      for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) ++answers;
      freeaddrinfo(found);
    }
    if (answers != 2) {
      skip = absl::StrCat("the resolver gave ", answers, " addresses for a name /etc/hosts gives 2");
      return;
    }
    plain = CreateCustomChannel("multi.homarpc.test:" + ports, InsecureChannelCredentials(),
                                QuietArgs());
    dns = CreateCustomChannel("dns:///multi.homarpc.test:" + ports, InsecureChannelCredentials(),
                              QuietArgs());
  });
  resolver.join();
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string at_a = "ipv4:127.0.0.2:" + ports;
  const std::string at_b = "ipv4:127.0.0.3:" + ports;
  for (const std::shared_ptr<Channel>& channel : {plain, dns}) {
    SCOPED_TRACE(channel->DebugTarget());
    EXPECT_EQ(channel->DebugTarget(), at_a + "," + at_b);
    std::vector<std::string> peers;
    for (int i = 0; i < 4; ++i) {
      ClientContext context;
      StringValue response;
      ASSERT_TRUE(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).ok());
      EXPECT_EQ(response.value(), "echo:x");
      peers.push_back(context.peer());
    }
    EXPECT_EQ(peers, (std::vector<std::string>{at_a, at_b, at_a, at_b}));
  }
  EXPECT_EQ(a.request_count(), 4u);
  EXPECT_EQ(b.request_count(), 4u);
}

TEST(Channel_Call, LocalhostTarget) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel("localhost:" + std::to_string(server.address().port()),
                                     InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  ASSERT_TRUE(channel->BlockingUnaryCall(kEcho, &context, Text("l"), &response).ok());
  EXPECT_EQ(response.value(), "echo:l");
}

// ---- Calls that fail before sending ------------------------------------------------------

TEST(Channel_Fail, SendLimitIsResourceExhaustedAndSendsNothing) {
  RawSocket raw;
  ChannelArguments args = QuietArgs();
  args.SetMaxSendMessageSize(50);
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), args);
  ClientContext context;
  StringValue response;
  const Status status =
      channel->BlockingUnaryCall(kEcho, &context, Text(std::string(100, 'q')), &response);
  EXPECT_EQ(status.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));
  EXPECT_EQ(context.peer(), "");  // never started

  // Async too, with the callback on this thread.
  ClientContext context2;
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id callback_thread;
  const StringValue big = Text(std::string(100, 'q'));
  channel->AsyncUnaryCall(kEcho, &context2, &big, &response, [&](Status s) {
    EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
    callback_thread = std::this_thread::get_id();
  });
  EXPECT_EQ(callback_thread, caller);

  // A small call on the same channel does reach the socket, and it is the first envelope
  // there: the oversize ones sent nothing.
  ClientContext small;
  small.set_timeout(std::chrono::milliseconds(300));
  absl::Notification done;
  const StringValue tiny = Text("t");
  channel->AsyncUnaryCall(kEcho, &small, &tiny, &response, [&](Status s) {
    EXPECT_EQ(s.error_code(), StatusCode::DEADLINE_EXCEEDED);
    done.Notify();
  });
  std::vector<SeenEnvelope> seen;
  ASSERT_TRUE(raw.WaitFor([](const SeenEnvelope&) { return true; }, kGenerous, &seen));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].call_id, 3u);  // ids 1 and 2 went to the calls that failed
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
}

TEST(Channel_Fail, InvalidMetadataIsInternal) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"Upper-Case", "v"},        // keys are lowercase
      {"spaced key", "v"},        // not in [0-9a-z_.-]
      {"printable", "bell\x07"},  // non-bin values are printable ASCII
      {"grpc-timeout", "1S"},     // reserved for the library
      {"", "v"},                  // empty key
  };
  for (const auto& [key, value] : bad) {
    ClientContext context;
    context.AddMetadata(key, value);
    StringValue response;
    const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
    EXPECT_EQ(status.error_code(), StatusCode::INTERNAL) << key;
    EXPECT_EQ(context.peer(), "") << key;
    ClientContext async_context;
    async_context.AddMetadata(key, value);
    EXPECT_EQ(AsyncCall(*channel, &async_context, Text("x"), &response).error_code(),
              StatusCode::INTERNAL)
        << key;
  }
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(Channel_Fail, OversizeMetadataIsResourceExhausted) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.AddMetadata("big", std::string(9 * 1024, 'm'));  // default limit: 8 KiB
  StringValue response;
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);

  // The limit counts 32 bytes per entry, as HTTP/2 does, and comes from the arguments.
  ChannelArguments args = QuietArgs();
  args.SetInt(kArgMaxMetadataSize, 100);
  auto tight = CreateCustomChannel(server.target(), InsecureChannelCredentials(), args);
  ClientContext over;
  over.AddMetadata("k1", std::string(20, 'a'));  // 2 + 20 + 32 = 54
  over.AddMetadata("k2", std::string(20, 'a'));  // 108 > 100
  EXPECT_EQ(tight->BlockingUnaryCall(kEcho, &over, Text("x"), &response).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);
  ClientContext under;
  under.AddMetadata("k1", std::string(20, 'a'));
  EXPECT_TRUE(tight->BlockingUnaryCall(kEcho, &under, Text("x"), &response).ok());
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(Channel_Fail, CancelledBeforeTheCall) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.TryCancel();
  StringValue response;
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).error_code(),
            StatusCode::CANCELLED);
  ClientContext async_context;
  async_context.TryCancel();
  EXPECT_EQ(AsyncCall(*channel, &async_context, Text("x"), &response).error_code(),
            StatusCode::CANCELLED);
  EXPECT_TRUE(raw.ReceivesNothing(absl::Milliseconds(50)));
}

TEST(Channel_Fail, DeadlineAlreadyPassed) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() - std::chrono::milliseconds(1));
  StringValue response;
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
  ClientContext steady;  // any clock converts
  steady.set_deadline(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(AsyncCall(*channel, &steady, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
  // The extremes: compared, not subtracted (min() - now overflowed).
  ClientContext system_min;
  system_min.set_deadline(std::chrono::system_clock::time_point::min());
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &system_min, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
  ClientContext steady_min;
  steady_min.set_deadline(std::chrono::steady_clock::time_point::min());
  EXPECT_EQ(AsyncCall(*channel, &steady_min, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
  ClientContext timeout_min;
  timeout_min.set_timeout(std::chrono::milliseconds::min());
  EXPECT_EQ(channel->BlockingUnaryCall(kEcho, &timeout_min, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(raw.ReceivesNothing(absl::Milliseconds(50)));
}

TEST(Channel_Fail, UnresolvableTargetFailsEveryCallUnavailable) {
  for (const std::string target : {"no-such-host.invalid:50051", "localhost", "unix:/tmp/x"}) {
    auto channel = CreateChannel(target, InsecureChannelCredentials());
    ASSERT_NE(channel, nullptr);
    EXPECT_FALSE(channel->resolved());
    EXPECT_FALSE(channel->WaitForConnected(std::chrono::system_clock::now()));
    EXPECT_THAT(channel->DebugTarget(), HasSubstr(target));
    ClientContext context;
    StringValue response;
    const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
    EXPECT_EQ(status.error_code(), StatusCode::UNAVAILABLE) << target;
    EXPECT_THAT(status.error_message(), HasSubstr(target));
    ClientContext async_context;
    EXPECT_EQ(AsyncCall(*channel, &async_context, Text("x"), &response).error_code(),
              StatusCode::UNAVAILABLE);
  }
}

TEST(Channel_Fail, BadChannelArgumentFailsCallsUnavailable) {
  ChannelArguments args = QuietArgs();
  args.SetString(kArgIoBackend, "carrier-pigeon");
  auto channel = CreateCustomChannel("127.0.0.1:9", InsecureChannelCredentials(), args);
  ClientContext context;
  StringValue response;
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("carrier-pigeon"));
}

// ---- Calls in flight -------------------------------------------------------------------------

TEST(Channel_InFlight, NothingListensIsUnavailableAfterTheConfiguredTimeout) {
  Address nobody;
  {
    RawSocket closed;  // a port that was free a moment ago and is now closed
    nobody = closed.address();
  }
  auto channel = CreateCustomChannel(nobody.ToString(), InsecureChannelCredentials(),
                                     QuietArgs(/*unavailable_timeout_ms=*/50));
  ClientContext context;
  StringValue response;
  const absl::Time start = absl::Now();
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(status.error_code(), StatusCode::UNAVAILABLE) << status.ToString();
  EXPECT_GE(took, absl::Milliseconds(40));  // silence for ~the configured 50 ms
  EXPECT_LT(took, kGenerous);

  ClientContext async_context;
  EXPECT_EQ(AsyncCall(*channel, &async_context, Text("x"), &response).error_code(),
            StatusCode::UNAVAILABLE);
}

TEST(Channel_InFlight, DeadlinePassesWhileTheServerIsSilent) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  context.set_timeout(std::chrono::milliseconds(100));
  StringValue response;
  const absl::Time start = absl::Now();
  const Status status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response);
  EXPECT_EQ(status.error_code(), StatusCode::DEADLINE_EXCEEDED) << status.ToString();
  EXPECT_LT(absl::Now() - start, kGenerous);
  const std::optional<SeenEnvelope> request = raw.WaitForRequest();
  ASSERT_TRUE(request.has_value());
  EXPECT_GT(request->timeout_micros, 0);
  EXPECT_LE(request->timeout_micros, 100'000);

  ClientContext async_context;
  async_context.set_timeout(std::chrono::milliseconds(50));
  EXPECT_EQ(AsyncCall(*channel, &async_context, Text("x"), &response).error_code(),
            StatusCode::DEADLINE_EXCEEDED);
}

TEST(Channel_InFlight, TryCancelFromAnotherThreadSendsCancelEnvelope) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue response;
  Status status;
  std::thread caller(
      [&] { status = channel->BlockingUnaryCall(kEcho, &context, Text("x"), &response); });
  const std::optional<SeenEnvelope> request = raw.WaitForRequest();
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->method, "/test.Echo/Echo");
  context.TryCancel();
  caller.join();
  EXPECT_EQ(status.error_code(), StatusCode::CANCELLED) << status.ToString();
  EXPECT_EQ(context.peer(), "ipv4:" + raw.target());
  // The server is told, with the call's id, in an envelope of its own.
  const std::optional<SeenEnvelope> cancel =
      raw.WaitFor([](const SeenEnvelope& e) { return e.kind == EnvelopeKind::kCancel; }, kGenerous);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->call_id, request->call_id);
}

TEST(Channel_InFlight, TryCancelAsyncCall) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue request = Text("x"), response;
  absl::Notification done;
  std::atomic<int> calls{0};
  Status status;
  channel->AsyncUnaryCall(kEcho, &context, &request, &response, [&](Status s) {
    status = std::move(s);
    calls.fetch_add(1);
    done.Notify();
  });
  const std::optional<SeenEnvelope> sent = raw.WaitForRequest();
  ASSERT_TRUE(sent.has_value());
  context.TryCancel();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(status.error_code(), StatusCode::CANCELLED);
  const std::optional<SeenEnvelope> cancel =
      raw.WaitFor([](const SeenEnvelope& e) { return e.kind == EnvelopeKind::kCancel; }, kGenerous);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->call_id, sent->call_id);
  context.TryCancel();  // after completion: nothing happens
  EXPECT_EQ(calls.load(), 1);
}

TEST(Channel_InFlight, TryCancelRacingCompletionEndsEachCallOnce) {
  // TryCancel at every point of a call's life (before sending, in flight, as the answer
  // arrives, after): each call ends exactly once, OK or CANCELLED, and nothing is touched
  // after it ended (ASan watches).
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  StringValue request = Text("r");
  for (int i = 0; i < 100; ++i) {
    {
      ClientContext context;
      StringValue response;
      Status status;
      std::thread caller(
          [&] { status = channel->BlockingUnaryCall(kEcho, &context, request, &response); });
      for (int spin = 0; spin < i * 20; ++spin) std::this_thread::yield();
      context.TryCancel();
      caller.join();
      EXPECT_TRUE(status.ok() || status.error_code() == StatusCode::CANCELLED) << status.ToString();
    }
    {
      auto context = std::make_unique<ClientContext>();
      StringValue response;
      absl::Notification done;
      std::atomic<int> calls{0};
      Status status;
      ClientContext* raw_context = context.get();
      channel->AsyncUnaryCall(kEcho, raw_context, &request, &response, [&](Status s) {
        status = std::move(s);
        calls.fetch_add(1);
        done.Notify();
      });
      for (int spin = 0; spin < i * 20; ++spin) std::this_thread::yield();
      raw_context->TryCancel();
      ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
      context.reset();  // allowed once the callback ran
      EXPECT_EQ(calls.load(), 1);
      EXPECT_TRUE(status.ok() || status.error_code() == StatusCode::CANCELLED) << status.ToString();
    }
  }
}

TEST(Channel_InFlight, DestroyingTheChannelCancelsCallsInFlight) {
  RawSocket raw;
  auto channel = CreateCustomChannel(raw.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext context;
  StringValue request = Text("x"), response;
  std::atomic<int> calls{0};
  Status status;
  channel->AsyncUnaryCall(kEcho, &context, &request, &response, [&](Status s) {
    status = std::move(s);
    calls.fetch_add(1);
  });
  ASSERT_TRUE(raw.WaitForRequest().has_value());
  channel.reset();  // the callback runs before this returns
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(status.error_code(), StatusCode::CANCELLED);
  context.TryCancel();  // the call and the channel are gone: nothing to reach
}

TEST(Channel_InFlight, LastReferenceDroppedInsideACallback) {
  // Call 1 goes to a silent socket, call 2 to a server whose answer runs a callback holding
  // the last reference to the channel. Dropping it there must not join the transport's own
  // thread; the channel is destroyed elsewhere, which cancels call 1.
  RawSocket raw;
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel("ipv4:" + raw.target() + "," + server.target(),
                                     InsecureChannelCredentials(), QuietArgs());
  ClientContext silent_context, answered_context;
  StringValue request = Text("x"), silent_response, answered_response;
  absl::Notification silent_done;
  Status silent_status;
  channel->AsyncUnaryCall(kEcho, &silent_context, &request, &silent_response, [&](Status s) {
    silent_status = std::move(s);
    silent_done.Notify();
  });
  ASSERT_TRUE(raw.WaitForRequest().has_value());
  absl::Notification answered;
  Channel* raw_channel = channel.get();
  raw_channel->AsyncUnaryCall(kEcho, &answered_context, &request, &answered_response,
                              [&answered, keep = std::move(channel)](Status s) {
                                EXPECT_TRUE(s.ok()) << s.ToString();
                                answered.Notify();
                              });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kGenerous));
  ASSERT_TRUE(silent_done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(silent_status.error_code(), StatusCode::CANCELLED);
}

// The child process of the test below: drops a channel's last reference inside one of its
// callbacks while another call is in flight, then exits at once.
[[noreturn]] void ExitRightAfterDroppingAChannelInItsCallback() {
  // exit() does not unwind this scope: the contexts and messages stay valid.
  RawSocket raw;
  auto server = std::make_unique<FakeServer>(EchoAnswer);
  auto channel = CreateCustomChannel("ipv4:" + raw.target() + "," + server->target(),
                                     InsecureChannelCredentials(), QuietArgs());
  ClientContext silent_context, answered_context;
  StringValue request = Text("x"), silent_response, answered_response;
  channel->AsyncUnaryCall(kEcho, &silent_context, &request, &silent_response, [](Status s) {
    // Slow on purpose, so that a teardown nobody waits for loses the race with the exit. The
    // test does not depend on it: a joined teardown prints whatever the timing.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fprintf(stderr, "silent call ended: %s\n", s.ToString().c_str());
  });
  if (!raw.WaitForRequest().has_value()) std::_Exit(3);
  std::atomic<bool> dropped{false};
  Channel* raw_channel = channel.get();
  raw_channel->AsyncUnaryCall(kEcho, &answered_context, &request, &answered_response,
                              [&dropped, keep = std::move(channel)](Status) mutable {
                                keep.reset();  // the last reference
                                dropped.store(true);
                              });
  while (!dropped.load()) std::this_thread::yield();
  // The server's loop thread would race the exit just like a teardown nobody waits for (it
  // reads MonotonicClock's function-local static: "pure virtual method called").
  server.reset();
  std::exit(0);
}

TEST(Channel_InFlightDeathTest, ExitWaitsForATeardownStartedInsideACallback) {
  // The last reference dropped inside a callback hands the channel to a thread of its own.
  // When the process exits right after, that teardown (which cancels the channel's other
  // calls and runs their callbacks) must finish before the process goes, not race its static
  // destructors: the silent call's CANCELLED callback runs during exit().
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitRightAfterDroppingAChannelInItsCallback(), ::testing::ExitedWithCode(0),
              "silent call ended: CANCELLED");
}

TEST(Channel_InFlight, TryCancelFromACallbackOfTheSameChannel) {
  // A completion callback runs on the channel's transport thread, where aborting a call
  // completes it inline: cancelling a sibling call from there must neither deadlock on the
  // sibling's context nor touch it after its completion ran.
  for (bool blocking_sibling : {false, true}) {
    SCOPED_TRACE(blocking_sibling ? "blocking sibling" : "async sibling");
    RawSocket raw;
    FakeServer server(EchoAnswer);
    // Round-robin: the first call goes to the silent socket, the second to the server.
    auto channel = CreateCustomChannel("ipv4:" + raw.target() + "," + server.target(),
                                       InsecureChannelCredentials(), QuietArgs());
    auto sibling_context = std::make_unique<ClientContext>();
    ClientContext* sibling = sibling_context.get();
    StringValue request = Text("x"), sibling_response, response;
    absl::Notification sibling_done;
    Status sibling_status;
    std::thread blocking_caller;
    if (blocking_sibling) {
      blocking_caller = std::thread([&] {
        sibling_status = channel->BlockingUnaryCall(kEcho, sibling, request, &sibling_response);
        sibling_done.Notify();
      });
    } else {
      channel->AsyncUnaryCall(kEcho, sibling, &request, &sibling_response, [&](Status s) {
        sibling_status = std::move(s);
        sibling_context.reset();  // allowed: its call is complete
        sibling_done.Notify();
      });
    }
    ASSERT_TRUE(raw.WaitForRequest().has_value());
    ClientContext context;
    absl::Notification done;
    channel->AsyncUnaryCall(kEcho, &context, &request, &response, [&](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      sibling->TryCancel();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
    ASSERT_TRUE(sibling_done.WaitForNotificationWithTimeout(kGenerous));
    if (blocking_caller.joinable()) blocking_caller.join();
    EXPECT_EQ(sibling_status.error_code(), StatusCode::CANCELLED) << sibling_status.ToString();
    EXPECT_TRUE(raw.WaitFor([](const SeenEnvelope& e) { return e.kind == EnvelopeKind::kCancel; },
                            kGenerous)
                    .has_value());
  }
}

TEST(Channel_InFlight, BlockingCallInsideACallbackOfTheSameChannelIsRefused) {
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext outer;
  StringValue request = Text("x"), response;
  absl::Notification done;
  Status inner_status;
  channel->AsyncUnaryCall(kEcho, &outer, &request, &response, [&](Status) {
    ClientContext inner;
    StringValue inner_response;
    inner_status = channel->BlockingUnaryCall(kEcho, &inner, request, &inner_response);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(inner_status.error_code(), StatusCode::FAILED_PRECONDITION);
}

// The calling thread's name ("hrpc-loop0", "hrpc-worker", ...).
std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// A request whose echo is a response larger than kOffloadBytes.
StringValue LargeText() { return Text(std::string(internal::kOffloadBytes + 1000, 'L')); }

TEST(Channel_LargeResponse, AsyncCallCompletesOnTheCompletionWorkerNotTheLoop) {
  // Parsing a response of megabytes on the loop would hold up the socket's other calls: above
  // kOffloadBytes the parse and the callback run on the channel's completion worker.
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  for (bool large : {false, true, true, false}) {
    SCOPED_TRACE(large ? "large" : "small");
    ClientContext context;
    StringValue request = large ? LargeText() : Text("x"), response;
    absl::Notification done;
    Status status;
    std::string thread;
    channel->AsyncUnaryCall(kEcho, &context, &request, &response, [&](Status s) {
      status = std::move(s);
      thread = ThreadName();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(response.value(), "echo:" + request.value());
    if (large) {
      EXPECT_EQ(thread, "hrpc-worker");
    } else {
      EXPECT_THAT(thread, StartsWith("hrpc-loop"));
    }
  }
}

TEST(Channel_LargeResponse, BlockingCallInsideALargeResponsesCallbackWorks) {
  // The completion worker is not the loop: a blocking call made there is served.
  FakeServer server(EchoAnswer);
  auto channel = CreateCustomChannel(server.target(), InsecureChannelCredentials(), QuietArgs());
  ClientContext outer;
  StringValue request = LargeText(), response;
  absl::Notification done;
  Status inner_status;
  StringValue inner_response;
  channel->AsyncUnaryCall(kEcho, &outer, &request, &response, [&](Status) {
    ClientContext inner;
    inner_status = channel->BlockingUnaryCall(kEcho, &inner, Text("y"), &inner_response);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_TRUE(inner_status.ok()) << inner_status.ToString();
  EXPECT_EQ(inner_response.value(), "echo:y");
}

// A channel round-robin over a silent socket and an echo server: StartSilent() sends a small
// call to the silent one (never answered) and waits until it is there; StartLarge() then
// sends a large call, which goes to the server. Both calls' state is declared before the
// channel, which cancels the silent call (and runs its callback) when it goes.
struct SilentThenAnswered {
  RawSocket raw;
  FakeServer server{EchoAnswer};
  ClientContext silent_context, large_context;
  StringValue small = Text("x"), silent_response;
  StringValue large = LargeText(), large_response;
  absl::Notification silent_done;
  Status silent_status;
  std::atomic<int> silent_runs{0};
  std::shared_ptr<Channel> channel = CreateCustomChannel(
      "ipv4:" + raw.target() + "," + server.target(), InsecureChannelCredentials(), QuietArgs());

  bool StartSilent() {
    channel->AsyncUnaryCall(kEcho, &silent_context, &small, &silent_response, [this](Status s) {
      silent_status = std::move(s);
      silent_runs.fetch_add(1);
      silent_done.Notify();
    });
    return raw.WaitForRequest().has_value();
  }
  // `on` is the channel (the callback may already own the reference `channel` held).
  void StartLarge(Channel* on, std::function<void(Status)> done) {
    on->AsyncUnaryCall(kEcho, &large_context, &large, &large_response, std::move(done));
  }
};

TEST(Channel_LargeResponse, LastReferenceDroppedInsideALargeResponsesCallback) {
  // As LastReferenceDroppedInsideACallback, on the completion worker, which the channel's
  // destruction joins: it must happen elsewhere, and still cancel the silent call.
  SilentThenAnswered t;
  ASSERT_TRUE(t.StartSilent());
  absl::Notification answered;
  Channel* channel = t.channel.get();
  t.StartLarge(channel, [&answered, keep = std::move(t.channel)](Status s) mutable {
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(ThreadName(), "hrpc-worker");
    keep.reset();  // the last reference, on the worker
    answered.Notify();
  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kGenerous));
  ASSERT_TRUE(t.silent_done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(t.silent_status.error_code(), StatusCode::CANCELLED);
  EXPECT_EQ(t.silent_runs.load(), 1);
  EXPECT_EQ(t.large_response.value(), "echo:" + t.large.value());
}

TEST(Channel_LargeResponse, TryCancelFromALargeResponsesCallback) {
  // A sibling cancelled from the completion worker ends CANCELLED, once.
  SilentThenAnswered t;
  ASSERT_TRUE(t.StartSilent());
  absl::Notification answered;
  t.StartLarge(t.channel.get(), [&](Status s) {
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(ThreadName(), "hrpc-worker");
    t.silent_context.TryCancel();
    answered.Notify();
  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kGenerous));
  ASSERT_TRUE(t.silent_done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_EQ(t.silent_status.error_code(), StatusCode::CANCELLED);
  t.channel.reset();  // nothing runs twice, also at teardown
  EXPECT_EQ(t.silent_runs.load(), 1);
}

}  // namespace
}  // namespace homarpc
