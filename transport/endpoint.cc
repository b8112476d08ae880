#include "transport/endpoint.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "transport/clock.h"
#include "transport/loop.h"

namespace homarpc::transport {
namespace {

uint64_t SumOverLoops(const std::vector<std::unique_ptr<Loop>>& loops,
                      uint64_t (Loop::*count)() const) {
  uint64_t sum = 0;
  for (const auto& loop : loops) sum += (loop.get()->*count)();
  return sum;
}

void Add(EngineStats& sum, const EngineStats& s) {
  for (int i = 0; i < 256; ++i) {
    sum.packets_sent[i] += s.packets_sent[i];
    sum.packets_received[i] += s.packets_received[i];
  }
  for (int i = 0; i < static_cast<int>(wire::DecodeError::kCount); ++i) {
    sum.packets_dropped[i] += s.packets_dropped[i];
  }
  sum.packets_dropped_semantic += s.packets_dropped_semantic;
  sum.data_bytes_sent += s.data_bytes_sent;
  sum.data_bytes_received += s.data_bytes_received;
  sum.duplicate_data_bytes += s.duplicate_data_bytes;
  sum.retransmitted_packets += s.retransmitted_packets;
  sum.direct_sends += s.direct_sends;
  sum.resends_sent += s.resends_sent;
  sum.restarts += s.restarts;
  sum.stale_rpc_unknowns += s.stale_rpc_unknowns;
  sum.path_mtu_fallbacks += s.path_mtu_fallbacks;
  sum.unpaced_peers += s.unpaced_peers;
  sum.client_timeouts += s.client_timeouts;
  sum.server_rpcs_abandoned += s.server_rpcs_abandoned;
  sum.duplicate_requests_suppressed += s.duplicate_requests_suppressed;
  sum.refused_messages += s.refused_messages;
  sum.requests_delivered += s.requests_delivered;
  sum.responses_delivered += s.responses_delivered;
  sum.client_rpcs += s.client_rpcs;
  sum.server_rpcs += s.server_rpcs;
  sum.peers += s.peers;
  sum.rx_bytes_held += s.rx_bytes_held;
  sum.throttled_rpcs += s.throttled_rpcs;
  sum.max_grantable_messages = std::max(sum.max_grantable_messages, s.max_grantable_messages);
}

// Runs `fn` on `loop`'s thread and waits for it (or runs it here when already there or when
// the loop has stopped).
template <typename Fn>
void RunOn(Loop* loop, Fn fn) {
  if (loop->IsLoopThread()) {
    fn();
    return;
  }
  absl::Notification done;
  if (!loop->Post([&] {
        fn();
        done.Notify();
      })) {
    fn();
    return;
  }
  done.WaitForNotification();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options,
                                                           RequestHandler handler) {
  if (absl::Status s = options.config.Validate(); !s.ok()) return s;
  if (options.num_loops < 1 || options.num_loops > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_loops must be in [1, 256], got ", options.num_loops));
  }
  if (options.inline_loop && options.num_loops != 1) {
    return absl::InvalidArgumentError("inline_loop requires num_loops == 1");
  }
  if (options.handed_over && !options.inline_loop) {
    return absl::InvalidArgumentError("handed_over requires inline_loop");
  }
  if (options.standby && options.inline_loop) {
    return absl::InvalidArgumentError("standby threads need loop threads (not inline_loop)");
  }
  if (options.standby && options.takeover_nanos <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("takeover_nanos must be positive, got ", options.takeover_nanos));
  }
  std::unique_ptr<Endpoint> ep(new Endpoint());
  ep->inline_loop_ = options.inline_loop;
  ep->handed_over_ = options.handed_over;
  ep->handler_ = std::move(handler);
  IoOptions io = options.io;
  // epoll: io_uring rings stay with one thread
  io.transferable = options.handed_over || options.standby;
  Config config = options.config;
  // Without a handler nothing would answer: refuse requests on the wire instead.
  if (!ep->handler_) config.accept_requests = false;
  if (options.num_loops > 1) io.reuse_port = true;
  io.unwatch_after_nanos =
      std::max(io.unwatch_after_nanos, int64_t{2} * config.poll_usecs * kNanosPerMicro);
  for (int i = 0; i < options.num_loops; ++i) {
    absl::StatusOr<std::unique_ptr<IoBackend>> backend = CreateIoBackend(io);
    if (!backend.ok()) return backend.status();
    if (i == 0) {
      ep->local_address_ = (*backend)->local_address();
      io.bind_address = ep->local_address_;  // later loops share the chosen port
    }
    ep->loops_.push_back(std::make_unique<Loop>(static_cast<uint32_t>(i), config,
                                                std::move(*backend), &ep->handler_));
  }
  if (ep->inline_loop_) {
    ep->loops_.front()->AdoptCurrentThread();
  } else {
    for (auto& loop : ep->loops_) {
      if (options.standby) loop->EnableStandby(options.takeover_nanos);
      loop->Start();
    }
  }
  return ep;
}

Endpoint::~Endpoint() {
  if (loops_.empty()) return;  // Create() failed before its first loop was made
  if (inline_loop_) {
    if (handed_over_) Adopt();  // released by its last driver; the destroying thread finishes
    loops_.front()->Shutdown();
    return;
  }
  for (auto& loop : loops_) loop->Stop();
}

void Endpoint::Poll(int64_t deadline_nanos, std::function<bool()> until) {
  Loop* loop = loops_.front().get();
  assert(inline_loop_ && loop->IsLoopThread());
  if (loop->running()) return;  // called from a callback inside Poll()/Call(): see endpoint.h
  const Clock* clock = MonotonicClock::Get();
  loop->RunUntil(
      [&] { return (until && until()) || clock->NowNanos() >= deadline_nanos; },
      deadline_nanos);
}

void Endpoint::Adopt() {
  assert(handed_over_);
  loops_.front()->AdoptCurrentThread();
}

void Endpoint::Release() {
  Loop* loop = loops_.front().get();
  assert(handed_over_ && loop->IsLoopThread() && !loop->running());
  // Packets queued by a Send() outside RunOnce would be flushed by the next driver: do it now.
  loop->io().Flush();
  const bool released = loop->io().ReleaseOwner();
  assert(released);  // Create() chose the epoll backend
  (void)released;
  loop->ReleaseThread();
}

bool Endpoint::RunAfterRound(const IncomingRequest& request,
                             absl::AnyInvocable<void() &&>& task) {
  if (request.loop_index >= loops_.size()) return false;
  return loops_[request.loop_index]->RunAfterRound(task);
}

uint64_t Endpoint::takeovers() const { return SumOverLoops(loops_, &Loop::takeovers); }

uint64_t Endpoint::standby_wakes() const { return SumOverLoops(loops_, &Loop::standby_wakes); }

bool Endpoint::standbys_ready() const {
  for (const auto& loop : loops_) {
    if (!loop->standby_ready()) return false;
  }
  return true;
}

IoKind Endpoint::io_kind() const { return loops_.front()->io().kind(); }

uint64_t Endpoint::SendRequest(const Address& dest, MessageBytes request,
                               ResponseCallback done,
                               int64_t deadline_nanos) {
  const uint64_t token = next_token_.fetch_add(1);
  Loop* loop = loops_[token % loops_.size()].get();
  if (loop->IsLoopThread()) {
    // Inline mode, or a callback on this loop's thread: start it now, so that an Abort() that
    // follows on this thread finds it.
    // Inline mode outside Poll()/Call(): the request leaves now, not after the first receive
    // poll of the Poll() that follows (a system call on the round trip's path).
    loop->StartClientRpc(token, dest, std::move(request), std::move(done), deadline_nanos,
                         /*flush=*/inline_loop_ && !loop->running());
    return token;
  }
  // One allocation (the closure): when the loop has stopped and Post() destroys the closure
  // unrun, the guard inside it fails the RPC, on this thread.
  struct DoneGuard {
    ResponseCallback done;
    explicit DoneGuard(ResponseCallback d) : done(std::move(d)) {}
    DoneGuard(DoneGuard&& other) noexcept : done(std::exchange(other.done, nullptr)) {}
    ~DoneGuard() {
      if (done) done(absl::CancelledError("endpoint shut down"));
    }
  };
  // A one-packet request to a sleeping loop leaves from this thread (loop.cc, DESIGN NOTES):
  // the adoption is posted without a wake-up, and before the packet is sent.
  Loop::DirectPacket direct;
  const bool go_direct = loop->PrepareDirect(dest, request, &direct);
  const RpcId direct_id = go_direct ? direct.id : 0;
  const bool posted = loop->Post(
      [loop, token, dest, direct_id, request = std::move(request),
       guard = DoneGuard(std::move(done)), deadline_nanos]() mutable {
        if (direct_id != 0) {
          loop->AdoptDirectRpc(token, dest, direct_id, std::move(request),
                               std::exchange(guard.done, nullptr), deadline_nanos);
        } else {
          loop->StartClientRpc(token, dest, std::move(request),
                               std::exchange(guard.done, nullptr), deadline_nanos);
        }
      },
      /*wake=*/!go_direct);
  if (posted && go_direct) loop->SendDirect(direct, deadline_nanos);
  return token;
}

absl::StatusOr<Buffer> Endpoint::Call(const Address& dest, MessageBytes request) {
  // Blocking inside a callback would wait on the very loop that must deliver the answer.
  for (auto& loop : loops_) {
    if (loop->IsLoopThread() && (!inline_loop_ || loop->running())) {
      return absl::FailedPreconditionError(
          "Endpoint::Call from inside a callback would deadlock; use SendRequest");
    }
  }
  struct Waiter {
    std::atomic<bool> ready{false};
    absl::Notification notification;
    absl::StatusOr<Buffer> result;
  };
  auto waiter = std::make_shared<Waiter>();
  SendRequest(dest, std::move(request), [waiter](absl::StatusOr<Buffer> r) {
    waiter->result = std::move(r);
    waiter->ready.store(true, std::memory_order_release);
    waiter->notification.Notify();
  });
  if (inline_loop_) {
    // This thread is the loop: drive it until the response is in.
    loops_.front()->RunUntil([&] { return waiter->ready.load(std::memory_order_relaxed); });
    return std::move(waiter->result);
  }
  // Spin first (a wake-up costs ~10x a busy round trip), then sleep.
  const int64_t spin = int64_t{loops_.front()->engine().config().poll_usecs} * kNanosPerMicro;
  const int64_t start = MonotonicClock::Get()->NowNanos();
  while (!waiter->ready.load(std::memory_order_acquire) &&
         MonotonicClock::Get()->NowNanos() - start < spin) {
  }
  waiter->notification.WaitForNotification();
  return std::move(waiter->result);
}

void Endpoint::Abort(uint64_t id, absl::Status status) {
  Loop* loop = loops_[id % loops_.size()].get();
  if (status.ok()) status = absl::CancelledError("aborted");
  if (loop->IsLoopThread()) {
    loop->AbortClientRpc(id, std::move(status));
    return;
  }
  loop->Post([loop, id, status = std::move(status)]() mutable {
    loop->AbortClientRpc(id, std::move(status));
  });
}

void Endpoint::Reply(const IncomingRequest& request, MessageBytes response) {
  Loop* loop = loops_[request.loop_index].get();
  if (loop->IsLoopThread()) {
    loop->SendResponse(request.rpc, std::move(response));
    return;
  }
  // A one-packet response leaves from this thread (loop.cc, DESIGN NOTES).
  Loop::DirectPacket direct;
  const bool go_direct = loop->PrepareDirect(request.rpc.client, response, &direct,
                                             request.rpc.id);
  const bool posted = loop->Post(
      [loop, rpc = request.rpc, go_direct, response = std::move(response)]() mutable {
        if (go_direct) {
          loop->AdoptDirectResponse(rpc, std::move(response));
        } else {
          loop->SendResponse(rpc, std::move(response));
        }
      },
      /*wake=*/!go_direct);
  if (posted && go_direct) loop->SendDirect(direct, INT64_MAX);
}

EngineStats Endpoint::stats() const {
  EngineStats sum;
  for (auto& loop : loops_) {
    Loop* l = loop.get();
    RunOn(l, [&] { Add(sum, l->engine().stats()); });
  }
  return sum;
}

EngineMemory Endpoint::memory() const {
  EngineMemory sum;
  for (auto& loop : loops_) {
    Loop* l = loop.get();
    RunOn(l, [&] {
      EngineMemory m = l->engine().memory();
      sum.bytes_per_client_rpc = m.bytes_per_client_rpc;
      sum.bytes_per_server_rpc = m.bytes_per_server_rpc;
      sum.bytes_per_peer = m.bytes_per_peer;
      sum.total_state_bytes += m.total_state_bytes;
    });
  }
  return sum;
}

IoStats Endpoint::io_stats() const {
  IoStats sum;
  for (auto& loop : loops_) {
    Loop* l = loop.get();
    RunOn(l, [&] {
      IoStats s = l->io().stats();
      sum.datagrams_sent += s.datagrams_sent;
      sum.send_calls += s.send_calls;
      sum.send_errors += s.send_errors;
      sum.datagrams_received += s.datagrams_received;
      sum.recv_batches += s.recv_batches;
      sum.recv_truncated += s.recv_truncated;
      sum.direct_sends += s.direct_sends;
      sum.direct_send_errors += s.direct_send_errors;
      sum.watch_changes += s.watch_changes;
      sum.direct_send_wakes += l->direct_wakes();
    });
  }
  return sum;
}

}  // namespace homarpc::transport
