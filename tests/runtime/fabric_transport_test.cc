// Tests of FabricNetwork (fabric_transport.h): its transports keep MessageTransport's contract
// (message_transport.h) — whole messages both ways, exactly one completion per request,
// deadlines on MonotonicClock, Abort, UNAVAILABLE where nothing listens, CANCELLED for the
// RPCs of a stopped or destroyed transport and nothing delivered afterwards — on a clean and
// on a lossy network. The runtime's end-to-end suite (e2e/) builds on these guarantees.
#include "tests/runtime/fabric_transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "transport/clock.h"

namespace homarpc::testing {
namespace {

using internal::MessageTransport;
using transport::Address;
using transport::Buffer;
using transport::kNanosPerMilli;
using transport::MonotonicClock;

constexpr absl::Duration kGuard = absl::Seconds(30);  // failure guard, not a timing assertion

Address Addr(const char* text) { return Address::Parse(text).value(); }

transport::Config TestConfig() {
  transport::Config c;
  c.timeout_ticks = 5000;  // a guard: a loaded machine must not time calls out
  return c;
}

// A server transport whose handler echoes each request, replying from another thread.
struct EchoServer {
  explicit EchoServer(FabricNetwork* net, const Address& address) {
    transport = net->CreateTransport(address, TestConfig(), [this](transport::IncomingRequest r) {
      requests.fetch_add(1);
      MessageTransport* t = this->transport->get();
      std::thread([t, r = std::move(r)]() mutable {
        Buffer echo = std::move(r.payload);
        t->Reply(r, std::move(echo));
      }).detach();
    });
  }
  absl::StatusOr<std::unique_ptr<MessageTransport>> transport;
  std::atomic<int> requests{0};
};

// Collects one completion; fails the test on a second one.
struct Result {
  void Set(absl::StatusOr<Buffer> r) {
    absl::MutexLock lock(&mu);
    if (done) {
      ADD_FAILURE() << "an RPC completed twice";
      return;
    }
    done = true;
    status = r.status();
    if (r.ok()) bytes = std::string(r->view());
  }
  bool Wait() {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&done), kGuard);
  }
  MessageTransport::ResponseCallback Callback() {
    return [this](absl::StatusOr<Buffer> r) { Set(std::move(r)); };
  }
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status;
  std::string bytes;
};

TEST(FabricTransport, RequestReachesHandlerAndResponseReturns) {
  FabricNetwork net;
  EchoServer server(&net, Addr("10.0.0.1:5000"));
  ASSERT_TRUE(server.transport.ok()) << server.transport.status();
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->local_address(), Addr("10.0.0.2:6000"));

  for (size_t size : {size_t{0}, size_t{1}, size_t{1500}, size_t{1} << 20}) {
    Result result;
    std::string payload(size, '\0');
    for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 7 + size);
    (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf(payload), result.Callback(),
                           INT64_MAX);
    ASSERT_TRUE(result.Wait());
    ASSERT_TRUE(result.status.ok()) << result.status;
    EXPECT_TRUE(result.bytes == payload) << "size " << size;
  }
  EXPECT_EQ(server.requests.load(), 4);
}

TEST(FabricTransport, ServerForgetsAnsweredRpcs) {
  FabricNetwork net;
  EchoServer server(&net, Addr("10.0.0.1:5000"));
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  Result result;
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("x"), result.Callback(), INT64_MAX);
  ASSERT_TRUE(result.Wait());
  // The client acknowledges on its next tick; poll the gauge until then.
  const absl::Time guard = absl::Now() + kGuard;
  while ((*server.transport)->live_server_rpcs() != 0 && absl::Now() < guard) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ((*server.transport)->live_server_rpcs(), 0u);
}

TEST(FabricTransport, NothingListensFailsUnavailableAfterTheSilenceTimeout) {
  FabricNetwork net;
  transport::Config config;
  config.timeout_ticks = 20;  // 20 ms of silence
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), config, nullptr);
  Result result;
  (*client)->SendRequest(Addr("10.9.9.9:1"), Buffer::CopyOf("hello"), result.Callback(), INT64_MAX);
  ASSERT_TRUE(result.Wait());
  EXPECT_TRUE(absl::IsUnavailable(result.status)) << result.status;
}

