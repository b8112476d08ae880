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

// ---- Sockets lent to blocking callers (BorrowDriver) ----

UdpTransportOptions LendingOptions(uint32_t sockets) {
  UdpTransportOptions options = Options(5000);
  options.caller_sockets = sockets;
  return options;
}

// An echo server that records the client address of every request.
struct EchoServer {
  EchoServer() {
    auto t = CreateUdpTransport(Options(5000), [this](transport::IncomingRequest r) {
      {
        absl::MutexLock lock(&mu);
        peers.push_back(r.peer);
      }
      Buffer copy = std::move(r.payload);
      transport->Reply(r, std::move(copy));
    });
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) transport = std::move(*t);
  }
  transport::Address last_peer() {
    absl::MutexLock lock(&mu);
    return peers.empty() ? transport::Address() : peers.back();
  }
  absl::Mutex mu;
  std::vector<transport::Address> peers ABSL_GUARDED_BY(mu);
  std::unique_ptr<MessageTransport> transport;
};

// A thread that is joined when it goes out of scope, so that a failed ASSERT on the main
// thread does not leave it joinable.
class JoiningThread {
 public:
  template <typename Fn>
  explicit JoiningThread(Fn fn) : thread_(std::move(fn)) {}
  ~JoiningThread() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

// One call on a borrowed socket, driven by this thread to its end. Returns the outcome and
// the thread its callback ran on.
absl::StatusOr<Buffer> DrivenCall(MessageTransport::CallDriver* driver,
                                  const transport::Address& dest, Buffer request,
                                  std::thread::id* callback_thread = nullptr) {
  std::optional<absl::StatusOr<Buffer>> out;
  driver->SendRequest(
      dest, std::move(request),
      [&](absl::StatusOr<Buffer> r) {
        if (callback_thread != nullptr) *callback_thread = std::this_thread::get_id();
        out = std::move(r);
      },
      INT64_MAX);
  driver->Drive([&] { return out.has_value(); });
  return std::move(*out);
}

TEST(UdpTransportTest, UdpTransport_LentSocketsRunCallsOnTheBorrowersThread) {
  EchoServer server;
  ASSERT_NE(server.transport, nullptr);
  auto client = CreateUdpTransport(LendingOptions(2), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  const transport::Address dest = server.transport->local_address();

  MessageTransport::CallDriver* first = (*client)->BorrowDriver();
  ASSERT_NE(first, nullptr);
  std::thread::id ran_on;
  absl::StatusOr<Buffer> r = DrivenCall(first, dest, Buffer::CopyOf("hello"), &ran_on);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->view(), "hello");
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  // The lent socket is not the transport's own: the server sees another client port.
  const transport::Address lent_address = server.last_peer();
  EXPECT_NE(lent_address, (*client)->local_address());
  // Two at most at once; a third borrower is told to use the loop thread.
  MessageTransport::CallDriver* second = (*client)->BorrowDriver();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_EQ((*client)->BorrowDriver(), nullptr);
  (*client)->ReturnDriver(second);
  (*client)->ReturnDriver(first);
  // The last one given back is lent first, to another thread now; it still works there.
  std::thread([&] {
    MessageTransport::CallDriver* again = (*client)->BorrowDriver();
    EXPECT_EQ(again, first);
    if (again == nullptr) return;
    std::thread::id there;
    absl::StatusOr<Buffer> r2 = DrivenCall(again, dest, Buffer::CopyOf("again"), &there);
    EXPECT_TRUE(r2.ok()) << r2.status();
    EXPECT_EQ(there, std::this_thread::get_id());
    (*client)->ReturnDriver(again);
  }).join();
  EXPECT_EQ(server.last_peer(), lent_address);
  // Calls through the loop thread still work beside them.
  Result loop_call;
  (*client)->SendRequest(dest, Buffer::CopyOf("loop"), loop_call.Callback(), INT64_MAX);
  ASSERT_TRUE(loop_call.Wait());
  EXPECT_EQ(server.last_peer(), (*client)->local_address());
}

TEST(UdpTransportTest, UdpTransport_WhenNoSocketCanBeLentCallsGoThroughTheLoopThread) {
  EchoServer server;
  ASSERT_NE(server.transport, nullptr);
  // The first lent socket is made; the second fails as it would without descriptors left.
  std::atomic<int> made{0};
  UdpTransportOptions options = LendingOptions(4);
  options.lent_socket_factory = [&made](const transport::EndpointOptions& o)
      -> absl::StatusOr<std::unique_ptr<transport::Endpoint>> {
    EXPECT_TRUE(o.handed_over);
    if (made.fetch_add(1) >= 1) return absl::ResourceExhaustedError("socket: too many open files");
    return transport::Endpoint::Create(o);
  };
  auto client = CreateUdpTransport(options, nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  const transport::Address dest = server.transport->local_address();

  MessageTransport::CallDriver* first = (*client)->BorrowDriver();
  ASSERT_NE(first, nullptr);
  // The failure: no socket, and no retry later (one warning, not one per call) while the
  // socket made before stays lendable.
  EXPECT_EQ((*client)->BorrowDriver(), nullptr);
  EXPECT_EQ((*client)->BorrowDriver(), nullptr);
  EXPECT_EQ(made.load(), 2);
  absl::StatusOr<Buffer> driven = DrivenCall(first, dest, Buffer::CopyOf("driven"));
  ASSERT_TRUE(driven.ok()) << driven.status();
  EXPECT_EQ(driven->view(), "driven");
  (*client)->ReturnDriver(first);
  EXPECT_EQ((*client)->BorrowDriver(), first);
  (*client)->ReturnDriver(first);
  EXPECT_EQ(made.load(), 2);

  // A blocking caller told "no socket" calls through the loop thread, which still works.
  for (int i = 0; i < 3; ++i) {
    Result loop_call;
    (*client)->SendRequest(dest, Buffer::CopyOf("loop"), loop_call.Callback(), INT64_MAX);
    ASSERT_TRUE(loop_call.Wait());
    {
      absl::MutexLock lock(&loop_call.mu);
      EXPECT_TRUE(loop_call.status.ok()) << loop_call.status;
    }
    EXPECT_EQ(server.last_peer(), (*client)->local_address());
  }
  (*client)->Stop();
}

TEST(UdpTransportTest, UdpTransport_NoLentSocketsWhenNoneAreAllowedOrForAServer) {
  auto client = CreateUdpTransport(LendingOptions(0), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->BorrowDriver(), nullptr);
  // A server answers through Reply(); it lends nothing whatever the options say.
  auto server = CreateUdpTransport(LendingOptions(4), [](transport::IncomingRequest) {});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->BorrowDriver(), nullptr);
}

TEST(UdpTransportTest, UdpTransport_AbortAndSendBesideFromAnotherThreadReachALentSocket) {
  HoldingServer server;
  ASSERT_NE(server.transport, nullptr);
  auto client = CreateUdpTransport(LendingOptions(1), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  const transport::Address dest = server.transport->local_address();
  std::atomic<uint64_t> id{0};
  absl::Notification id_known;  // the request may reach the server before SendRequest returns
  absl::Status outcome;
  JoiningThread caller([&] {
    MessageTransport::CallDriver* driver = (*client)->BorrowDriver();
    if (driver == nullptr) {
      ADD_FAILURE() << "nothing lent";
      id_known.Notify();
      return;
    }
    std::optional<absl::StatusOr<Buffer>> out;
    id.store(driver->SendRequest(
        dest, Buffer::CopyOf("held"), [&](absl::StatusOr<Buffer> r) { out = std::move(r); },
        INT64_MAX));
    id_known.Notify();
    driver->Drive([&] { return out.has_value(); });
    outcome = out->status();
    (*client)->ReturnDriver(driver);
  });
  ASSERT_TRUE(server.WaitHeld(1));
  ASSERT_TRUE(id_known.WaitForNotificationWithTimeout(kGuard));
  ASSERT_NE(id.load(), 0u);
  // A second request from the same socket (what a cancel envelope needs): same client address.
  Result beside;
  (*client)->SendRequestBeside(id.load(), dest, Buffer::CopyOf("beside"), beside.Callback(),
                               INT64_MAX);
  ASSERT_TRUE(server.WaitHeld(2));
  {
    absl::MutexLock lock(&server.mu);
    EXPECT_EQ(server.held[1].peer, server.held[0].peer);
    EXPECT_NE(server.held[0].peer, (*client)->local_address());
  }
  (*client)->Abort(id.load(), absl::CancelledError("from elsewhere"));
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(outcome)) << outcome;
  // The beside call is still in flight on the idle socket; Stop() ends it.
  (*client)->Stop();
  ASSERT_TRUE(beside.Wait());
  absl::MutexLock lock(&beside.mu);
  EXPECT_TRUE(absl::IsCancelled(beside.status)) << beside.status;
}

TEST(UdpTransportTest, UdpTransport_StopEndsADrivenCallAndWaitsForItsSocket) {
  HoldingServer server;
  ASSERT_NE(server.transport, nullptr);
  auto client = CreateUdpTransport(LendingOptions(1), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  std::atomic<bool> returned{false};
  absl::Status outcome;
  JoiningThread caller([&] {
    MessageTransport::CallDriver* driver = (*client)->BorrowDriver();
    if (driver == nullptr) {
      ADD_FAILURE() << "nothing lent";
      return;
    }
    absl::StatusOr<Buffer> r =
        DrivenCall(driver, server.transport->local_address(), Buffer::CopyOf("held"));
    outcome = r.status();
    returned.store(true);  // before giving it back, which is what Stop() waits for
    (*client)->ReturnDriver(driver);
  });
  ASSERT_TRUE(server.WaitHeld(1));
  (*client)->Stop();
  // Stop() returned only after the borrower had its CANCELLED outcome and gave the socket back.
  EXPECT_TRUE(returned.load());
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(outcome)) << outcome;
  EXPECT_EQ((*client)->BorrowDriver(), nullptr);  // stopped: nothing more is lent
}

}  // namespace
}  // namespace homarpc::internal
