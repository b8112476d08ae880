// End-to-end tests of the zero-copy send path (runtime/payload_encoder.h) on every wire
// (e2e_env.h), against a sync Service and a CallbackService: blocking calls whose request
// serializes to kZeroCopyMinBytes or more borrow its large fields and return only once the
// transport has released them, so the caller may free or overwrite the request right after
// the call returns (under ASan a later read by the transport is reported); callback calls
// copy, so their request may go as soon as the call has started; large responses (sent
// zero-copy from a response moved out of the call) arrive intact, also from a callback
// handler finished on another thread, and a non-OK status sends no payload at all; calls that
// end by deadline or cancellation also release their request; a lossy fabric makes the
// transport resend from the borrowed bytes.
//
// Blocking calls run on a helper thread that the test waits for within the guard: a request
// the transport never released would block the call forever.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/payload_encoder.h"
#include "tests/runtime/e2e/e2e_env.h"

namespace homarpc::e2e {
namespace {

using internal::kZeroCopyMinBytes;

// Where two byte strings first differ, for failure messages ("" when equal).
std::string Difference(const std::string& got, const std::string& want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return absl::StrCat("got ", got.size(), " bytes, want ", want.size(), "; first difference at ",
                      i);
}

// A blocking call through `stub`, on a helper thread, that must return within the guard.
Status GuardedBlocking(EchoService::Stub* stub, ClientContext* context, const EchoRequest& request,
                       EchoResponse* response) {
  Status status;
  absl::Notification done;
  std::thread caller([&] {
    status = stub->Echo(context, request, response);
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(kGuard)) {
    ADD_FAILURE() << "a blocking call did not return within the guard (request never released?)";
    std::abort();  // the call still uses the caller's objects: nothing safe is left to do
  }
  caller.join();
  return status;
}

// A callback call's outcome, waited for within the guard.
class Outcome {
 public:
  std::function<void(Status)> Callback() {
    return [this](Status s) {
      status_ = std::move(s);
      done_.Notify();
    };
  }
  Status Wait() {
    if (!done_.WaitForNotificationWithTimeout(kGuard)) {
      ADD_FAILURE() << "a callback call did not complete within the guard";
      std::abort();
    }
    return status_;
  }

 private:
  absl::Notification done_;
  Status status_;
};

// A payload size whose EchoRequest (payload + call_id) serializes to exactly `bytes`.
size_t PayloadForRequestSize(size_t bytes, uint64_t call_id) {
  EchoRequest probe;
  probe.set_call_id(call_id);
  size_t n = bytes;
  for (;;) {
    probe.set_payload(std::string(n, 'x'));
    const size_t size = probe.ByteSizeLong();
    if (size == bytes) return n;
    n -= size - bytes;  // only ever too long (the tag and length add bytes)
  }
}

class ZeroCopy : public E2eTest {};

INSTANTIATE_TEST_SUITE_P(Wires, ZeroCopy, ::testing::ValuesIn(Ipv4Envs()), EnvName);
INSTANTIATE_TEST_SUITE_P(Ipv6Wires, ZeroCopy, ::testing::ValuesIn(Ipv6Envs()), EnvName);

TEST_P(ZeroCopy, BlockingEchoOfLargePayloadsArrivesIntact) {
  // Sizes around the threshold (one byte below: copied; at it: borrowed) and far above; the
  // echo is as large, so the response crosses its threshold too.
  std::vector<size_t> sizes = {PayloadForRequestSize(kZeroCopyMinBytes - 1, 1),
                               PayloadForRequestSize(kZeroCopyMinBytes, 2), 64 * 1024, 1 << 20,
                               3 * (1 << 20) + 17};
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    uint64_t id = 0;
    for (size_t size : sizes) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", payload of ", size, " bytes"));
      ClientContext context;
      EchoRequest request;
      request.set_call_id(++id);
      request.set_payload(Pattern(size, id));
      EchoResponse response;
      Status s = GuardedBlocking(stub.get(), &context, request, &response);
      ASSERT_TRUE(s.ok()) << Describe(s);
      EXPECT_EQ(Difference(response.payload(), request.payload()), "");
      EXPECT_EQ(response.call_id(), id);
      // The request is untouched by the call.
      EXPECT_EQ(Difference(request.payload(), Pattern(size, id)), "");
    }
  }
}

