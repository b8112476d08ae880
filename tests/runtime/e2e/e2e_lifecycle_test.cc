// End-to-end lifecycle of calls and servers (issue 3's table), on every wire (e2e_env.h):
// deadlines (DEADLINE_EXCEEDED, and the server's IsCancelled() turns true), TryCancel
// (CANCELLED, likewise), UNAVAILABLE where nothing listens within the configured time, and a
// server shutting down with calls in flight (they finish, new calls are refused UNAVAILABLE).
// Each through the blocking and the callback stub, against sync and callback services.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/runtime/e2e/e2e_env.h"

namespace homarpc::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::system_clock;

class Lifecycle : public E2eTest {
 protected:
  // Starts one call on a thread of its own (a blocking call blocks it; a callback call waits
  // there for on_done). Join() returns its status.
  class Background {
   public:
    Background(Api api, EchoService::Stub* stub, ClientContext* context, EchoRequest request)
        : request_(std::move(request)) {
      thread_ =
          std::thread([=, this] { status_ = Call(api, stub, context, request_, &response_); });
    }
    ~Background() {
      if (thread_.joinable()) thread_.join();
    }
    Status Join() {
      thread_.join();
      return status_;
    }
    const EchoResponse& response() const { return response_; }

   private:
    EchoRequest request_;
    EchoResponse response_;
    Status status_;
    std::thread thread_;
  };

  Status Plain(EchoService::Stub* stub, const std::string& payload = "plain") {
    ClientContext context;
    EchoRequest request;
    request.set_payload(payload);
    EchoResponse response;
    Status s = stub->Echo(&context, request, &response);
    if (s.ok() && response.payload() != payload) {
      ADD_FAILURE() << "wrong payload back";
    }
    return s;
  }
};

INSTANTIATE_TEST_SUITE_P(Wires, Lifecycle, ::testing::ValuesIn(Ipv4Envs()), EnvName);

// One call with a 300 ms deadline that the server holds until it sees the call cancelled:
// `finish_on_cancel` = a callback handler that only its reactor's OnCancel() finishes;
// otherwise the handler polls IsCancelled().
void ExpectDeadlineExceededAndSeen(Api api, EchoService::Stub* stub, ServerKind kind,
                                   bool finish_on_cancel, Recorder* recorder,
                                   const std::string& tag) {
  ClientContext context;
  context.set_deadline(system_clock::now() + milliseconds(300));
  EchoRequest request;
  request.set_tag(tag);
  if (finish_on_cancel) {
    request.set_finish_on_cancel(true);
  } else {
    request.set_wait_for_cancel(true);
  }
  EchoResponse response;
  Status s = E2eTest::Call(api, stub, &context, request, &response);
  EXPECT_EQ(s.error_code(), StatusCode::DEADLINE_EXCEEDED) << Describe(s);
  // 10 s after a 300 ms deadline: generous, and a missing OnCancel fails in bounded time.
  ASSERT_TRUE(recorder->WaitFor(tag, "cancelled", 1, absl::Seconds(10)))
      << (finish_on_cancel ? "OnCancel() never ran" : "the server never saw IsCancelled()");
  if (finish_on_cancel) {
    EXPECT_EQ(recorder->Count(tag, "on_cancel"), 1);
  }
  if (kind == ServerKind::kCallback) {
    ASSERT_TRUE(recorder->WaitFor(tag, "done"));
    EXPECT_EQ(recorder->Count(tag, "done"), 1);
  }
}

TEST_P(Lifecycle, DeadlinePassingIsDeadlineExceededAndTheServerSeesItCancelled) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      ExpectDeadlineExceededAndSeen(api, stub.get(), kind, /*finish_on_cancel=*/false, &recorder_,
                                    NewTag("deadline"));
      if (HasFatalFailure()) return;
    }
    EXPECT_TRUE(Plain(stub.get()).ok());
  }
}