TEST(FabricTransport, ClientOnlyTransportRefusesRequests) {
  FabricNetwork net;
  auto a = net.CreateTransport(Addr("10.0.0.1:6000"), TestConfig(), nullptr);
  auto b = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  Result result;
  (*b)->SendRequest(Addr("10.0.0.1:6000"), Buffer::CopyOf("hello"), result.Callback(), INT64_MAX);
  ASSERT_TRUE(result.Wait());
  EXPECT_TRUE(absl::IsUnavailable(result.status)) << result.status;
}

// A server that never answers, so client RPCs stay in flight.
struct SilentServer {
  SilentServer(FabricNetwork* net, const Address& address) {
    transport = net->CreateTransport(address, TestConfig(), [this](transport::IncomingRequest r) {
      absl::MutexLock lock(&mu);
      held.push_back(std::move(r));
    });
  }
  int held_count() {
    absl::MutexLock lock(&mu);
    return static_cast<int>(held.size());
  }
  bool WaitHeld(int n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return held.size() >= size_t(n); };
    return mu.AwaitWithTimeout(absl::Condition(&enough), kGuard);
  }
  absl::Mutex mu;
  std::vector<transport::IncomingRequest> held ABSL_GUARDED_BY(mu);
  absl::StatusOr<std::unique_ptr<MessageTransport>> transport;
};

TEST(FabricTransport, DeadlineFailsDeadlineExceeded) {
  FabricNetwork net;
  SilentServer server(&net, Addr("10.0.0.1:5000"));
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  Result result;
  const int64_t start = MonotonicClock::Get()->NowNanos();
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("hello"), result.Callback(),
                         start + 50 * kNanosPerMilli);
  ASSERT_TRUE(result.Wait());
  EXPECT_TRUE(absl::IsDeadlineExceeded(result.status)) << result.status;
  // Not before the deadline (a semantic bound, not a speed assertion).
  EXPECT_GE(MonotonicClock::Get()->NowNanos() - start, 50 * kNanosPerMilli);
}

TEST(FabricTransport, AbortCompletesWithTheGivenStatus) {
  FabricNetwork net;
  SilentServer server(&net, Addr("10.0.0.1:5000"));
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  Result result;
  const uint64_t id = (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("hello"),
                                             result.Callback(), INT64_MAX);
  ASSERT_TRUE(server.WaitHeld(1));
  (*client)->Abort(id, absl::CancelledError("test cancel"));
  ASSERT_TRUE(result.Wait());
  EXPECT_TRUE(absl::IsCancelled(result.status)) << result.status;
  (*client)->Abort(id, absl::CancelledError("again"));  // finished id: ignored
  (*client)->Abort(12345, absl::CancelledError("unknown"));
}

TEST(FabricTransport, DestroyingTheClientFailsInFlightRpcsCancelledBeforeReturning) {
  FabricNetwork net;
  SilentServer server(&net, Addr("10.0.0.1:5000"));
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  std::vector<std::unique_ptr<Result>> results;
  for (int i = 0; i < 10; ++i) {
    results.push_back(std::make_unique<Result>());
    (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("hello"),
                           results.back()->Callback(), INT64_MAX);
  }
  ASSERT_TRUE(server.WaitHeld(10));
  client->reset();
  for (auto& r : results) {
    absl::MutexLock lock(&r->mu);
    ASSERT_TRUE(r->done);  // before the destructor returned
    EXPECT_TRUE(absl::IsCancelled(r->status)) << r->status;
  }
}