TEST_P(ZeroCopy, RequestMayBeFreedOrOverwrittenRightAfterTheCallReturns) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    const size_t sizes[] = {64 * 1024, 200000, (1 << 20) + 3};
    // Kept alive but overwritten right after each call: any later send from it would carry
    // the wrong bytes into a later echo.
    EchoRequest reused;
    for (int i = 0; i < 24; ++i) {
      const size_t size = sizes[i % 3];
      SCOPED_TRACE(absl::StrCat(Name(kind), ", call ", i, ", ", size, " bytes"));
      const std::string want = Pattern(size, 100 + i);
      ClientContext context;
      EchoResponse response;
      Status s;
      if (i % 2 == 0) {
        // Freed right after the call: under ASan any later read by the transport is reported.
        auto request = std::make_unique<EchoRequest>();
        request->set_call_id(i);
        request->set_payload(want);
        s = GuardedBlocking(stub.get(), &context, *request, &response);
        request.reset();
      } else {
        reused.set_call_id(i);
        reused.set_payload(want);
        s = GuardedBlocking(stub.get(), &context, reused, &response);
        // Overwrite in place (the storage stays where the transport borrowed it) and then
        // replace it altogether.
        std::string* bytes = reused.mutable_payload();
        std::fill(bytes->begin(), bytes->end(), '\xEE');
        reused.set_payload(Pattern(size / 2, 999));
      }
      ASSERT_TRUE(s.ok()) << Describe(s);
      ASSERT_EQ(Difference(response.payload(), want), "");
      EXPECT_EQ(response.call_id(), static_cast<uint64_t>(i));
    }
  }
}

TEST_P(ZeroCopy, ConcurrentBlockingCallsEachReleaseTheirOwnRequest) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    constexpr int kThreads = 4;
    constexpr int kCalls = 6;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kCalls; ++i) {
          const size_t size = 70000 + static_cast<size_t>(t) * 40000 + static_cast<size_t>(i);
          const std::string want = Pattern(size, t * 100 + i);
          auto request = std::make_unique<EchoRequest>();
          request->set_payload(want);
          request->set_call_id(static_cast<uint64_t>(t * 100 + i));
          ClientContext context;
          EchoResponse response;
          Status s = stub->Echo(&context, *request, &response);
          request.reset();  // ASan: nothing may read it any more
          if (!s.ok() || response.payload() != want) {
            ADD_FAILURE() << Name(kind) << ", thread " << t << ", call " << i << ": " << Describe(s)
                          << " " << Difference(response.payload(), want);
            failures.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
  }
}

TEST_P(ZeroCopy, CallbackRequestMayBeDroppedRightAfterTheCallStarts) {
  // The callback API copies the request: it may be freed, or overwritten, as soon as the
  // call has started.
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (size_t size : {size_t{64 * 1024}, size_t{1} << 20, size_t{3 * (1 << 20) + 17}}) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", size, " bytes"));
      const std::string want = Pattern(size, size);
      {  // Freed.
        ClientContext context;
        EchoResponse response;
        Outcome outcome;
        auto request = std::make_unique<EchoRequest>();
        request->set_payload(want);
        stub->async()->Echo(&context, request.get(), &response, outcome.Callback());
        request.reset();
        Status s = outcome.Wait();
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_EQ(Difference(response.payload(), want), "");
      }
      {  // Overwritten in place: a borrowing transport would send these bytes.
        ClientContext context;
        EchoResponse response;
        Outcome outcome;
        EchoRequest request;
        request.set_payload(want);
        stub->async()->Echo(&context, &request, &response, outcome.Callback());
        std::string* bytes = request.mutable_payload();
        std::fill(bytes->begin(), bytes->end(), '\x5A');
        Status s = outcome.Wait();
        ASSERT_TRUE(s.ok()) << Describe(s);
        EXPECT_EQ(Difference(response.payload(), want), "");
      }
    }
  }
}

TEST_P(ZeroCopy, LargeResponseFinishedFromAnotherThreadArrivesIntact) {
  // The callback service holds the call and finishes it from a helper thread once released
  // (test_services.cc): the response is filled and sent zero-copy from that thread.
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (size_t size : {size_t{64 * 1024}, size_t{1} << 20, size_t{3 * (1 << 20) + 17}}) {
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(api), ", ", size, " bytes"));
      const std::string tag = NewTag("held");
      const std::string want = Pattern(size, size + 1);
      EchoRequest request;
      request.set_payload(want);
      request.set_tag(tag);
      request.set_hold_until_released(true);
      ClientContext context;
      EchoResponse response;
      Status s;
      if (api == Api::kCallback) {
        Outcome outcome;
        stub->async()->Echo(&context, &request, &response, outcome.Callback());
        ASSERT_TRUE(recorder_.WaitFor(tag, "started"));
        recorder_.Release(tag);
        s = outcome.Wait();
      } else {
        std::thread releaser([&] {
          if (recorder_.WaitFor(tag, "started")) recorder_.Release(tag);
        });
        s = GuardedBlocking(stub.get(), &context, request, &response);
        releaser.join();
      }
      ASSERT_TRUE(s.ok()) << Describe(s);
      EXPECT_EQ(Difference(response.payload(), want), "");
      EXPECT_EQ(recorder_.Count(tag, "not_cancelled"), 1);
    }
  }
}