// server_context.h: OnCancel() runs when the call is cancelled first, "client cancel or
// deadline" — so a reactor waiting for OnCancel is finished when the deadline passes, without
// the handler polling anything.
TEST_P(Lifecycle, DeadlinePassingRunsTheReactorsOnCancel) {
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    ExpectDeadlineExceededAndSeen(api, stub.get(), ServerKind::kCallback,
                                  /*finish_on_cancel=*/true, &recorder_, NewTag("on-cancel"));
    if (HasFatalFailure()) return;
  }
  EXPECT_TRUE(Plain(stub.get()).ok());
}

TEST_P(Lifecycle, ServerSeesTheClientsDeadline) {
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    ClientContext with;
    with.set_timeout(seconds(20));
    EchoRequest request;
    EchoResponse response;
    Status s = Call(api, stub.get(), &with, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_TRUE(response.has_deadline());
    EXPECT_GT(response.deadline_remaining_ms(), 0);
    EXPECT_LE(response.deadline_remaining_ms(), 20000);
    ClientContext without;
    s = Call(api, stub.get(), &without, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_FALSE(response.has_deadline());
  }
}

TEST_P(Lifecycle, DeadlineAlreadyPassedFailsWithoutRunningTheHandler) {
  Server* server = StartServer(ServerKind::kSync);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    const std::string tag = NewTag("expired");
    ClientContext context;
    context.set_deadline(system_clock::now() - seconds(1));
    EchoRequest request;
    request.set_tag(tag);
    EchoResponse response;
    Status s = Call(api, stub.get(), &context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::DEADLINE_EXCEEDED) << Describe(s);
    EXPECT_TRUE(Plain(stub.get()).ok());
    EXPECT_EQ(recorder_.Count(tag, "ran"), 0);
  }
}

TEST_P(Lifecycle, TryCancelIsCancelledAndTheServerSeesItCancelled) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      for (bool on_cancel : {false, true}) {
        if (on_cancel && kind == ServerKind::kSync) continue;
        SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api), on_cancel ? ", OnCancel" : ""));
        const std::string tag = NewTag("cancel");
        ClientContext context;
        EchoRequest request;
        request.set_tag(tag);
        (on_cancel ? request.set_finish_on_cancel(true) : request.set_wait_for_cancel(true));
        Background call(api, stub.get(), &context, request);
        ASSERT_TRUE(recorder_.WaitFor(tag, "started"));
        context.TryCancel();
        Status s = call.Join();
        EXPECT_EQ(s.error_code(), StatusCode::CANCELLED) << Describe(s);
        ASSERT_TRUE(recorder_.WaitFor(tag, "cancelled")) << "the server never saw IsCancelled()";
        if (on_cancel) {
          EXPECT_EQ(recorder_.Count(tag, "on_cancel"), 1);
        }
        context.TryCancel();  // after the call: harmless
      }
    }
    EXPECT_TRUE(Plain(stub.get()).ok());
  }
}

// TryCancel of a blocking call from inside a completion callback of the same channel (on its
// loop thread), while the call is driven on another thread: the cancel completes under the
// context's mutex, so the caller cannot return (and free the call) half-way through it.
TEST_P(Lifecycle, TryCancelOfABlockingCallFromAnotherCallsCallback) {
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string tag = NewTag("cancel-from-callback");
    ClientContext blocked;
    EchoRequest held;
    held.set_tag(tag);
    held.set_wait_for_cancel(true);
    Background call(Api::kBlocking, stub.get(), &blocked, held);
    ASSERT_TRUE(recorder_.WaitFor(tag, "started"));
    ClientContext context;
    EchoRequest request;
    EchoResponse response;
    absl::Notification done;
    stub->async()->Echo(&context, &request, &response, [&](Status) {
      blocked.TryCancel();  // on the channel's loop thread
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(120)));
    Status s = call.Join();
    EXPECT_EQ(s.error_code(), StatusCode::CANCELLED) << Describe(s);
    ASSERT_TRUE(recorder_.WaitFor(tag, "cancelled")) << "the server never saw IsCancelled()";
  }
}