TEST(FabricTransport, TransportMayBeDestroyedInsideItsOwnCallback) {
  FabricNetwork net;
  EchoServer server(&net, Addr("10.0.0.1:5000"));
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
  std::unique_ptr<MessageTransport> owned = std::move(*client);
  MessageTransport* t = owned.get();
  absl::Notification second_done;
  absl::Status second;
  t->SendRequest(
      Addr("10.9.9.9:1"), Buffer::CopyOf("never answered"),
      [&](absl::StatusOr<Buffer> r) {
        second = r.status();
        second_done.Notify();
      },
      INT64_MAX);
  absl::Notification done;
  t->SendRequest(
      Addr("10.0.0.1:5000"), Buffer::CopyOf("x"),
      [&](absl::StatusOr<Buffer> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        owned.reset();  // on the driver thread, inside the engine's callback
        done.Notify();
      },
      INT64_MAX);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGuard));
  ASSERT_TRUE(second_done.WaitForNotificationWithTimeout(kGuard));
  EXPECT_TRUE(absl::IsCancelled(second)) << second;
}

TEST(FabricTransport, DestroyedServerGetsNothingAndItsClientsSeeUnavailable) {
  FabricNetwork net;
  auto server = std::make_unique<SilentServer>(&net, Addr("10.0.0.1:5000"));
  transport::Config config;
  config.timeout_ticks = 20;
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), config, nullptr);
  Result first;
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("a"), first.Callback(), INT64_MAX);
  ASSERT_TRUE(server->WaitHeld(1));
  server->transport->reset();
  ASSERT_TRUE(first.Wait());
  EXPECT_TRUE(absl::IsUnavailable(first.status)) << first.status;
  Result later;
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("b"), later.Callback(), INT64_MAX);
  ASSERT_TRUE(later.Wait());
  EXPECT_TRUE(absl::IsUnavailable(later.status)) << later.status;
  EXPECT_EQ(server->held_count(), 1);
}

TEST(FabricTransport, StopDeliversNothingMoreAndLaterCallsAreHarmless) {
  FabricNetwork net;
  SilentServer server(&net, Addr("10.0.0.1:5000"));
  transport::Config config;
  config.timeout_ticks = 20;
  auto client = net.CreateTransport(Addr("10.0.0.2:6000"), config, nullptr);
  Result first;
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("a"), first.Callback(), INT64_MAX);
  ASSERT_TRUE(server.WaitHeld(1));
  MessageTransport* t = server.transport->get();
  t->Stop();
  t->Stop();  // idempotent
  EXPECT_EQ(t->live_server_rpcs(), 0u);
  {
    absl::MutexLock lock(&server.mu);
    t->Reply(server.held.front(), Buffer::CopyOf("too late"));  // dropped
  }
  t->Abort(1, absl::CancelledError("nothing to abort"));
  Result refused;
  t->SendRequest(Addr("10.0.0.2:6000"), Buffer::CopyOf("x"), refused.Callback(), INT64_MAX);
  ASSERT_TRUE(refused.Wait());
  EXPECT_TRUE(absl::IsCancelled(refused.status)) << refused.status;
  // Its clients see nobody listening; nothing more reaches the handler.
  ASSERT_TRUE(first.Wait());
  EXPECT_TRUE(absl::IsUnavailable(first.status)) << first.status;
  Result later;
  (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf("b"), later.Callback(), INT64_MAX);
  ASSERT_TRUE(later.Wait());
  EXPECT_TRUE(absl::IsUnavailable(later.status)) << later.status;
  EXPECT_EQ(server.held_count(), 1);
  server.transport->reset();  // after Stop: fine
}

TEST(FabricTransport, AddressTakenIsRefused) {
  FabricNetwork net;
  auto a = net.CreateTransport(Addr("10.0.0.1:5000"), TestConfig(), nullptr);
  ASSERT_TRUE(a.ok());
  auto b = net.CreateTransport(Addr("10.0.0.1:5000"), TestConfig(), nullptr);
  EXPECT_TRUE(absl::IsAlreadyExists(b.status())) << b.status();
}

