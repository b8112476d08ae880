// Tests of runtime/udp_transport.cc, the MessageTransport over Homa/UDP, for what it adds to
// transport::Endpoint: Stop() (message_transport.h) joins the loops, fails client RPCs in
// flight CANCELLED, delivers nothing afterwards, turns later calls into harmless no-ops, and
// is safe while other threads are calling Reply() and SendRequest() (ASan checks that nothing
// touches the destroyed Endpoint). Over UDP loopback; waits are bounded, never timed.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/message_transport.h"
#include "transport/address.h"

namespace homarpc::internal {
namespace {

using transport::Buffer;

constexpr absl::Duration kGuard = absl::Seconds(30);

UdpTransportOptions Options(int silence_ms) {
  UdpTransportOptions options;
  options.endpoint.io.bind_address = transport::Address::Loopback4(0);
  options.endpoint.config.timeout_ticks = static_cast<uint32_t>(silence_ms);  // 1 ms ticks
  return options;
}

// Collects one completion.
struct Result {
  void Set(absl::StatusOr<Buffer> r) {
    absl::MutexLock lock(&mu);
    ++completions;
    status = r.status();
  }
  bool Wait() {
    absl::MutexLock lock(&mu);
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return completions > 0; };
    return mu.AwaitWithTimeout(absl::Condition(&done), kGuard);
  }
  int count() {
    absl::MutexLock lock(&mu);
    return completions;
  }
  MessageTransport::ResponseCallback Callback() {
    return [this](absl::StatusOr<Buffer> r) { Set(std::move(r)); };
  }
  absl::Mutex mu;
  int completions ABSL_GUARDED_BY(mu) = 0;
  absl::Status status ABSL_GUARDED_BY(mu);
};

// A server transport that keeps every request it gets, unanswered.
struct HoldingServer {
  HoldingServer() {
    auto t = CreateUdpTransport(Options(5000), [this](transport::IncomingRequest r) {
      absl::MutexLock lock(&mu);
      held.push_back(std::move(r));
    });
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) transport = std::move(*t);
  }
  bool WaitHeld(size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return held.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), kGuard);
  }
  size_t held_count() {
    absl::MutexLock lock(&mu);
    return held.size();
  }
  absl::Mutex mu;
  std::vector<transport::IncomingRequest> held ABSL_GUARDED_BY(mu);
  std::unique_ptr<MessageTransport> transport;
};

TEST(UdpTransportTest, UdpTransport_StopDeliversNothingMoreAndLaterCallsAreHarmless) {
  HoldingServer server;
  ASSERT_NE(server.transport, nullptr);
  auto client = CreateUdpTransport(Options(30), nullptr);  // 30 ms of silence: UNAVAILABLE
  ASSERT_TRUE(client.ok()) << client.status();
  const transport::Address address = server.transport->local_address();

  Result first;
  (*client)->SendRequest(address, Buffer::CopyOf("first"), first.Callback(), INT64_MAX);
  ASSERT_TRUE(server.WaitHeld(1));

  server.transport->Stop();
  server.transport->Stop();  // idempotent
  EXPECT_EQ(server.transport->local_address(), address);
  EXPECT_EQ(server.transport->live_server_rpcs(), 0u);
  {
    absl::MutexLock lock(&server.mu);
    server.transport->Reply(server.held.front(), Buffer::CopyOf("too late"));  // dropped
  }
  server.transport->Abort(1, absl::CancelledError("nothing to abort"));
  Result refused;
  server.transport->SendRequest(address, Buffer::CopyOf("x"), refused.Callback(), INT64_MAX);
  ASSERT_EQ(refused.count(), 1);  // at once, on this thread
  {
    absl::MutexLock lock(&refused.mu);
    EXPECT_TRUE(absl::IsCancelled(refused.status)) << refused.status;
  }

  // The unanswered call and a later one fail in the client's transport: nobody listens.
  ASSERT_TRUE(first.Wait());
  Result later;
  (*client)->SendRequest(address, Buffer::CopyOf("later"), later.Callback(), INT64_MAX);
  ASSERT_TRUE(later.Wait());
  {
    absl::MutexLock lock(&later.mu);
    EXPECT_TRUE(absl::IsUnavailable(later.status)) << later.status;
  }
  EXPECT_EQ(server.held_count(), 1u);
  EXPECT_EQ(first.count(), 1);
}

