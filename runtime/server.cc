// Server and ServerImpl (server.h, server_impl.h): request dispatch, the live-call registry,
// and shutdown.
//
// DESIGN NOTES
// - Dispatch happens on the loop thread that received the request: decode the envelope,
//   look the method up, check limits, parse the payload, then either run a callback handler
//   right there or hand the call to the executor. Every request that is not turned into a
//   call is answered at once with a status-only envelope, so each Homa request gets exactly
//   one response (the transport holds server state until it does).
// - Requests that reach a loop before BuildAndStart() has finished wait on `started_` (the
//   ports' transports are still being written); a loop thread waits only during start-up.
// - Live calls sit in `all_calls_` (for shutdown) and `by_id_` (client address + call id, for
//   kCancel). A cancel that arrives before its call (separate Homa messages may be reordered)
//   finds nothing and is answered OK; the call then runs to completion. A client that reuses
//   a call id while the first call lives gets the second call served but not cancellable.
//   TODO(perf): one mutex for the registry serves every loop; shard it per loop if several
//   loops ever contend on it.
// - Shutdown: stop registering (new requests -> UNAVAILABLE), wait for the live calls; past
//   the deadline cancel them (their clients get CANCELLED now; handlers see IsCancelled) and
//   wait for their handlers to return, as gRPC does. Then stop the executor, give the
//   transports up to max(deadline, now + 1 s) to get responses acknowledged, and destroy them.
//   From a handler, Shutdown cannot wait for itself: it starts the same sequence on a
//   server-owned thread and returns; Wait() and ~Server (from other threads) see it through.
//
// Lock order: shutdown_mu_ (never held while calls run) ; calls_mu_ -> ServerCall::mu_.
#include "runtime/server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/server_call.h"
#include "runtime/server_impl.h"
#include "runtime/target.h"
#include "transport/clock.h"
#include "transport/log.h"

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

ServerImpl::ServerImpl(ServerLimits limits, MethodMap methods, std::unique_ptr<Executor> executor)
    : limits_(limits), methods_(std::move(methods)), executor_(std::move(executor)) {}

ServerImpl::~ServerImpl() {
  Shutdown(std::nullopt);
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
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
  raw->owned = std::move(*transport);
  raw->transport = raw->owned.get();
  raw->address = raw->transport->local_address();
  ports_.push_back(std::move(port));
  return absl::OkStatus();
}

void ServerImpl::Start() { started_.Notify(); }

void ServerImpl::AbortStart() {
  {
    absl::MutexLock lock(&calls_mu_);
    accepting_ = false;
    shutting_down_.store(true, std::memory_order_release);
  }
  started_.Notify();  // held requests now get UNAVAILABLE
  for (auto& port : ports_) port->owned.reset();
  executor_->Shutdown();
  absl::MutexLock lock(&shutdown_mu_);
  shutdown_started_ = true;
  shutdown_done_ = true;
}