TEST_P(Lifecycle, ServerTryCancelIsCancelledForTheCaller) {
  for (ServerKind kind : kServerKinds) {
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(Name(kind), ", ", Name(api)));
      const std::string tag = NewTag("server-cancel");
      ClientContext context;
      EchoRequest request;
      request.set_tag(tag);
      request.set_server_try_cancel(true);
      request.set_payload("dropped");
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::CANCELLED) << Describe(s);
      // The caller may hear before the handler goes on to record what it saw.
      EXPECT_TRUE(recorder_.WaitFor(tag, "cancelled")) << "IsCancelled() after TryCancel()";
    }
    EXPECT_TRUE(Plain(stub.get()).ok());
  }
}

TEST_P(Lifecycle, TryCancelBeforeTheCallFailsCancelledAndSendsNothing) {
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server);
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    const std::string tag = NewTag("cancelled-early");
    ClientContext context;
    context.TryCancel();
    EchoRequest request;
    request.set_tag(tag);
    EchoResponse response;
    Status s = Call(api, stub.get(), &context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::CANCELLED) << Describe(s);
    EXPECT_TRUE(Plain(stub.get()).ok());
    EXPECT_EQ(recorder_.Count(tag, "ran"), 0);
  }
}

TEST_P(Lifecycle, NothingListeningIsUnavailableWithinTheConfiguredTime) {
  ChannelArguments quick;
  quick.SetInt(kArgUnavailableTimeoutMs, 50);
  auto stub = EchoService::NewStub(NewChannel(env_->UnusedTarget(), quick));
  for (Api api : kApis) {
    SCOPED_TRACE(Name(api));
    ClientContext context;
    // Far beyond 50 ms: failing UNAVAILABLE (not DEADLINE_EXCEEDED) shows the bound held.
    context.set_timeout(seconds(20));
    EchoRequest request;
    request.set_payload("anyone?");
    EchoResponse response;
    Status s = Call(api, stub.get(), &context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE) << Describe(s);
  }
  if (env_->network() != nullptr) {
    // The bound is the channel's setting: with 10 s, a 200 ms deadline comes first. (Only on
    // the fabric: over UDP the kernel may refuse at once, whatever the setting.)
    auto patient = EchoService::NewStub(NewChannel(env_->UnusedTarget(), GuardedArgs()));
    ClientContext context;
    context.set_timeout(milliseconds(200));
    EchoRequest request;
    EchoResponse response;
    Status s = patient->Echo(&context, request, &response);
    EXPECT_EQ(s.error_code(), StatusCode::DEADLINE_EXCEEDED) << Describe(s);
  }
}

TEST_P(Lifecycle, TargetThatDoesNotParseIsUnavailable) {
  for (const char* target : {"ipv4:not-an-address", "ipv6:[::1]", "unix:/tmp/socket"}) {
    std::shared_ptr<Channel> channel = NewChannel(target);
    auto stub = EchoService::NewStub(channel);
    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat(target, ", ", Name(api)));
      ClientContext context;
      EchoRequest request;
      EchoResponse response;
      Status s = Call(api, stub.get(), &context, request, &response);
      EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE) << Describe(s);
    }
  }
}

