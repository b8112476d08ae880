// Server and ServerImpl (server.h, server_impl.h): request dispatch, the live-call registry,
// the deadline timer, and shutdown.
//
// DESIGN NOTES
// - Dispatch happens on the loop thread that received the request: decode the envelope,
//   look the method up, check limits, parse the payload, then either run a callback handler
//   right there or hand the call to the executor. Every request that is not turned into a
//   call is answered at once with a status-only envelope, so each Homa request gets exactly
//   one response (the transport holds server state until it does).
// - Requests that reach a loop before BuildAndStart() has finished wait on `started_` (the
//   ports' transports are still being written); a loop thread waits only during start-up.
// - Live calls sit in `by_id_` (client address + call id, for kCancel; `unkeyed_` for a call
//   whose id its client reused while the first lived: served, not cancellable). A cancel that
//   arrives before its call (separate Homa messages may be reordered) finds nothing and is
//   answered OK; the call then runs to completion. One lock acquisition registers a call
//   (admission: shutting down, max_concurrent_calls) and one forgets it; OnDone runs before
//   the call is forgotten, so shutdown, which waits for the registry to empty, also waits
//   for OnDone. The registry's mutex is a transport::PlainMutex, not an absl::Mutex: the
//   distribution's Abseil runs its deadlock detector on every absl::Mutex lock, and these
//   two locks are on every call's path (plain_sync.h). So a shutdown's wait for the registry
//   to empty is a PlainCondVar that FinalizeCall signals, not an Await.
//   TODO(perf): one mutex for the registry serves every loop; shard it per loop if several
//   loops ever contend on it.
// - Deadline timer: one min-heap per server (DeadlineHeap, intrusive: a call remembers its
//   slot, so forgetting a call before its deadline is O(log n) and needs no search), guarded
//   by the registry's own mutex so it costs no extra lock: a call with a deadline is pushed
//   when it is registered and erased when it is forgotten; a call without one never touches
//   it. One thread sleeps on a CondVar (of that mutex) until the earliest deadline; Register
//   signals it only when the new deadline is earlier than the one it sleeps until, so the
//   usual case (deadlines later than the earliest, or the thread busy) wakes nobody. When a
//   deadline passes the thread takes a hold on the call (under the mutex, as kCancel does)
//   and cancels it with DEADLINE_EXCEEDED: IsCancelled() turns true, the client is answered
//   (if it was not yet), a callback reactor gets OnCancel once. Per-loop timers were
//   rejected: the server does not own the loops (the transport does), and calls finish on
//   workers and application threads, so a per-loop heap would need a lock anyway.
// - Shutdown: stop registering (new requests -> UNAVAILABLE), wait for the live calls; past
//   the deadline cancel them (their clients get CANCELLED now; handlers see IsCancelled) and
//   wait for their handlers to return, as gRPC does. Then stop the timer and the executor,
//   give the transports up to max(deadline, now + 1 s) to get responses acknowledged, stop
//   them (MessageTransport::Stop joins their threads, so no loop calls into the server any
//   more) and destroy them.
//   From a handler, Shutdown cannot wait for itself: it starts the same sequence on a
//   server-owned thread and returns; Wait() and ~Server (from other threads) see it through.
//
// Lock order: shutdown_mu_ (never held while calls run) ; calls_mu_ -> ServerCall::mu_.
#include "runtime/server.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/server_call.h"
#include "runtime/server_impl.h"
#include "runtime/target.h"
#include "transport/clock.h"
#include "transport/log.h"
#include "transport/sched.h"
#include "transport/trace_points.h"

