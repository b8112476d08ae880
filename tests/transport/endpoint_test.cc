// End-to-end tests of Endpoint over real UDP sockets on loopback, for each I/O backend: the API's
// contract (errors, abort, inline loops, several loops, IPv6). Message delivery itself (sizes up
// to 64 MiB, thousands of concurrent RPCs, many peers) is in conformance_test.cc, which runs the
// same cases on the in-memory fabric too.
#include "transport/endpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/transport/engine_harness.h"
#include "transport/clock.h"
#include "transport/message_bytes.h"
#include "transport/sched.h"

namespace homarpc::transport {
namespace {

using testing::Bytes;

// A failure guard, not a timing assertion: generous enough for a loaded 2-core CI machine.
constexpr absl::Duration kGuard = absl::Seconds(120);

struct EndpointTest : ::testing::TestWithParam<IoKind> {
  EndpointOptions Options() {
    EndpointOptions o;
    // A failure guard, not the subject: CI runs two sanitized test binaries at once on two
    // cores, where a loop can be descheduled for longer than the default 100 ms.
    o.config.timeout_ticks = 5000;
    o.io.kind = GetParam();
    o.io.bind_address = Address::Loopback4(0);
    return o;
  }
  std::unique_ptr<Endpoint> EchoServer(EndpointOptions o) {
    // The handler needs the endpoint it belongs to; no request can arrive before Create
    // returns, because nobody knows the port yet.
    auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
    auto ep = Endpoint::Create(o, [self](IncomingRequest r) {
      Buffer copy = std::move(r.payload);
      self->load()->Reply(r, std::move(copy));
    });
    EXPECT_TRUE(ep.ok()) << ep.status();
    self->store(ep->get());
    return std::move(*ep);
  }
};

TEST_P(EndpointTest, Endpoint_OversizedRequestRefusedLocally) {
  // One byte more than the largest message the config allows is refused before anything is
  // sent. (Messages up to the limit arrive byte-exact: conformance_test.cc.)
  auto server = EchoServer(Options());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->io_kind(), GetParam());
  absl::StatusOr<Buffer> too_big = (*client)->Call(
      server->local_address(), Buffer(size_t{Options().config.max_message_length} + 1));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted) << too_big.status();
  EXPECT_EQ((*client)->stats().data_bytes_sent, 0u);
  EXPECT_EQ(server->stats().requests_delivered, 0u);
}

TEST_P(EndpointTest, Endpoint_AcksRidingOnRequestsEndTheServersRpcs) {
  // Each call's request carries the ack for the one before (Loop::StashAck); the server ends
  // that RPC after its round (engine.cc, "Acks that ride on requests"). The server never asks
  // for acks here, so RPCs whose piggybacked acks were dropped would pile up (all 50); as it
  // is at most the last call's RPC and one acked in the last round remain.
  EndpointOptions o = Options();
  o.config.request_ack_ticks = 100000;
  o.config.need_ack_give_up_ticks = 200000;
  auto server = EchoServer(o);
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  constexpr int kCalls = 50;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE((*client)->Call(server->local_address(), Bytes(16)).ok());
  }
  EXPECT_EQ(server->stats().requests_delivered, uint64_t{kCalls});
  EXPECT_LE(server->stats().server_rpcs, 6u);
  EXPECT_EQ(server->stats().packets_sent[static_cast<uint8_t>(wire::PacketType::kNeedAck)], 0u);
}