TEST(UdpTransportTest, UdpTransport_StopFailsClientRpcsInFlightCancelledBeforeReturning) {
  HoldingServer server;
  ASSERT_NE(server.transport, nullptr);
  auto client = CreateUdpTransport(Options(5000), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<std::unique_ptr<Result>> results;
  for (int i = 0; i < 5; ++i) {
    results.push_back(std::make_unique<Result>());
    (*client)->SendRequest(server.transport->local_address(), Buffer::CopyOf("x"),
                           results.back()->Callback(), INT64_MAX);
  }
  ASSERT_TRUE(server.WaitHeld(5));
  (*client)->Stop();
  for (auto& r : results) {
    ASSERT_EQ(r->count(), 1);  // before Stop() returned
    absl::MutexLock lock(&r->mu);
    EXPECT_TRUE(absl::IsCancelled(r->status)) << r->status;
  }
}

TEST(UdpTransportTest, UdpTransport_StopWhileOtherThreadsReplyAndSend) {
  // Requests pile up in a queue that two threads answer, a third thread sends requests
  // through the server's transport, and Stop() comes in the middle of all of it. Whatever
  // reaches the transport during or after Stop() must not touch the destroyed Endpoint.
  absl::Mutex mu;
  std::deque<transport::IncomingRequest> queue;
  std::unique_ptr<MessageTransport> server;
  {
    auto t = CreateUdpTransport(Options(5000), [&](transport::IncomingRequest r) {
      absl::MutexLock lock(&mu);
      queue.push_back(std::move(r));
    });
    ASSERT_TRUE(t.ok()) << t.status();
    server = std::move(*t);
  }
  auto client = CreateUdpTransport(Options(50), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();

  std::atomic<bool> stop_threads{false};
  std::atomic<int> replies{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      while (!stop_threads.load()) {
        std::optional<transport::IncomingRequest> r;
        {
          absl::MutexLock lock(&mu);
          if (!queue.empty()) {
            r = std::move(queue.front());
            queue.pop_front();
          }
        }
        if (r) {
          server->Reply(*r, Buffer::CopyOf("echo"));
          replies.fetch_add(1);
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  threads.emplace_back([&] {
    const transport::Address nowhere = (*client)->local_address();  // client-only: refuses
    while (!stop_threads.load()) {
      server->SendRequest(
          nowhere, Buffer::CopyOf("out"), [](absl::StatusOr<Buffer>) {}, INT64_MAX);
      server->live_server_rpcs();
      std::this_thread::yield();
    }
  });

  std::vector<std::unique_ptr<Result>> results;
  for (int i = 0; i < 50; ++i) {
    results.push_back(std::make_unique<Result>());
    (*client)->SendRequest(server->local_address(), Buffer::CopyOf("in"),
                           results.back()->Callback(), INT64_MAX);
  }
  // Stop once some replies have gone out, with more on the way.
  const absl::Time give_up = absl::Now() + kGuard;
  while (replies.load() < 10 && absl::Now() < give_up) std::this_thread::yield();
  server->Stop();
  // Let the threads keep calling into the stopped transport for a while.
  const int replies_at_stop = replies.load();
  for (int i = 0; i < 20 && replies.load() == replies_at_stop; ++i) {
    {
      absl::MutexLock lock(&mu);
      queue.push_back(transport::IncomingRequest{});  // a request the transport never saw
    }
    std::this_thread::yield();
  }
  stop_threads.store(true);
  for (std::thread& t : threads) t.join();
  // Every client call completed exactly once (answered, or UNAVAILABLE once nobody listened).
  for (auto& r : results) {
    ASSERT_TRUE(r->Wait());
    EXPECT_EQ(r->count(), 1);
  }
  server.reset();
}

}  // namespace
}  // namespace homarpc::internal