namespace homarpc {
namespace internal {
namespace {

thread_local const ServerImpl* tls_user_code_server = nullptr;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// How long shutdown waits, at least, for responses to be acknowledged.
constexpr int64_t kMinTransportDrainNanos = transport::kNanosPerSecond;
// Bad envelopes are counted; only the first few are logged.
constexpr uint64_t kBadEnvelopesLogged = 8;

}  // namespace

UserCodeScope::UserCodeScope(const ServerImpl* server) : previous_(tls_user_code_server) {
  tls_user_code_server = server;
}
UserCodeScope::~UserCodeScope() { tls_user_code_server = previous_; }
bool UserCodeScope::InUserCodeOf(const ServerImpl* server) {
  return tls_user_code_server == server;
}

thread_local bool InlineLoopScope::active_ = false;

ServerImpl::ServerImpl(ServerLimits limits, MethodMap methods, std::unique_ptr<Executor> executor)
    : limits_(limits), methods_(std::move(methods)), executor_(std::move(executor)) {}

ServerImpl::~ServerImpl() {
  Shutdown(std::nullopt);
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
  if (timer_thread_.joinable()) timer_thread_.join();  // joined by shutdown already
}

absl::Status ServerImpl::AddPort(const UdpTransportOptions& options,
                                 const TransportFactory& factory) {
  auto port = std::make_unique<ServerPort>();
  ServerPort* raw = port.get();
  MessageTransport::RequestHandler handler = [this, raw](transport::IncomingRequest request) {
    OnRequest(raw, std::move(request));
  };
  absl::StatusOr<std::unique_ptr<MessageTransport>> transport =
      factory ? factory(options, std::move(handler))
              : CreateUdpTransport(options, std::move(handler));
  if (!transport.ok()) return transport.status();
  raw->transport = std::move(*transport);
  raw->address = raw->transport->local_address();
  ports_.push_back(std::move(port));
  return absl::OkStatus();
}

void ServerImpl::Start() {
  timer_thread_ = std::thread([this] { DeadlineTimerMain(); });
  started_.Notify();
}

void ServerImpl::AbortStart() {
  {
    transport::PlainMutexLock lock(&calls_mu_);
    accepting_ = false;
    shutting_down_.store(true, std::memory_order_release);
  }
  started_.Notify();  // held requests now get UNAVAILABLE
  for (auto& port : ports_) port->transport->Stop();
  for (auto& port : ports_) port->transport.reset();
  executor_->Shutdown();
  absl::MutexLock lock(&shutdown_mu_);
  shutdown_started_ = true;
  shutdown_done_ = true;
}

void ServerImpl::OnRequest(ServerPort* port, transport::IncomingRequest request) {
  started_.WaitForNotification();
  const int64_t arrival_nanos = NowNanos();
  if (request.payload.size() > kOffloadBytes) {
    if (Executor* executor = offload_executor()) {
      // Runs exactly once, on a worker or, once the executor is shutting down, right here.
      executor->Run([this, port, request = std::move(request), arrival_nanos]() mutable {
        ProcessRequest(port, std::move(request), arrival_nanos, /*on_worker=*/true);
      });
      return;
    }
  }
  const InlineLoopScope on_loop;
  ProcessRequest(port, std::move(request), arrival_nanos, /*on_worker=*/false);
}

void ServerImpl::ProcessRequest(ServerPort* port, transport::IncomingRequest request,
                                int64_t arrival_nanos, bool on_worker) {
  HOMARPC_TRACE_POINT(kRequestDispatched);
  MessageTransport* transport = port->transport.get();
  auto answer = [&](uint64_t call_id, const Status& status) {
    transport->Reply(request, EncodeStatusResponse(call_id, status));
  };

  // Decode applies the metadata limit as it goes (PROTOCOL.md 14.6), so an oversized list is
  // never materialized.
  absl::StatusOr<Envelope> decoded = Decode(request.payload.span(), limits_.max_metadata);
  if (!decoded.ok()) {
    // No field can be trusted but the call_id, whose place is fixed in every version
    // (PROTOCOL.md 14.11): echo it so the client can tell which call failed.
    const std::optional<uint64_t> call_id = PeekCallId(request.payload.span());
    if (decoded.status().code() == absl::StatusCode::kResourceExhausted) {
      answer(call_id.value_or(0),  // a whole header was read before any metadata
             Status(StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("request ", decoded.status().message())));
      return;
    }
    if (bad_envelopes_.fetch_add(1, std::memory_order_relaxed) < kBadEnvelopesLogged) {
      HOMARPC_LOG(WARNING) << "undecodable request from " << request.peer.ToString() << ": "
                           << decoded.status().message();
    }
    if (!call_id.has_value()) {
      // Shorter than a header: nothing to echo. An empty response releases the transport's
      // RPC; the client cannot decode it, which fails its call INTERNAL (PROTOCOL.md 14.7).
      transport->Reply(request, transport::Buffer());
      return;
    }
    answer(*call_id, Status(StatusCode::INTERNAL,
                            absl::StrCat("undecodable request: ", decoded.status().message())));
    return;
  }
  const Envelope& envelope = *decoded;
  if (envelope.kind == EnvelopeKind::kCancel) {
    HandleCancel(port, request, envelope.call_id);
    return;
  }
  if (envelope.kind != EnvelopeKind::kRequest) {
    answer(envelope.call_id,
           Status(StatusCode::INTERNAL,
                  absl::StrCat("unexpected envelope kind ", static_cast<int>(envelope.kind),
                               " in a request")));
    return;
  }
  // PROTOCOL.md 14.7: what version 1 reserves is refused, never misread.
  if (envelope.stream_id != 0 || envelope.sequence != 0) {
    answer(envelope.call_id, Status(StatusCode::UNIMPLEMENTED, "streaming is not supported yet"));
    return;
  }
  if ((envelope.flags & kFlagCompressed) != 0) {
    answer(envelope.call_id, Status(StatusCode::UNIMPLEMENTED, "compression is not supported"));
    return;
  }
  if (shutting_down_.load(std::memory_order_acquire)) {
    answer(envelope.call_id, Status(StatusCode::UNAVAILABLE, "server shutting down"));
    return;
  }
  auto method = methods_.find(AsAbsl(envelope.method));
  if (method == methods_.end()) {
    answer(envelope.call_id, Status(StatusCode::UNIMPLEMENTED,
                                    absl::StrCat("unknown method ", AsAbsl(envelope.method))));
    return;
  }
  const MethodHandler* handler = method->second;
  if (handler == nullptr) {
    answer(envelope.call_id,
           Status(StatusCode::UNIMPLEMENTED, "streaming methods are not supported yet"));
    return;
  }
  if (envelope.payload.size() > limits_.max_receive_message) {
    answer(envelope.call_id,
           Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("Received message larger than max (", envelope.payload.size(),
                               " vs. ", limits_.max_receive_message, ")")));
    return;
  }
  // One allocation: the call with its request and response; the request is parsed in place.
  // The method name is the registry's key (methods_ is immutable, so its keys stay put).
  ServerCall* call = ServerCall::Create(this, transport, request, envelope, &method->first, handler,
                                        arrival_nanos);
  HOMARPC_TRACE_POINT(kCallCreated);
  if (call == nullptr) {
    answer(envelope.call_id,
           Status(StatusCode::INTERNAL,
                  absl::StrCat("failed to parse the request for ", AsAbsl(envelope.method))));
    return;
  }
  switch (Register(call)) {
    case Admission::kAdmitted:
      call->Start(executor_.get(), on_worker);
      return;
    case Admission::kShuttingDown:
      call->Reject(Status(StatusCode::UNAVAILABLE, "server shutting down"));
      break;
    case Admission::kOverloaded:
      call->Reject(Status(StatusCode::RESOURCE_EXHAUSTED, "server overloaded"));
      break;
  }
  ServerCall::Destroy(call);
}

void ServerImpl::HandleCancel(ServerPort* port, const transport::IncomingRequest& request,
                              uint64_t call_id) {
  ServerCall* call = nullptr;
  {
    transport::PlainMutexLock lock(&calls_mu_);
    auto it = by_id_.find(CallKey{request.peer, call_id});
    if (it != by_id_.end() && it->second->TryAddHold()) call = it->second;
  }
  if (call != nullptr) {
    call->Cancel(Status(StatusCode::CANCELLED, "cancelled by the client"));
    call->Release();
  }
  port->transport->Reply(request, EncodeStatusResponse(call_id, Status()));
}

ServerImpl::Admission ServerImpl::Register(ServerCall* call) {
  transport::PlainMutexLock lock(&calls_mu_);
  if (!accepting_) return Admission::kShuttingDown;
  if (by_id_.size() + unkeyed_.size() >= limits_.max_concurrent_calls) {
    return Admission::kOverloaded;
  }
  if (!by_id_.try_emplace(CallKey{call->client(), call->call_id()}, call).second) {
    unkeyed_.insert(call);
  }
  if (call->deadline_nanos() != INT64_MAX) {
    deadlines_.Push(call);
    // Wake the timer only if it sleeps past this deadline (kTimerAwake: it will look).
    if (call->deadline_nanos() < timer_wake_nanos_) timer_cv_.Signal();
  }
  return Admission::kAdmitted;
}

void ServerImpl::FinalizeCall(ServerCall* call) {
  // No hold is left, so nobody else runs the call's code; a kCancel lookup, the timer or a
  // shutdown may still find it in the registry, but TryAddHold refuses it.
  call->RunOnDone();
  {
    transport::PlainMutexLock lock(&calls_mu_);
    auto it = by_id_.find(CallKey{call->client(), call->call_id()});
    if (it != by_id_.end() && it->second == call) {
      by_id_.erase(it);
    } else {
      unkeyed_.erase(call);
    }
    deadlines_.Erase(call);  // does nothing without a deadline, or after the timer popped it
    if (!accepting_ && NoCallsLocked()) drained_cv_.SignalAll();  // a shutdown may be waiting
  }
  // Frees only the call's own memory; shutdown joins every thread that may get here (workers,
  // loops, the timer) before the server goes, so the server need not wait for this.
  ServerCall::Destroy(call);
}

void ServerImpl::DeadlineTimerMain() {
  transport::NameThisThread("hrpc-deadline");
  std::vector<ServerCall*> due;
  calls_mu_.Lock();
  while (!timer_stop_) {
    const int64_t next = deadlines_.next_deadline();
    const int64_t now = NowNanos();
    if (next > now) {
      timer_wake_nanos_ = next;
      if (next == INT64_MAX) {
        timer_cv_.Wait(&calls_mu_);
      } else {
        timer_cv_.WaitWithTimeout(&calls_mu_, next - now);
      }
      timer_wake_nanos_ = kTimerAwake;
      continue;
    }
    while (!deadlines_.empty() && deadlines_.next_deadline() <= now) {
      ServerCall* call = deadlines_.Pop();
      if (call->TryAddHold()) due.push_back(call);  // else: finalizing, forgotten soon
    }
    calls_mu_.Unlock();
    for (ServerCall* call : due) {
      call->Cancel(DeadlineExceededStatus());
      call->Release();
    }
    due.clear();
    calls_mu_.Lock();
  }
  calls_mu_.Unlock();
}

void ServerImpl::StopDeadlineTimer() {
  {
    transport::PlainMutexLock lock(&calls_mu_);
    timer_stop_ = true;
    timer_cv_.Signal();
  }
  if (timer_thread_.joinable()) timer_thread_.join();
}

void ServerImpl::Shutdown(std::optional<int64_t> deadline_nanos) {
  const bool from_user_code = UserCodeScope::InUserCodeOf(this);
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shutdown_started_) {
      if (!from_user_code) shutdown_mu_.Await(absl::Condition(&shutdown_done_));
      return;
    }
    shutdown_started_ = true;
    if (from_user_code) {
      HOMARPC_LOG(INFO) << "Server::Shutdown from a handler: shutting down on another thread";
      shutdown_thread_ = std::thread([this, deadline_nanos] { DoShutdown(deadline_nanos); });
      return;
    }
  }
  DoShutdown(deadline_nanos);
}

