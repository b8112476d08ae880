// End-to-end: large messages are handled off the transport loop (runtime/server_impl.h,
// kOffloadBytes). A callback handler for a request above kOffloadBytes runs on a worker of the
// server's pool, so the loop keeps serving small calls while it works; a response above it,
// finished on the loop, is serialized on a worker. With the inline executor everything stays on
// the loop, as the application asked. Bytes arrive intact either way.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "runtime/server_impl.h"
#include "tests/runtime/e2e/e2e_env.h"

namespace homarpc::e2e {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return s;
}

// Records the thread each handler ran on; a request tagged "hold" waits for release().
class ThreadRecordingService final : public EchoService::CallbackService {
 public:
  ServerUnaryReactor* Echo(CallbackServerContext* context, const EchoRequest* request,
                           EchoResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      (request->payload().size() > internal::kOffloadBytes ? large_thread_ : small_thread_) =
          std::this_thread::get_id();
    }
    if (request->tag() == "hold") release_.WaitForNotificationWithTimeout(absl::Seconds(60));
    if (request->response_bytes() > 0) {
      response->set_payload(Pattern(request->response_bytes(), 7));
    } else {
      response->set_payload(request->payload());
    }
    ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(Status::OK);
    return reactor;
  }

  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }
  std::thread::id small_thread() {
    absl::MutexLock lock(&mu_);
    return small_thread_;
  }
  std::thread::id large_thread() {
    absl::MutexLock lock(&mu_);
    return large_thread_;
  }

 private:
  absl::Notification release_;
  absl::Mutex mu_;
  std::thread::id small_thread_ ABSL_GUARDED_BY(mu_);
  std::thread::id large_thread_ ABSL_GUARDED_BY(mu_);
};

class Offload : public ::testing::TestWithParam<EnvParam> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<E2eEnv>> env = E2eEnv::Create(GetParam());
    if (!env.ok()) GTEST_SKIP() << env.status().message();
    env_ = *std::move(env);
  }
  void TearDown() override {
    service_.Release();
    if (server_ != nullptr) server_->Shutdown();
    stub_.reset();
    channel_.reset();
    server_.reset();
  }

  void Start(ServerExecutor executor) {
    ServerBuilder builder;
    int port = 0;
    env_->ConfigureServer(&builder, &port);
    builder.RegisterService(&service_);
    builder.SetExecutor(executor);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.SetMaxSendMessageSize(64 << 20);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ChannelArguments args = GuardedArgs();
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = env_->NewChannel(server_->listening_addresses().at(0), args);
    stub_ = EchoService::NewStub(channel_);
  }

  Status Echo(const EchoRequest& request, EchoResponse* response) {
    ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Echo(&context, request, response);
  }

  ThreadRecordingService service_;
  std::unique_ptr<E2eEnv> env_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<Channel> channel_;
  std::unique_ptr<EchoService::Stub> stub_;
};

TEST_P(Offload, LargeRequestRunsOnAWorkerWhileTheLoopServesSmallCalls) {
  Start(ServerExecutor::kWorkerPool);
  // A large request whose handler holds its worker until released.
  EchoRequest large;
  large.set_tag("hold");
  large.set_payload(Pattern(internal::kOffloadBytes + 1000, 3));
  EchoResponse large_response;
  Status large_status;
  std::thread large_call([&] { large_status = Echo(large, &large_response); });
  // Wait (bounded) until the large handler is running, then make small calls: they complete
  // although the large one is still held, so the loop is not the thread holding it.
  for (int i = 0; i < 6000 && service_.large_thread() == std::thread::id(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(service_.large_thread(), std::thread::id()) << "the large handler never ran";
  for (int i = 0; i < 3; ++i) {
    EchoRequest small;
    small.set_payload(Pattern(100, i));
    EchoResponse small_response;
    ASSERT_TRUE(Echo(small, &small_response).ok());
    EXPECT_EQ(small_response.payload(), small.payload());
  }
  EXPECT_NE(service_.small_thread(), service_.large_thread());
  service_.Release();
  large_call.join();
  ASSERT_TRUE(large_status.ok()) << large_status.error_message();
  EXPECT_EQ(large_response.payload(), large.payload());
}

TEST_P(Offload, LargeResponseFinishedOnTheLoopArrivesIntact) {
  Start(ServerExecutor::kWorkerPool);
  EchoRequest request;
  request.set_payload("small request, large answer");
  request.set_response_bytes(3 * internal::kOffloadBytes);
  EchoResponse response;
  ASSERT_TRUE(Echo(request, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(3 * internal::kOffloadBytes, 7));
}

TEST_P(Offload, InlineExecutorKeepsLargeMessagesOnTheLoop) {
  Start(ServerExecutor::kInline);
  EchoRequest small;
  small.set_payload("x");
  EchoResponse response;
  ASSERT_TRUE(Echo(small, &response).ok());
  EchoRequest large;
  large.set_payload(Pattern(internal::kOffloadBytes + 1, 5));
  large.set_response_bytes(2 * internal::kOffloadBytes);
  ASSERT_TRUE(Echo(large, &response).ok());
  EXPECT_EQ(response.payload(), Pattern(2 * internal::kOffloadBytes, 7));
  // One loop, inline handlers: both ran on the same (loop) thread.
  EXPECT_EQ(service_.small_thread(), service_.large_thread());
}

INSTANTIATE_TEST_SUITE_P(Wires, Offload, ::testing::ValuesIn(Ipv4Envs()), EnvName);

}  // namespace
}  // namespace homarpc::e2e
