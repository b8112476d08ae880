// Tests of direct sends (transport/loop.cc, DESIGN NOTES): a one-packet request made on a
// caller's thread while the loop sleeps, or a one-packet response made on a worker's thread
// whether the loop sleeps or not, leaves from that thread and is adopted by the loop later.
// Over real UDP on loopback, for each I/O backend: the responses find their RPCs, the path is
// really taken (and not when disabled), deadlines still fire when the loop would have slept
// past them, losses are recovered, and larger requests keep going through the loop.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <thread>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/transport/impairment_proxy.h"
#include "transport/clock.h"
#include "transport/endpoint.h"

namespace homarpc::transport {
namespace {

// Gap between calls: long enough for an idle loop (poll_usecs = 0) to be asleep.
constexpr absl::Duration kIdleGap = absl::Milliseconds(1);

std::string Pattern(int i, size_t size) {
  std::string s = absl::StrCat("call-", i, "-");
  while (s.size() < size) s.push_back(static_cast<char>('a' + (s.size() * 7 + i) % 26));
  s.resize(size);
  return s;
}

struct DirectSendTest : ::testing::TestWithParam<IoKind> {
  EndpointOptions Options() {
    EndpointOptions o;
    o.config.poll_usecs = 0;        // an idle loop sleeps at once
    o.config.timeout_ticks = 5000;  // a guard for loaded CI machines, not the subject
    o.io.kind = GetParam();
    o.io.bind_address = Address::Loopback4(0);
    return o;
  }
  // Echoes every request; with `answer_first_only`, answers the first and drops the rest.
  std::unique_ptr<Endpoint> EchoServer(EndpointOptions o, bool answer_first_only = false) {
    auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
    auto answered = std::make_shared<std::atomic<int>>(0);
    auto ep = Endpoint::Create(o, [self, answered, answer_first_only](IncomingRequest r) {
      if (answer_first_only && answered->fetch_add(1) > 0) return;
      Buffer copy = std::move(r.payload);
      self->load()->Reply(r, std::move(copy));
    });
    EXPECT_TRUE(ep.ok()) << ep.status();
    self->store(ep->get());
    return std::move(*ep);
  }
  // `calls` sequential echoes of distinct bytes from this (non-loop) thread, idle between.
  void EchoCalls(Endpoint& client, const Address& to, int calls, size_t size) {
    for (int i = 0; i < calls; ++i) {
      const std::string bytes = Pattern(i, size);
      absl::StatusOr<Buffer> echo = client.Call(to, Buffer::CopyOf(bytes));
      ASSERT_TRUE(echo.ok()) << "call " << i << ": " << echo.status();
      ASSERT_EQ(echo->view(), bytes) << "call " << i;
      absl::SleepFor(kIdleGap);
    }
  }
};

TEST_P(DirectSendTest, DirectSend_CallerSendsWhileLoopSleepsAndResponsesFindTheirRpcs) {
  auto server = EchoServer(Options());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  EchoCalls(**client, server->local_address(), 50, 200);
  const EngineStats stats = (*client)->stats();
  const IoStats io = (*client)->io_stats();
  // The first call teaches the loop the route; after that, calls made while it slept went
  // out directly (the loop is asleep after each 1 ms gap unless a timer happened to run).
  EXPECT_GT(stats.direct_sends, 0u);
  EXPECT_LT(stats.direct_sends, 50u) << "the first call has no route yet";
  EXPECT_EQ(io.direct_sends + io.direct_send_errors, stats.direct_sends)
      << "every adopted RPC was sent by its caller";
  EXPECT_EQ(stats.client_rpcs, 0u);
}

TEST_P(DirectSendTest, DirectSend_WorkerThreadAnswersWhileServerLoopSleeps) {
  // The handler hands each request to a worker thread, which replies while the server's loop
  // (poll_usecs = 0) is usually asleep again: those one-packet responses go out directly.
  struct Worker {
    absl::Mutex mu;
    std::deque<IncomingRequest> queue ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
  };
  auto worker = std::make_shared<Worker>();
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  auto server = Endpoint::Create(Options(), [worker](IncomingRequest r) {
    absl::MutexLock lock(&worker->mu);
    worker->queue.push_back(std::move(r));
  });
  ASSERT_TRUE(server.ok()) << server.status();
  self->store(server->get());
  // Before the replier starts: an ASSERT that returns must not leave it joinable.
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  std::thread replier([worker, self] {
    for (;;) {
      IncomingRequest r;
      {
        absl::MutexLock lock(&worker->mu);
        worker->mu.Await(absl::Condition(
            +[](Worker* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->stop || !w->queue.empty(); },
            worker.get()));
        if (worker->queue.empty()) return;
        r = std::move(worker->queue.front());
        worker->queue.pop_front();
      }
      Buffer copy = std::move(r.payload);
      self->load()->Reply(r, std::move(copy));
    }
  });
  EchoCalls(**client, (*server)->local_address(), 50, 300);
  {
    absl::MutexLock lock(&worker->mu);
    worker->stop = true;
  }
  replier.join();
  const EngineStats stats = (*server)->stats();
  EXPECT_GT(stats.direct_sends, 0u);
  EXPECT_EQ(stats.responses_delivered, 0u);
  EXPECT_EQ((*client)->stats().responses_delivered, 50u);
}

TEST_P(DirectSendTest, DirectSend_WorkerAnswersDirectlyWhileServerLoopIsAwake) {
  // A server loop that spins for a second after each request is awake whenever the worker
  // replies; a one-packet response still leaves from the worker's thread (posting it would
  // make the reply wait until the loop next gets a CPU: loop.cc, DESIGN NOTES).
  struct Worker {
    absl::Mutex mu;
    std::deque<IncomingRequest> queue ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
  };
  Worker worker;
  EndpointOptions server_options = Options();
  server_options.config.poll_usecs = 1000000;
  auto server = Endpoint::Create(server_options, [&worker](IncomingRequest r) {
    absl::MutexLock lock(&worker.mu);
    worker.queue.push_back(std::move(r));
  });
  ASSERT_TRUE(server.ok()) << server.status();
  Endpoint* server_endpoint = server->get();
  // Before the replier starts: an ASSERT that returns must not leave it joinable.
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  std::thread replier([&worker, server_endpoint] {
    for (;;) {
      IncomingRequest r;
      {
        absl::MutexLock lock(&worker.mu);
        worker.mu.Await(absl::Condition(
            +[](Worker* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->stop || !w->queue.empty(); },
            &worker));
        if (worker.queue.empty()) return;
        r = std::move(worker.queue.front());
        worker.queue.pop_front();
      }
      Buffer copy = std::move(r.payload);
      server_endpoint->Reply(r, std::move(copy));
    }
  });
  constexpr int kCalls = 30;
  EchoCalls(**client, (*server)->local_address(), kCalls, 300);
  {
    absl::MutexLock lock(&worker.mu);
    worker.stop = true;
  }
  replier.join();
  EXPECT_EQ((*server)->stats().direct_sends, static_cast<uint64_t>(kCalls))
      << "every response fit one packet and had a route: each left from the worker";
  EXPECT_EQ((*client)->stats().responses_delivered, static_cast<uint64_t>(kCalls));
}

TEST_P(DirectSendTest, DirectSend_DisabledSendsEverythingThroughTheLoop) {
  EndpointOptions o = Options();
  o.config.direct_send = false;
  auto server = EchoServer(Options());
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EchoCalls(**client, server->local_address(), 20, 200);
  EXPECT_EQ((*client)->stats().direct_sends, 0u);
  EXPECT_EQ((*client)->io_stats().direct_sends, 0u);
}

TEST_P(DirectSendTest, DirectSend_MultiPacketRequestsGoThroughTheLoop) {
  auto server = EchoServer(Options());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  // Two packets' worth each (1500-byte MTU): never direct, and still intact.
  EchoCalls(**client, server->local_address(), 10, 2000);
  EXPECT_EQ((*client)->stats().direct_sends, 0u);
}

TEST_P(DirectSendTest, DirectSend_WakesTheLoopForADeadlineItWouldSleepPast) {
  // One-second ticks: an idle client loop sleeps about a second (its next tick or peer
  // collection). A directly sent call with a 20 ms deadline must wake it (counted in
  // direct_send_wakes), or the deadline would be noticed only then.
  EndpointOptions o = Options();
  o.config.tick_usecs = 1000000;
  o.config.timeout_ticks = 100;
  auto server = EchoServer(o, /*answer_first_only=*/true);
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Call(server->local_address(), Buffer::CopyOf("route")).ok());
  absl::SleepFor(absl::Milliseconds(20));  // the loop goes back to sleep