TEST(FabricTransport, FactoryAssignsHostsOfTheBindFamilyWithTheBindPort) {
  FabricNetwork net;
  internal::TransportFactory factory = net.factory();
  internal::UdpTransportOptions v4;
  v4.endpoint.io.bind_address = Addr("0.0.0.0:5555");
  internal::UdpTransportOptions v4any;
  v4any.endpoint.io.bind_address = Addr("127.0.0.1:0");
  internal::UdpTransportOptions v6;
  v6.endpoint.io.bind_address = Addr("[::]:7777");
  auto a = factory(v4, nullptr);
  auto b = factory(v4any, nullptr);
  auto c = factory(v6, nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)->local_address().port(), 5555);
  EXPECT_FALSE((*a)->local_address().is_v6());
  EXPECT_NE((*b)->local_address().port(), 0);
  EXPECT_NE((*a)->local_address(), (*b)->local_address());
  EXPECT_TRUE((*c)->local_address().is_v6());
  EXPECT_EQ((*c)->local_address().port(), 7777);

  // They talk to each other over IPv6 too.
  internal::UdpTransportOptions server_options = v6;
  server_options.endpoint.io.bind_address = Addr("[::]:0");
  std::atomic<MessageTransport*> self{nullptr};
  auto server = factory(server_options, [&](transport::IncomingRequest r) {
    Buffer echo = std::move(r.payload);
    self.load()->Reply(r, std::move(echo));  // inline, on the driver thread
  });
  ASSERT_TRUE(server.ok());
  self.store(server->get());
  Result result;
  (*c)->SendRequest((*server)->local_address(), Buffer::CopyOf("v6"), result.Callback(), INT64_MAX);
  ASSERT_TRUE(result.Wait());
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.bytes, "v6");
}

// Faults: every RPC completes exactly once with its own bytes, and every request reaches the
// handler exactly once (Homa's at-most-once delivery, plus retransmission).
TEST(FabricTransport, LossyNetworkDeliversEveryRpcExactlyOnce) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    FabricNetworkOptions options;
    options.fabric.seed = seed;
    options.fabric.drop_rate = 0.05;
    options.fabric.duplicate_rate = 0.05;
    options.fabric.reorder_rate = 0.05;
    FabricNetwork net(options);
    absl::Mutex mu;
    std::vector<int> handled(300, 0);
    std::atomic<MessageTransport*> self{nullptr};
    auto server =
        net.CreateTransport(Addr("10.0.0.1:5000"), TestConfig(), [&](transport::IncomingRequest r) {
          const int id = r.payload.empty() ? -1 : r.payload.data()[0];
          {
            absl::MutexLock lock(&mu);
            if (id >= 0) ++handled[id];
          }
          Buffer echo = std::move(r.payload);
          self.load()->Reply(r, std::move(echo));
        });
    ASSERT_TRUE(server.ok());
    self.store(server->get());
    auto client = net.CreateTransport(Addr("10.0.0.2:6000"), TestConfig(), nullptr);
    std::vector<std::unique_ptr<Result>> results;
    std::vector<std::string> payloads;
    for (int i = 0; i < 100; ++i) {  // ids fit a byte; sizes from 1 byte to ~14 packets
      std::string p(1 + (i * 197) % 20000, static_cast<char>(i));
      for (size_t k = 1; k < p.size(); ++k) p[k] = static_cast<char>(k * 31 + i);
      payloads.push_back(p);
      results.push_back(std::make_unique<Result>());
      (*client)->SendRequest(Addr("10.0.0.1:5000"), Buffer::CopyOf(p), results.back()->Callback(),
                             INT64_MAX);
    }
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(results[i]->Wait());
      ASSERT_TRUE(results[i]->status.ok()) << results[i]->status;
      EXPECT_TRUE(results[i]->bytes == payloads[i]) << "rpc " << i;
    }
    absl::MutexLock lock(&mu);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(handled[i], 1) << "rpc " << i;
    transport::FabricStats stats = net.stats();
    EXPECT_GT(stats.dropped_by(transport::DropCause::kRandom), 0u);
    EXPECT_GT(stats.duplicated, 0u);
  }
}

}  // namespace
}  // namespace homarpc::testing