TEST_P(ZeroCopy, NonOkStatusWithLargeResponseSendsNoPayload) {
  // The handler fills a 1 MiB response and returns an error: only the status travels. A
  // client that accepts 4 KiB proves it: a 1 MiB payload could not reach it.
  ChannelArguments small = GuardedArgs();
  small.SetMaxReceiveMessageSize(4096);
  const std::string want = Pattern(1 << 20, 77);
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server, small);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      {
        ClientContext context;
        EchoRequest request;
        request.set_payload(want);
        request.set_status_code(static_cast<int>(StatusCode::FAILED_PRECONDITION));
        request.set_status_message("refused, with a large response filled in");
        EchoResponse response;
        Status s = api == Api::kBlocking ? GuardedBlocking(stub.get(), &context, request, &response)
                                         : Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION) << Describe(s);
        EXPECT_EQ(s.error_message(), "refused, with a large response filled in");
        EXPECT_TRUE(response.payload().empty());
      }
      {  // Control: the same response with OK does not fit this client.
        ClientContext context;
        EchoRequest request;
        request.set_payload(want);
        EchoResponse response;
        Status s = api == Api::kBlocking ? GuardedBlocking(stub.get(), &context, request, &response)
                                         : Call(api, stub.get(), &context, request, &response);
        EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
      }
      // The server still serves large echoes.
      ClientContext context;
      EchoRequest request;
      request.set_payload(Pattern(100, 1));
      EchoResponse response;
      ASSERT_TRUE(Call(api, stub.get(), &context, request, &response).ok());
      EXPECT_EQ(response.payload(), request.payload());
    }
  }
}

TEST_P(ZeroCopy, DeadlineAndCancellationReleaseTheRequest) {
  // Calls that end without a response still return (the transport aborts the RPC and
  // releases the request), and the request may then be freed.
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", deadline"));
      const std::string tag = NewTag("deadline");
      auto request = std::make_unique<EchoRequest>();
      request->set_payload(Pattern(1 << 20, 5));
      request->set_tag(tag);
      request->set_hold_until_released(true);
      ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
      EchoResponse response;
      Status s = GuardedBlocking(stub.get(), &context, *request, &response);
      request.reset();
      EXPECT_EQ(s.error_code(), StatusCode::DEADLINE_EXCEEDED) << Describe(s);
      recorder_.Release(tag);
    }
    {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", TryCancel"));
      const std::string tag = NewTag("cancel");
      auto request = std::make_unique<EchoRequest>();
      request->set_payload(Pattern(3 * (1 << 20) + 17, 6));
      request->set_tag(tag);
      request->set_hold_until_released(true);
      ClientContext context;
      EchoResponse response;
      std::thread canceller([&] {
        if (recorder_.WaitFor(tag, "started")) context.TryCancel();
      });
      Status s = GuardedBlocking(stub.get(), &context, *request, &response);
      canceller.join();
      request.reset();
      EXPECT_EQ(s.error_code(), StatusCode::CANCELLED) << Describe(s);
    }
    // Still serving large echoes.
    ClientContext context;
    EchoRequest request;
    request.set_payload(Pattern(1 << 20, 7));
    EchoResponse response;
    Status s = GuardedBlocking(stub.get(), &context, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(Difference(response.payload(), request.payload()), "");
  }
}

// On a fabric that drops packets: the receivers ask for the lost ranges and the senders resend
// them from the borrowed bytes.
class ZeroCopyLossy : public E2eTest {};

INSTANTIATE_TEST_SUITE_P(Fabric, ZeroCopyLossy, ::testing::Values(EnvParam{Wire::kFabric, false}),
                         EnvName);

TEST_P(ZeroCopyLossy, LargeEchoesSurvivePacketLoss) {
  testing::FabricNetworkOptions lossy;
  lossy.fabric.drop_rate = 0.02;
  lossy.fabric.seed = 42;
  absl::StatusOr<std::unique_ptr<E2eEnv>> env = E2eEnv::Create(GetParam(), lossy);
  ASSERT_TRUE(env.ok()) << env.status();
  env_ = std::move(*env);  // nothing was made on the fixture's env yet
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", call ", i));
      const size_t size = i % 2 == 0 ? (1 << 20) + 5 : 300000;
      const std::string want = Pattern(size, 200 + i);
      auto request = std::make_unique<EchoRequest>();
      request->set_payload(want);
      ClientContext context;
      EchoResponse response;
      Status s = GuardedBlocking(stub.get(), &context, *request, &response);
      request.reset();
      ASSERT_TRUE(s.ok()) << Describe(s);
      EXPECT_EQ(Difference(response.payload(), want), "");
    }
  }
  EXPECT_GT(env_->network()->stats().dropped_total(), 0u) << "the fabric dropped nothing";
}

}  // namespace
}  // namespace homarpc::e2e