TEST_P(Lifecycle, DroppingTheLastChannelReferenceFailsCallsInFlightCancelled) {
  Server* server = StartServer(ServerKind::kCallback);
  ASSERT_NE(server, nullptr);
  // Not through NewChannel(): the fixture would keep a reference.
  auto stub = EchoService::NewStub(env_->NewChannel(TargetOf(server), GuardedArgs()));
  const std::string tag = NewTag("orphaned");
  ClientContext context;
  EchoRequest request;
  request.set_tag(tag);
  request.set_hold_until_released(true);
  EchoResponse response;
  absl::Notification done;
  Status status;
  stub->async()->Echo(&context, &request, &response, [&](Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(recorder_.WaitFor(tag, "started"));
  stub.reset();  // the last reference to the channel
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(status.error_code(), StatusCode::CANCELLED) << Describe(status);
  recorder_.Release(tag);
}

TEST_P(Lifecycle, ShutdownFinishesCallsInFlightAndRefusesNewOnes) {
  for (ServerKind kind : kServerKinds) {
    SCOPED_TRACE(Name(kind));
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    const std::string target = TargetOf(server);
    auto stub = NewStub(server);
    // Held calls, one per API, answered only once the test releases them.
    const std::string tag = NewTag("held");
    std::vector<std::unique_ptr<ClientContext>> contexts;
    std::vector<std::unique_ptr<Background>> held;
    for (Api api : kApis) {
      contexts.push_back(std::make_unique<ClientContext>());
      EchoRequest request;
      request.set_tag(tag);
      request.set_hold_until_released(true);
      request.set_payload(absl::StrCat("held ", Name(api)));
      held.push_back(std::make_unique<Background>(api, stub.get(), contexts.back().get(), request));
    }
    ASSERT_TRUE(recorder_.WaitFor(tag, "started", 2));

    absl::Notification waited;
    std::thread waiter([&] {
      server->Wait();
      waited.Notify();
    });
    std::thread shutdown([&] { server->Shutdown(); });
    // New calls are refused UNAVAILABLE once the shutdown has begun (until then they work).
    Status s;
    const auto guard = system_clock::now() + seconds(30);
    do {
      s = Plain(stub.get());
      ASSERT_TRUE(s.ok() || s.error_code() == StatusCode::UNAVAILABLE) << Describe(s);
    } while (s.ok() && system_clock::now() < guard);
    EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE) << Describe(s);
    EXPECT_FALSE(waited.HasBeenNotified());

    // The calls in flight finish normally.
    recorder_.Release(tag);
    for (size_t i = 0; i < held.size(); ++i) {
      Status hs = held[i]->Join();
      EXPECT_TRUE(hs.ok()) << Describe(hs);
      EXPECT_EQ(held[i]->response().payload(), absl::StrCat("held ", Name(kApis[i])));
    }
    shutdown.join();
    ASSERT_TRUE(waited.WaitForNotificationWithTimeout(kGuard));
    waiter.join();

    // Later calls: nothing listens there any more.
    ChannelArguments quick;
    quick.SetInt(kArgUnavailableTimeoutMs, 100);
    auto later = EchoService::NewStub(NewChannel(target, quick));
    for (Api api : kApis) {
      ClientContext context;
      context.set_timeout(seconds(20));
      EchoRequest request;
      EchoResponse response;
      Status ls = Call(api, later.get(), &context, request, &response);
      EXPECT_EQ(ls.error_code(), StatusCode::UNAVAILABLE) << Describe(ls);
    }
    server->Shutdown();  // again: returns at once
  }
}

TEST_P(Lifecycle, ShutdownDeadlineCancelsCallsStillRunning) {
  for (ServerKind kind : kServerKinds) {
    SCOPED_TRACE(Name(kind));
    Server* server = StartServer(kind);
    ASSERT_NE(server, nullptr);
    auto stub = NewStub(server);
    const std::string tag = NewTag("straggler");
    std::vector<std::unique_ptr<ClientContext>> contexts;
    std::vector<std::unique_ptr<Background>> held;
    for (Api api : kApis) {
      contexts.push_back(std::make_unique<ClientContext>());
      EchoRequest request;
      request.set_tag(tag);
      request.set_hold_until_released(true);  // never released
      held.push_back(std::make_unique<Background>(api, stub.get(), contexts.back().get(), request));
    }
    ASSERT_TRUE(recorder_.WaitFor(tag, "started", 2));
    server->Shutdown(system_clock::now() + milliseconds(200));
    // Shutdown returned: the handlers have returned, having seen IsCancelled().
    EXPECT_EQ(recorder_.Count(tag, "cancelled"), 2);
    for (auto& call : held) {
      Status s = call->Join();
      EXPECT_TRUE(s.error_code() == StatusCode::CANCELLED ||
                  s.error_code() == StatusCode::UNAVAILABLE)
          << Describe(s);
    }
  }
}

}  // namespace
}  // namespace homarpc::e2e