TEST_P(EndpointTest, Endpoint_NobodyListeningIsUnavailable) {
  EndpointOptions o = Options();
  o.config.timeout_ticks = 20;  // 20 ms of silence
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok());
  // A port with no socket: bind one, note its port, close it.
  Address dead;
  {
    auto probe = Endpoint::Create(Options());
    ASSERT_TRUE(probe.ok());
    dead = (*probe)->local_address();
  }
  absl::StatusOr<Buffer> r = (*client)->Call(dead, Bytes(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_P(EndpointTest, Endpoint_ARequestIsReleasedOnceTheTickGivesItsRpcUp) {
  // The RPC the tick gives up on ends in a round with nothing else to do, and a loop that does
  // not spin sleeps right after it: that round frees the RPC (Loop::RunOnce), so the request's
  // owner (a blocking caller whose request the transport borrowed: ClientCall::Wait) has it
  // back with the outcome, not when the loop next wakes, up to a second later.
  EndpointOptions o = Options();
  o.config.timeout_ticks = 20;  // 20 ms of silence
  o.config.poll_usecs = 0;
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok());
  Address dead;  // a port with no socket
  {
    auto probe = Endpoint::Create(Options());
    ASSERT_TRUE(probe.ok());
    dead = (*probe)->local_address();
  }
  absl::Notification released;
  absl::Notification done;
  absl::Status status;
  MessageBytes request(Bytes(10));
  request.OnRelease([&released] { released.Notify(); });
  (*client)->SendRequest(dead, std::move(request), [&](absl::StatusOr<Buffer> r) {
    status = r.status();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
}

TEST_P(EndpointTest, Endpoint_ClientOnlyEndpointRefusesRequests) {
  auto client_only = Endpoint::Create(Options());
  ASSERT_TRUE(client_only.ok());
  auto caller = Endpoint::Create(Options());
  ASSERT_TRUE(caller.ok());
  absl::StatusOr<Buffer> r = (*caller)->Call((*client_only)->local_address(), Bytes(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ((*client_only)->stats().server_rpcs, 0u);
  EXPECT_EQ((*client_only)->stats().refused_messages, 1u);
}

TEST_P(EndpointTest, Endpoint_AbortCompletesWithStatus) {
  // A server that never answers.
  auto server = Endpoint::Create(Options(), [](IncomingRequest) {});
  ASSERT_TRUE(server.ok());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  absl::Notification done;
  absl::Status got;
  uint64_t id = (*client)->SendRequest((*server)->local_address(), Bytes(10),
                                       [&](absl::StatusOr<Buffer> r) {
                                         got = r.status();
                                         done.Notify();
                                       });
  (*client)->Abort(id, absl::CancelledError("user gave up"));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(got.code(), absl::StatusCode::kCancelled);
}

TEST_P(EndpointTest, Endpoint_DeadlineAbortsWithDeadlineExceeded) {
  // A server that never answers; the transport's silence timeout is far away (Options), so
  // only the per-RPC deadline can end these calls. One call gets a deadline 20 ms out, one
  // none; the second must still be in flight when the first has failed.
  // (Declared before the endpoints: callbacks may fire while the client shuts down.)
  absl::Notification done;
  absl::Status got;
  std::atomic<bool> other_done{false};
  auto server = Endpoint::Create(Options(), [](IncomingRequest) {});
  ASSERT_TRUE(server.ok());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  const int64_t deadline = MonotonicClock::Get()->NowNanos() + 20 * kNanosPerMilli;
  (*client)->SendRequest((*server)->local_address(), Bytes(10),
                         [&](absl::StatusOr<Buffer> r) {
                           got = r.status();
                           done.Notify();
                         },
                         deadline);
  uint64_t other = (*client)->SendRequest(
      (*server)->local_address(), Bytes(10),
      [&](absl::StatusOr<Buffer>) { other_done.store(true); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(got.code(), absl::StatusCode::kDeadlineExceeded) << got;
  EXPECT_GE(MonotonicClock::Get()->NowNanos(), deadline);
  EXPECT_FALSE(other_done.load());
  (*client)->Abort(other, absl::CancelledError("test over"));
}

TEST_P(EndpointTest, Endpoint_DeadlineOfAnsweredRpcIsHarmless) {
  // Calls answered before their deadline complete normally, and the deadlines they leave
  // behind (many, to exercise the pruning of finished entries) fire on nothing: a last call
  // to a server that never answers, with a deadline after all of them, fails only once every
  // earlier deadline has come due, and by then no callback has run a second time.
  const int kCalls = 3000;
  std::atomic<int> ok{0}, failed{0};
  absl::Notification all, sentinel_done;
  absl::Status sentinel;
  auto server = EchoServer(Options());
  auto silent = Endpoint::Create(Options(), [](IncomingRequest) {});
  ASSERT_TRUE(silent.ok());
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  // Generous for 3000 loopback echoes on a loaded CI machine (3 s was not, with compilers
  // running beside two sanitized test binaries: 483 done), short enough to wait out.
  const int64_t deadline = MonotonicClock::Get()->NowNanos() + 10 * kNanosPerSecond;
  for (int i = 0; i < kCalls; ++i) {
    (*client)->SendRequest(server->local_address(), Bytes(8),
                           [&](absl::StatusOr<Buffer> r) {
                             (r.ok() ? ok : failed).fetch_add(1);
                             if (ok.load() + failed.load() == kCalls) all.Notify();
                           },
                           deadline);
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(kGuard));
  (*client)->SendRequest((*silent)->local_address(), Bytes(8),
                         [&](absl::StatusOr<Buffer> r) {
                           sentinel = r.status();
                           sentinel_done.Notify();
                         },
                         deadline + kNanosPerMilli);
  ASSERT_TRUE(sentinel_done.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(sentinel.code(), absl::StatusCode::kDeadlineExceeded) << sentinel;
  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_EQ(failed.load(), 0);
}

TEST_P(EndpointTest, Endpoint_MultiLoopServer) {
  EndpointOptions o = Options();
  o.num_loops = 2;
  auto server = EchoServer(o);
  std::vector<std::unique_ptr<Endpoint>> clients;
  for (int i = 0; i < 4; ++i) {
    auto c = Endpoint::Create(Options());
    ASSERT_TRUE(c.ok());
    clients.push_back(std::move(*c));
  }
  for (int round = 0; round < 5; ++round) {
    for (auto& c : clients) {
      absl::StatusOr<Buffer> r = c->Call(server->local_address(), Bytes(3000));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->size(), 3000u);
    }
  }
  EXPECT_EQ(server->stats().requests_delivered, 20u);
}

TEST_P(EndpointTest, Endpoint_Ipv6) {
  EndpointOptions o = Options();
  o.io.bind_address = Address::Loopback6(0);
  auto probe = Endpoint::Create(o);
  if (!probe.ok()) GTEST_SKIP() << "IPv6 loopback unavailable: " << probe.status();
  probe->reset();
  auto server = EchoServer(o);
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<Buffer> r = (*client)->Call(server->local_address(), Bytes(5000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 5000u);
}

TEST_P(EndpointTest, Endpoint_Ipv6WildcardServesIpv4Clients) {
  // A server bound to "::" (gRPC's "[::]:port") answers IPv4 and IPv6 clients alike.
  EndpointOptions so = Options();
  so.io.bind_address = Address::Parse("[::]:0").value();
  auto server = EchoServer(so);
  if (server == nullptr) GTEST_SKIP() << "cannot bind [::] here";
  const uint16_t port = server->local_address().port();
  auto v4 = Endpoint::Create(Options());
  ASSERT_TRUE(v4.ok());
  absl::StatusOr<Buffer> r4 = (*v4)->Call(Address::Loopback4(port), Bytes(3000));
  ASSERT_TRUE(r4.ok()) << r4.status();
  EXPECT_EQ(r4->size(), 3000u);
  EndpointOptions co6 = Options();
  co6.io.bind_address = Address::Loopback6(0);
  auto v6 = Endpoint::Create(co6);
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback: " << v6.status();
  absl::StatusOr<Buffer> r6 = (*v6)->Call(Address::Loopback6(port), Bytes(3000));
  ASSERT_TRUE(r6.ok()) << r6.status();
  EXPECT_EQ(r6->size(), 3000u);
}

TEST_P(EndpointTest, Endpoint_InlineLoopClient) {
  auto server = EchoServer(Options());
  EndpointOptions o = Options();
  o.inline_loop = true;
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  // Blocking calls drive the loop on this thread.
  for (size_t size : {size_t{10}, size_t{200000}}) {
    absl::StatusOr<Buffer> r = (*client)->Call(server->local_address(), Bytes(size));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->size(), size);
  }
  // Asynchronous calls complete inside Poll().
  int done = 0;
  for (int i = 0; i < 50; ++i) {
    (*client)->SendRequest(server->local_address(), Bytes(100),
                           [&done](absl::StatusOr<Buffer> r) { done += r.ok(); });
  }
  (*client)->Poll(MonotonicClock::Get()->NowNanos() + 120 * kNanosPerSecond,
                  [&done] { return done == 50; });
  EXPECT_EQ(done, 50);
  // Inline mode needs exactly one loop.
  o.num_loops = 2;
  EXPECT_EQ(Endpoint::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(EndpointTest, Endpoint_CallFromCallbackIsRefused) {
  auto server = EchoServer(Options());
  EndpointOptions o = Options();
  o.inline_loop = true;
  auto client = Endpoint::Create(o);
  ASSERT_TRUE(client.ok());
  Endpoint* ep = client->get();
  absl::Status inner = absl::OkStatus();
  bool done = false;
  ep->SendRequest(server->local_address(), Bytes(10), [&](absl::StatusOr<Buffer> r) {
    // A blocking call here would wait on the loop that is running this callback.
    inner = ep->Call(server->local_address(), Bytes(10)).status();
    // And an abort right after a send on the loop's thread finds the new RPC.
    uint64_t id = ep->SendRequest(server->local_address(), Bytes(10),
                                  [&](absl::StatusOr<Buffer> r2) { done = true; });
    ep->Abort(id, absl::CancelledError("changed my mind"));
  });
  ep->Poll(MonotonicClock::Get()->NowNanos() + 60 * kNanosPerSecond, [&] { return done; });
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(done);
}

TEST_P(EndpointTest, Endpoint_HandedOverBetweenThreads) {
  auto server = EchoServer(Options());
  // A server that never answers, for a call that only an abort ends.
  auto mute = Endpoint::Create(Options(), [](IncomingRequest) {});
  ASSERT_TRUE(mute.ok());
  EndpointOptions o = Options();  // io.kind is ignored: hand-over needs epoll
  o.inline_loop = true;
  o.handed_over = true;
  auto created = Endpoint::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  Endpoint* ep = created->get();
  EXPECT_EQ(ep->io_kind(), IoKind::kEpoll);
  // Calls on this thread, then on others in turn: each adopts, calls, releases.
  ASSERT_TRUE(ep->Call(server->local_address(), Bytes(10)).ok());
  ep->Release();
  for (size_t size : {size_t{100}, size_t{300000}, size_t{7}}) {
    absl::StatusOr<Buffer> r = absl::UnknownError("not run");
    std::thread([&] {
      ep->Adopt();
      r = ep->Call(server->local_address(), Bytes(size));
      ep->Release();
    }).join();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->size(), size);
    const Buffer expected = Bytes(size);
    EXPECT_EQ(std::memcmp(r->data(), expected.data(), size), 0);
  }
  // An abort from another thread reaches the thread that drives the endpoint.
  absl::Notification sent;
  absl::Status aborted;
  uint64_t id = 0;
  std::thread driver([&] {
    ep->Adopt();
    bool done = false;
    id = ep->SendRequest((*mute)->local_address(), Bytes(10), [&](absl::StatusOr<Buffer> r) {
      aborted = r.status();
      done = true;
    });
    sent.Notify();
    ep->Poll(MonotonicClock::Get()->NowNanos() + 120 * kNanosPerSecond, [&] { return done; });
    ep->Release();
  });
  sent.WaitForNotification();
  ep->Abort(id, absl::CancelledError("stop waiting"));
  driver.join();
  EXPECT_EQ(aborted.code(), absl::StatusCode::kCancelled) << aborted;
  // Destroyed here, by a thread that did not release it last.
  created->reset();
  // Hand-over needs inline mode.
  o.inline_loop = false;
  EXPECT_EQ(Endpoint::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// Relay mode (EndpointOptions::standby): a server whose handler runs requests of one byte as
// tasks after the round (RunAfterRound) that wait for `release` before replying, and echoes
// the others at once (noting the timer slack of the thread that drives the loop).
struct RelayServer {
  std::unique_ptr<Endpoint> ep;
  Endpoint* raw = nullptr;  // for the tasks: `ep` may be resetting while one runs
  std::atomic<uint64_t> echo_slack{0};
  absl::Mutex mu;
  int tasks_started ABSL_GUARDED_BY(mu) = 0;
  bool release ABSL_GUARDED_BY(mu) = false;

  void AwaitTasksStarted(int n) {
    absl::MutexLock lock(&mu);
    auto started = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return tasks_started >= n; };
    mu.Await(absl::Condition(&started));
  }
  int TasksStarted() {
    absl::MutexLock lock(&mu);
    return tasks_started;
  }
  void SetRelease(bool value) {
    absl::MutexLock lock(&mu);
    release = value;
  }
};

std::unique_ptr<RelayServer> StartRelayServer(EndpointOptions o,
                                              int64_t takeover_nanos = 2 * kNanosPerMilli) {
  auto server = std::make_unique<RelayServer>();
  RelayServer* s = server.get();
  o.standby = true;
  o.takeover_nanos = takeover_nanos;
  auto ep = Endpoint::Create(o, [s](IncomingRequest r) {
    if (r.payload.size() != 1) {
      s->echo_slack.store(ThisThreadsTimerSlackNanos());
      Buffer copy = std::move(r.payload);
      s->raw->Reply(r, std::move(copy));
      return;
    }
    IncomingRequest route;  // all RunAfterRound needs: which loop
    route.loop_index = r.loop_index;
    absl::AnyInvocable<void() &&> task = [s, r = std::move(r)]() mutable {
      absl::MutexLock lock(&s->mu);
      ++s->tasks_started;
      s->mu.Await(absl::Condition(&s->release));
      Buffer copy = std::move(r.payload);
      s->raw->Reply(r, std::move(copy));
    };
    // One task per round: a second request read in the same round is answered at once.
    if (!s->raw->RunAfterRound(route, task)) std::move(task)();
  });
  EXPECT_TRUE(ep.ok()) << ep.status();
  if (!ep.ok()) return nullptr;
  s->raw = ep->get();
  s->ep = std::move(*ep);
  return server;
}

TEST_P(EndpointTest, Endpoint_RelayRunsTheTaskOnTheLoopThreadOncePerRound) {
  std::atomic<int> queued{0};
  std::atomic<int> refused_second{0};
  std::atomic<int> same_thread{0};
  std::atomic<int> unrun_second{0};
  auto self = std::make_shared<std::atomic<Endpoint*>>(nullptr);
  EndpointOptions o = Options();
  o.standby = true;
  o.takeover_nanos = 100 * kNanosPerSecond;  // no takeover, however slow this machine is
  auto created = Endpoint::Create(o, [&, self](IncomingRequest r) {
    const std::thread::id handler_thread = std::this_thread::get_id();
    IncomingRequest route;
    route.loop_index = r.loop_index;
    absl::AnyInvocable<void() &&> task = [&, self, r = std::move(r), handler_thread]() mutable {
      if (std::this_thread::get_id() == handler_thread) same_thread.fetch_add(1);
      Buffer copy = std::move(r.payload);
      self->load()->Reply(r, std::move(copy));
    };
    if (self->load()->RunAfterRound(route, task)) {
      queued.fetch_add(1);
    } else {
      std::move(task)();  // answered all the same: the test fails on `queued`, not by hanging
    }
    bool ran = false;
    absl::AnyInvocable<void() &&> second = [&ran] { ran = true; };
    if (!self->load()->RunAfterRound(route, second)) refused_second.fetch_add(1);
    if (second != nullptr && !ran) unrun_second.fetch_add(1);  // still the caller's
  });
  ASSERT_TRUE(created.ok()) << created.status();
  self->store(created->get());
  EXPECT_EQ((*created)->io_kind(), IoKind::kEpoll);  // the loop changes threads
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  for (size_t size : {size_t{1}, size_t{1000}, size_t{100000}}) {
    absl::StatusOr<Buffer> r = (*client)->Call((*created)->local_address(), Bytes(size));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->size(), size);
  }
  EXPECT_EQ(queued.load(), 3);
  EXPECT_EQ(refused_second.load(), 3);
  EXPECT_EQ(unrun_second.load(), 3);
  EXPECT_EQ(same_thread.load(), 3);
  EXPECT_EQ((*created)->takeovers(), 0u);

  // Without a standby the request handler keeps its task.
  auto plain = Endpoint::Create(Options(), [&](IncomingRequest r) {
    absl::AnyInvocable<void() &&> task = [] {};
    EXPECT_FALSE(self->load()->RunAfterRound(r, task));
    EXPECT_NE(task, nullptr);
    self->load()->Reply(r, Bytes(1));
  });
  ASSERT_TRUE(plain.ok());
  created->reset();
  self->store(plain->get());
  ASSERT_TRUE((*client)->Call((*plain)->local_address(), Bytes(10)).ok());
}

TEST_P(EndpointTest, Endpoint_RelayStandbyTakesTheLoopOverFromABlockedTask) {
  std::unique_ptr<RelayServer> server = StartRelayServer(Options());
  ASSERT_NE(server, nullptr);
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  const Address dest = server->ep->local_address();
  // Twice: the second time the thread that was displaced first is the standby.
  for (int round = 1; round <= 2; ++round) {
    // The thread taken over from in round 1 stands by once its task has returned, a moment
    // after its reply.
    const absl::Time give_up = absl::Now() + kGuard;
    while (!server->ep->standbys_ready() && absl::Now() < give_up) std::this_thread::yield();
    ASSERT_TRUE(server->ep->standbys_ready());
    absl::Notification blocked_done;
    absl::StatusOr<Buffer> blocked = absl::UnknownError("not run");
    (*client)->SendRequest(dest, Bytes(1), [&](absl::StatusOr<Buffer> r) {
      blocked = std::move(r);
      blocked_done.Notify();
    });
    server->AwaitTasksStarted(round);
    // The loop's first thread waits in the task: only the standby can serve this one.
    absl::StatusOr<Buffer> r = (*client)->Call(dest, Bytes(500));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->size(), 500u);
    EXPECT_EQ(server->ep->takeovers(), static_cast<uint64_t>(round));
    // The standby watched with a relaxed timer slack (Loop::kWatchSlackNanos); driving the
    // loop now, it has its own back (the loop's timed waits must not run late).
    EXPECT_EQ(server->echo_slack.load(), ThisThreadsTimerSlackNanos());
    EXPECT_FALSE(blocked_done.HasBeenNotified());
    server->SetRelease(true);
    ASSERT_TRUE(blocked_done.WaitForNotificationWithTimeout(kGuard));
    ASSERT_TRUE(blocked.ok()) << blocked.status();
    EXPECT_EQ(blocked->size(), 1u);
    server->SetRelease(false);
  }
  // Both threads serve on.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*client)->Call(dest, Bytes(64)).ok());
}

TEST_P(EndpointTest, Endpoint_RelayStandbyKeepsWatchThroughASparseStreamOfTasks) {
  // Calls 6 ms apart to a server whose standby looks every 20 ms: its loop sleeps between them
  // (it spins 50 us), but a task let it go within the last kParkAfterTakeovers takeover times
  // (40 ms), so the standby stays on watch instead of parking, and calls do not pay for waking
  // it (loop.cc, "Relay mode"). Parking whenever it found the loop asleep woke it every few
  // calls. The bound leaves room for this machine stalling > 30 ms between calls, twice.
  std::unique_ptr<RelayServer> server = StartRelayServer(Options(), 20 * kNanosPerMilli);
  ASSERT_NE(server, nullptr);
  server->SetRelease(true);  // the tasks reply at once
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  const Address dest = server->ep->local_address();
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    absl::StatusOr<Buffer> r = (*client)->Call(dest, Bytes(1));
    ASSERT_TRUE(r.ok()) << r.status();
    absl::SleepFor(absl::Milliseconds(6));  // the subject: gaps the loop sleeps through
  }
  EXPECT_EQ(server->TasksStarted(), kCalls);
  EXPECT_LE(server->ep->standby_wakes(), 3u);
}

// Two blocking tasks at once: the second is refused while the standby is busy with the first
// (it ran a task that was taken over from), so the loop always has a thread to drive it.
TEST_P(EndpointTest, Endpoint_RelayRefusesATaskWhileItsStandbyIsBusy) {
  std::unique_ptr<RelayServer> server = StartRelayServer(Options());
  ASSERT_NE(server, nullptr);
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  const Address dest = server->ep->local_address();
  std::atomic<int> answered{0};
  auto count = [&](absl::StatusOr<Buffer> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    answered.fetch_add(1);
  };
  (*client)->SendRequest(dest, Bytes(1), count);
  server->AwaitTasksStarted(1);
  // Served only once the standby has taken over; the standby is then busy (the first thread
  // still waits in its task).
  ASSERT_TRUE((*client)->Call(dest, Bytes(100)).ok());
  EXPECT_EQ(server->ep->takeovers(), 1u);
  EXPECT_FALSE(server->ep->standbys_ready());
  // So this blocking request is refused, and StartRelayServer's handler runs it on the loop
  // itself: the test's stand-in for a worker pool. It blocks that loop until the release.
  (*client)->SendRequest(dest, Bytes(1), count);
  server->AwaitTasksStarted(2);
  EXPECT_EQ(server->ep->takeovers(), 1u);
  server->SetRelease(true);
  const absl::Time give_up = absl::Now() + kGuard;
  while (answered.load() < 2 && absl::Now() < give_up) std::this_thread::yield();
  EXPECT_EQ(answered.load(), 2);
  ASSERT_TRUE((*client)->Call(dest, Bytes(64)).ok());
}

TEST_P(EndpointTest, Endpoint_RelayStopsWhileATaskIsBlocked) {
  // No takeover but the stop's: only that path can shut the loop down under the task.
  std::unique_ptr<RelayServer> server = StartRelayServer(Options(), 100 * kNanosPerSecond);
  ASSERT_NE(server, nullptr);
  auto client = Endpoint::Create(Options());
  ASSERT_TRUE(client.ok());
  // The server endpoint's own call to a peer that never answers: its loop's shutdown ends it
  // CANCELLED, which is how the test sees that shutdown happen.
  auto mute = Endpoint::Create(Options(), [](IncomingRequest) {});
  ASSERT_TRUE(mute.ok());
  absl::Notification own_call_ended;
  absl::Status own_call;
  server->raw->SendRequest((*mute)->local_address(), Bytes(10), [&](absl::StatusOr<Buffer> r) {
    own_call = r.status();
    own_call_ended.Notify();
  });
  absl::Notification done;
  absl::Status status;
  (*client)->SendRequest(server->ep->local_address(), Bytes(1), [&](absl::StatusOr<Buffer> r) {
    status = r.status();
    done.Notify();
  });
  server->AwaitTasksStarted(1);
  // The endpoint stops: the standby takes the let-go loop over at once and shuts it down while
  // the task still waits, and the destructor waits for the task.
  std::thread destroyer([&] { server->ep.reset(); });
  ASSERT_TRUE(own_call_ended.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(own_call.code(), absl::StatusCode::kCancelled) << own_call;
  EXPECT_EQ(server->TasksStarted(), 1);
  server->SetRelease(true);
  destroyer.join();
  EXPECT_EQ(server->TasksStarted(), 1);
  // The reply left if the task ran before the loop's shutdown refused it; otherwise the
  // client's endpoint ends the call CANCELLED as it goes. Either way, exactly once.
  client->reset();
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kCancelled) << status;
}

TEST_P(EndpointTest, Endpoint_RelayOptionsAreChecked) {
  EndpointOptions o = Options();
  o.standby = true;
  o.inline_loop = true;
  EXPECT_EQ(Endpoint::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.inline_loop = false;
  o.takeover_nanos = 0;
  EXPECT_EQ(Endpoint::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(EndpointTest, Endpoint_InlineEndpointWhoseSocketFailsIsAnError) {
  // The port is taken: Create() fails before any loop exists, and cleans up (it used to
  // crash here in inline mode, shutting down a loop that was never made).
  auto taken = Endpoint::Create(Options());
  ASSERT_TRUE(taken.ok()) << taken.status();
  for (bool handed_over : {false, true}) {
    EndpointOptions o = Options();
    o.inline_loop = true;
    o.handed_over = handed_over;
    o.io.bind_address = (*taken)->local_address();
    absl::StatusOr<std::unique_ptr<Endpoint>> again = Endpoint::Create(o);
    EXPECT_FALSE(again.ok()) << "handed_over=" << handed_over;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EndpointTest, ::testing::Values(IoKind::kUring, IoKind::kEpoll),
                         [](const auto& info) { return std::string(IoKindName(info.param)); });

}  // namespace
}  // namespace homarpc::transport