  absl::Notification done;
  absl::Status outcome;
  (*client)->SendRequest(
      server->local_address(), Buffer::CopyOf("never answered"),
      [&](absl::StatusOr<Buffer> r) {
        outcome = r.status();
        done.Notify();
      },
      MonotonicClock::Get()->NowNanos() + 20 * kNanosPerMilli);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(outcome.code(), absl::StatusCode::kDeadlineExceeded) << outcome;
  const uint64_t direct = (*client)->stats().direct_sends;
  if (direct == 0) GTEST_SKIP() << "the loop was awake when the call was made: nothing to check";
  EXPECT_EQ((*client)->io_stats().direct_send_wakes, direct)
      << "a direct send must wake a loop that would sleep past the call's deadline";
}

TEST_P(DirectSendTest, DirectSend_LostPacketsAreRecovered) {
  EndpointOptions o = Options();
  auto server = EchoServer(o);
  testing::ImpairmentOptions impair;
  impair.server = server->local_address();
  impair.seed = 7;
  impair.drop_rate = 0.2;
  testing::ImpairmentProxy proxy(impair);
  ASSERT_TRUE(proxy.Start().ok());
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EchoCalls(**client, proxy.address(), 40, 300);
  EXPECT_GT((*client)->stats().direct_sends, 0u);
  const testing::ImpairmentStats impaired = proxy.stats();
  EXPECT_GT(impaired.to_server.dropped + impaired.to_client.dropped, 0u);
  proxy.Stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, DirectSendTest,
                         ::testing::Values(IoKind::kUring, IoKind::kEpoll),
                         [](const ::testing::TestParamInfo<IoKind>& info) {
                           return std::string(IoKindName(info.param));
                         });

}  // namespace
}  // namespace homarpc::transport