void ServerImpl::OnRequest(ServerPort* port, transport::IncomingRequest request) {
  if (!started_.HasBeenNotified()) started_.WaitForNotification();
  const int64_t arrival_nanos = NowNanos();
  MessageTransport* transport = port->transport;
  auto answer = [&](uint64_t call_id, const Status& status) {
    transport->Reply(request, EncodeStatusResponse(call_id, status));
  };

  absl::StatusOr<Envelope> decoded = Decode(request.payload.span());
  if (!decoded.ok()) {
    // We cannot trust any field, call_id included; the client matches responses by Homa RPC,
    // so call_id 0 still reaches the right caller.
    if (bad_envelopes_.fetch_add(1, std::memory_order_relaxed) < kBadEnvelopesLogged) {
      HOMARPC_LOG(WARNING) << "undecodable request from " << request.peer.ToString() << ": "
                           << decoded.status().message();
    }
    answer(0, Status(StatusCode::INTERNAL,
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
  size_t metadata_bytes = 0;
  for (const MetadataEntry& e : envelope.metadata) {
    metadata_bytes += MetadataEntrySize(e.first, e.second);
  }
  if (metadata_bytes > limits_.max_metadata) {
    answer(envelope.call_id,
           Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("request metadata of ", metadata_bytes,
                               " bytes exceeds the server's limit of ", limits_.max_metadata)));
    return;
  }
  if (envelope.payload.size() > limits_.max_receive_message) {
    answer(envelope.call_id,
           Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("Received message larger than max (", envelope.payload.size(),
                               " vs. ", limits_.max_receive_message, ")")));
    return;
  }
  std::unique_ptr<CallMessages> messages = handler->NewMessages();
  if (!messages->request()->ParseFromArray(envelope.payload.data(),
                                           static_cast<int>(envelope.payload.size()))) {
    answer(envelope.call_id,
           Status(StatusCode::INTERNAL,
                  absl::StrCat("failed to parse the request for ", AsAbsl(envelope.method))));
    return;
  }

  // The call takes the request message over; `envelope` views stay valid (same bytes).
  auto* call = new ServerCall(this, transport, std::move(request), envelope, method->first, handler,
                              std::move(messages), arrival_nanos);
  if (!Register(call, CallKey{call->client(), call->call_id()})) {
    call->Reject(Status(StatusCode::UNAVAILABLE, "server shutting down"));
    delete call;
    return;
  }
  call->Start(executor_.get());
}

void ServerImpl::HandleCancel(ServerPort* port, const transport::IncomingRequest& request,
                              uint64_t call_id) {
  ServerCall* call = nullptr;
  {
    absl::MutexLock lock(&calls_mu_);
    auto it = by_id_.find(CallKey{request.peer, call_id});
    if (it != by_id_.end() && it->second->TryAddHold()) call = it->second;
  }
  if (call != nullptr) {
    call->Cancel(Status(StatusCode::CANCELLED, "cancelled by the client"));
    call->Release();
  }
  port->transport->Reply(request, EncodeStatusResponse(call_id, Status()));
}

bool ServerImpl::Register(ServerCall* call, const CallKey& key) {
  absl::MutexLock lock(&calls_mu_);
  if (!accepting_) return false;
  all_calls_.insert(call);
  by_id_.try_emplace(key, call);
  return true;
}

void ServerImpl::FinalizeCall(ServerCall* call) {
  {
    absl::MutexLock lock(&calls_mu_);
    auto it = by_id_.find(CallKey{call->client(), call->call_id()});
    if (it != by_id_.end() && it->second == call) by_id_.erase(it);
    all_calls_.erase(call);
    ++finalizing_;
  }
  call->RunOnDone();
  delete call;
  absl::MutexLock lock(&calls_mu_);
  --finalizing_;
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

void ServerImpl::DoShutdown(std::optional<int64_t> deadline_nanos) {
  const absl::Condition no_calls(this, &ServerImpl::NoCallsLocked);
  bool drained = true;
  {
    absl::MutexLock lock(&calls_mu_);
    accepting_ = false;
    shutting_down_.store(true, std::memory_order_release);
    if (!deadline_nanos) {
      calls_mu_.Await(no_calls);
    } else {
      drained = calls_mu_.AwaitWithTimeout(
          no_calls, absl::Nanoseconds(std::max<int64_t>(0, *deadline_nanos - NowNanos())));
    }
  }
  if (!drained) {
    std::vector<ServerCall*> held;
    {
      absl::MutexLock lock(&calls_mu_);
      held.reserve(all_calls_.size());
      for (ServerCall* call : all_calls_) {
        if (call->TryAddHold()) held.push_back(call);
      }
    }
    for (ServerCall* call : held) {
      call->Cancel(Status(StatusCode::CANCELLED, "server shutting down"));
      call->Release();
    }
    absl::MutexLock lock(&calls_mu_);
    calls_mu_.Await(no_calls);  // handlers still running return when they notice
  }
  executor_->Shutdown();

  // Responses handed to the transports are still being sent or awaiting acknowledgement.
  const int64_t drain_until =
      std::max(deadline_nanos.value_or(0), NowNanos() + kMinTransportDrainNanos);
  for (auto& port : ports_) {
    while (port->transport->live_server_rpcs() > 0 && NowNanos() < drain_until) {
      absl::SleepFor(absl::Microseconds(500));
    }
  }
  for (auto& port : ports_) port->owned.reset();

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
  const int64_t now = internal::NowNanos();
  const int64_t nanos = timeout.count();
  // A deadline too far away to represent means no deadline.
  if (nanos > INT64_MAX - now) {
    impl_->Shutdown(std::nullopt);
  } else {
    impl_->Shutdown(now + nanos);
  }
}

void Server::Wait() { impl_->Wait(); }

std::vector<std::string> Server::listening_addresses() const {
  std::vector<std::string> out;
  for (const auto& port : impl_->ports()) out.push_back(internal::PeerString(port->address));
  return out;
}

}  // namespace homarpc