void ServerImpl::Wait() {
  absl::MutexLock lock(&shutdown_mu_);
  shutdown_mu_.Await(absl::Condition(&shutdown_done_));
}

bool ServerImpl::AwaitNoCallsLocked(std::optional<int64_t> deadline_nanos) {
  while (!NoCallsLocked()) {
    if (!deadline_nanos) {
      drained_cv_.Wait(&calls_mu_);
      continue;
    }
    const int64_t now = NowNanos();
    // A deadline long past (even INT64_MIN) must not overflow the subtraction.
    const int64_t left = *deadline_nanos > now ? *deadline_nanos - now : 0;
    if (drained_cv_.WaitWithTimeout(&calls_mu_, left)) return NoCallsLocked();
  }
  return true;
}

void ServerImpl::DoShutdown(std::optional<int64_t> deadline_nanos) {
  bool drained;
  {
    transport::PlainMutexLock lock(&calls_mu_);
    accepting_ = false;
    shutting_down_.store(true, std::memory_order_release);
    drained = AwaitNoCallsLocked(deadline_nanos);
  }
  if (!drained) {
    std::vector<ServerCall*> held;
    {
      transport::PlainMutexLock lock(&calls_mu_);
      held.reserve(by_id_.size() + unkeyed_.size());
      for (const auto& [key, call] : by_id_) {
        if (call->TryAddHold()) held.push_back(call);
      }
      for (ServerCall* call : unkeyed_) {
        if (call->TryAddHold()) held.push_back(call);
      }
    }
    for (ServerCall* call : held) {
      call->Cancel(Status(StatusCode::CANCELLED, "server shutting down"));
      call->Release();
    }
    transport::PlainMutexLock lock(&calls_mu_);
    AwaitNoCallsLocked(std::nullopt);  // handlers still running return when they notice
  }
  StopDeadlineTimer();
  executor_->Shutdown();

  // Responses handed to the transports are still being sent or awaiting acknowledgement.
  const int64_t drain_until =
      std::max(deadline_nanos.value_or(0), NowNanos() + kMinTransportDrainNanos);
  for (auto& port : ports_) {
    while (port->transport->live_server_rpcs() > 0 && NowNanos() < drain_until) {
      absl::SleepFor(absl::Microseconds(500));
    }
  }
  // Join the loops before the transports go: until Stop() returns a loop may still be in
  // OnRequest (answering "server shutting down").
  for (auto& port : ports_) port->transport->Stop();
  for (auto& port : ports_) port->transport.reset();

  absl::MutexLock lock(&shutdown_mu_);
  shutdown_done_ = true;
}

}  // namespace internal

std::shared_ptr<ServerCredentials> InsecureServerCredentials() {
  return std::make_shared<ServerCredentials>();
}

Server::Server(std::unique_ptr<internal::ServerImpl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;  // ~ServerImpl shuts down and releases the ports

void Server::Shutdown() { impl_->Shutdown(std::nullopt); }

void Server::ShutdownWithTimeout(std::chrono::nanoseconds timeout) {
  // A deadline too far away to represent (saturated to max) means no deadline.
  const std::chrono::nanoseconds deadline =
      internal::SaturatingAdd(std::chrono::nanoseconds(internal::NowNanos()), timeout);
  if (deadline == std::chrono::nanoseconds::max()) {
    impl_->Shutdown(std::nullopt);
  } else {
    impl_->Shutdown(deadline.count());
  }
}

void Server::Wait() { impl_->Wait(); }

std::vector<std::string> Server::listening_addresses() const {
  std::vector<std::string> out;
  for (const auto& port : impl_->ports()) out.push_back(internal::PeerString(port->address));
  return out;
}

}  // namespace homarpc
