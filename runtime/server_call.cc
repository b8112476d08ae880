// ServerCall implementation (server_call.h): running the handler and sending the one reply.
//
// DESIGN NOTES
// - Exactly one reply. Three parties may want to answer a request: the handler's outcome
//   (sync return or reactor Finish), a cancellation (client kCancel, ServerContext::TryCancel,
//   a Shutdown deadline), and nobody else. ClaimReply() under mu_ picks the first; the loser
//   does nothing. A sync handler still running after a cancellation returns later and its
//   result is dropped; the call (context, messages) lives until then.
// - Lifetime by holds, not shared_ptr: the call is deleted exactly once, by ServerImpl, when
//   the holds reach zero. The handler's hold is released only after the reply has been
//   handed to the transport, so a call never disappears unanswered. A kCancel lookup or a
//   shutdown takes a hold under ServerImpl::calls_mu_ (TryAddHold refuses once the count has
//   reached zero, i.e. finalization started), so the call cannot be freed under them.
// - Callback reactors. The handler runs on the loop thread and returns the reactor; Finish()
//   may come before (stored in the reactor as early_finish_) or after, from any thread.
//   AttachReactor() publishes the call to the reactor under the reactor's mutex, so exactly
//   one of "Finish saw the call" and "attach saw early_finish_" happens. OnCancel: a cancel
//   that comes before the reactor is known is remembered (on_cancel_pending_) and delivered
//   at attach time; one that comes later runs OnCancel on the cancelling thread with a hold
//   taken, so OnDone (run at finalization) always comes after OnCancel has returned.
// - OnDone runs on the thread that released the last hold: the loop thread when the handler
//   finished the reactor before returning it, otherwise the thread that called Finish() (or
//   that ran OnCancel). It runs after the reply has been handed to the transport.
// - The reply is encoded on the finishing thread (a worker for sync handlers), so payload
//   serialization stays off the loop thread. Header and payload go into one Buffer: the
//   response bytes are written once and never copied before the socket.
//
// Lock order: ServerImpl::calls_mu_ -> ServerCall::mu_; ServerUnaryReactor::mu_ is never held
// together with either. No lock is held while application code (handler, OnCancel, OnDone) or
// the transport runs.
#include "runtime/server_call.h"

#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/metadata.h"
#include "runtime/server_impl.h"
#include "runtime/target.h"
#include "transport/clock.h"
#include "transport/log.h"

namespace homarpc::internal {
namespace {

// A client timeout beyond this (about 30 years) is treated as no deadline, so the arithmetic
// below cannot overflow.
constexpr int64_t kMaxTimeoutMicros = int64_t{1} << 50;

int64_t NowNanos() { return transport::MonotonicClock::Get()->NowNanos(); }

std::string DescribeException() {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::StrCat("handler threw: ", e.what());
  } catch (...) {
    return "handler threw an exception that is not a std::exception";
  }
}

size_t MetadataBytes(const std::vector<MetadataEntry>& entries) {
  size_t total = 0;
  for (const MetadataEntry& e : entries) total += MetadataEntrySize(e.first, e.second);
  return total;
}

std::vector<MetadataEntry> Views(const std::vector<std::pair<std::string, std::string>>& md) {
  std::vector<MetadataEntry> out;
  out.reserve(md.size());
  for (const auto& [key, value] : md) out.emplace_back(key, value);
  return out;
}

void FillStatus(const Status& status, Envelope* envelope) {
  envelope->status_code = static_cast<uint32_t>(status.error_code());
  envelope->status_message = status.error_message();
  envelope->status_details = status.error_details();
}

}  // namespace

transport::Buffer EncodeStatusResponse(uint64_t call_id, const Status& status) {
  Envelope envelope;
  envelope.kind = EnvelopeKind::kResponse;
  envelope.call_id = call_id;
  FillStatus(status, &envelope);
  transport::Buffer buffer(EncodedHeaderSize(envelope));
  EncodeHeader(envelope, absl::MakeSpan(buffer.data(), buffer.size()));
  return buffer;
}

ServerCall::ServerCall(ServerImpl* server, MessageTransport* transport,
                       transport::IncomingRequest request, const Envelope& envelope,
                       std::string_view method, const MethodHandler* handler,
                       std::unique_ptr<CallMessages> messages, int64_t arrival_nanos)
    : server_(server),
      transport_(transport),
      request_(std::move(request)),
      call_id_(envelope.call_id),
      handler_(handler),
      messages_(std::move(messages)) {
  ServerContextBase* context;
  if (handler_->kind() == MethodHandler::Kind::kCallback) {
    context = &callback_context_.emplace();
  } else {
    context = &sync_context_.emplace();
  }
  context->call_ = this;
  context->method_ = std::string(method);
  for (const MetadataEntry& entry : envelope.metadata) {
    context->client_metadata_.emplace(entry.first, entry.second);
  }
  if (envelope.timeout_micros >= 0 && envelope.timeout_micros <= kMaxTimeoutMicros) {
    deadline_nanos_ = arrival_nanos + envelope.timeout_micros * transport::kNanosPerMicro;
    context->deadline_ =
        std::chrono::system_clock::now() + std::chrono::microseconds(envelope.timeout_micros);
  }
}

ServerCall::~ServerCall() = default;

void ServerCall::Start(Executor* executor) {
  if (handler_->kind() == MethodHandler::Kind::kCallback) {
    RunCallback();
    return;
  }
  executor->Run([this] { RunSync(); });
}

void ServerCall::RunSync() {
  Status status;
  {
    UserCodeScope scope(server_);
    try {
      status = handler_->RunSync(&*sync_context_, messages_->request(), messages_->response());
    } catch (...) {
      status = Status(StatusCode::UNKNOWN, DescribeException());
      HOMARPC_LOG(WARNING) << sync_context_->method() << ": " << status.error_message();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    handler_done_ = true;
  }
  SendResponse(status);
  Release();
}

void ServerCall::RunCallback() {
  ServerUnaryReactor* reactor = nullptr;
  std::optional<Status> failure;
  {
    UserCodeScope scope(server_);
    try {
      reactor =
          handler_->RunCallback(&*callback_context_, messages_->request(), messages_->response());
    } catch (...) {
      failure = Status(StatusCode::UNKNOWN, DescribeException());
      HOMARPC_LOG(WARNING) << callback_context_->method() << ": " << failure->error_message();
    }
  }
  if (!failure && reactor == nullptr) {
    failure = Status(StatusCode::INTERNAL, "callback handler returned no reactor");
  }
  if (failure) {
    // A reactor the handler may have kept is never attached: a later Finish() on it only
    // records the status (see ServerUnaryReactor::Finish).
    {
      absl::MutexLock lock(&mu_);
      handler_done_ = true;
    }
    SendResponse(*failure);
    Release();
    return;
  }
  AttachReactor(reactor);
}

void ServerCall::AttachReactor(ServerUnaryReactor* reactor) {
  bool run_on_cancel;
  {
    absl::MutexLock lock(&mu_);
    reactor_ = reactor;
    ++holds_;  // keeps the call while we finish attaching: Finish() may now come from anywhere
    run_on_cancel = on_cancel_pending_;
    on_cancel_pending_ = false;
  }
  std::optional<Status> early;
  {
    absl::MutexLock lock(&reactor->mu_);
    reactor->call_ = this;
    if (reactor->early_finish_.has_value()) {
      early = std::move(*reactor->early_finish_);
      reactor->early_finish_.reset();
    }
  }
  if (run_on_cancel) RunOnCancel();
  if (early) ReactorFinished(std::move(*early));
  Release();
}

void ServerCall::ReactorFinished(Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (handler_done_) return;
    handler_done_ = true;
  }
  SendResponse(status);
  Release();
}

bool ServerCall::IsCancelled() const {
  if (cancelled_.load(std::memory_order_acquire)) return true;
  return deadline_nanos_ != INT64_MAX && NowNanos() > deadline_nanos_;
}

void ServerCall::AddMetadata(bool trailing, const std::string& key, const std::string& value) {
  absl::Status valid = ValidateMetadata(key, value, /*user_added=*/true);
  if (!valid.ok()) {
    if (!metadata_error_) {
      metadata_error_ =
          Status(StatusCode::INTERNAL, absl::StrCat("invalid server metadata: ", valid.message()));
    }
    return;
  }
  (trailing ? trailing_metadata_ : initial_metadata_).emplace_back(key, value);
}

std::string ServerCall::peer() const { return PeerString(request_.peer); }

void ServerCall::Cancel(const Status& status) {
  bool run_on_cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.load(std::memory_order_relaxed)) return;
    cancelled_.store(true, std::memory_order_release);
    if (callback_context_.has_value() && !handler_done_) {
      if (reactor_ != nullptr) {
        run_on_cancel = true;
        ++holds_;
      } else {
        on_cancel_pending_ = true;
      }
    }
  }
  SendStatusOnly(status);
  if (run_on_cancel) {
    RunOnCancel();
    Release();
  }
}

void ServerCall::Reject(const Status& status) { SendStatusOnly(status); }

void ServerCall::RunOnCancel() {
  ServerUnaryReactor* reactor;
  {
    absl::MutexLock lock(&mu_);
    reactor = reactor_;
  }
  UserCodeScope scope(server_);
  try {
    reactor->OnCancel();
  } catch (...) {
    HOMARPC_LOG(WARNING) << "OnCancel: " << DescribeException();
  }
}

void ServerCall::RunOnDone() {
  ServerUnaryReactor* reactor;
  {
    absl::MutexLock lock(&mu_);
    reactor = reactor_;
  }
  if (reactor == nullptr) return;
  UserCodeScope scope(server_);
  try {
    reactor->OnDone();
  } catch (...) {
    HOMARPC_LOG(WARNING) << "OnDone: " << DescribeException();
  }
}

bool ServerCall::TryAddHold() {
  absl::MutexLock lock(&mu_);
  if (holds_ == 0) return false;
  ++holds_;
  return true;
}

void ServerCall::Release() {
  {
    absl::MutexLock lock(&mu_);
    if (--holds_ > 0) return;
  }
  server_->FinalizeCall(this);
}

bool ServerCall::ClaimReply() {
  absl::MutexLock lock(&mu_);
  if (replied_) return false;
  replied_ = true;
  return true;
}

void ServerCall::SendResponse(const Status& status) {
  if (!ClaimReply()) return;
  transport_->Reply(request_, EncodeResponse(status));
}

void ServerCall::SendStatusOnly(const Status& status) {
  if (!ClaimReply()) return;
  transport_->Reply(request_, EncodeStatusResponse(call_id_, status));
}

transport::Buffer ServerCall::EncodeResponse(const Status& handler_status) {
  const ServerLimits& limits = server_->limits();
  Status status = metadata_error_ ? *metadata_error_ : handler_status;

  Envelope envelope;
  envelope.kind = EnvelopeKind::kResponse;
  envelope.call_id = call_id_;
  envelope.metadata = Views(initial_metadata_);
  envelope.trailing_metadata = Views(trailing_metadata_);
  const size_t initial_bytes = MetadataBytes(envelope.metadata);
  const size_t trailing_bytes = MetadataBytes(envelope.trailing_metadata);
  if (initial_bytes > limits.max_metadata || trailing_bytes > limits.max_metadata) {
    status = Status(StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("server metadata of ", std::max(initial_bytes, trailing_bytes),
                                 " bytes exceeds the limit of ", limits.max_metadata));
    envelope.metadata.clear();
    envelope.trailing_metadata.clear();
  }

  google::protobuf::MessageLite* response = messages_->response();
  size_t payload_bytes = 0;
  if (status.ok()) {
    payload_bytes = response->ByteSizeLong();
    if (payload_bytes > limits.max_send_message) {
      status = Status(StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("Sent message larger than max (", payload_bytes, " vs. ",
                                   limits.max_send_message, ")"));
      payload_bytes = 0;
    }
  }
  FillStatus(status, &envelope);
  size_t header_bytes = EncodedHeaderSize(envelope);
  if (header_bytes + payload_bytes > limits.max_message) {
    // Too large for the transport: say so with the smallest answer there is.
    return EncodeStatusResponse(
        call_id_, Status(StatusCode::RESOURCE_EXHAUSTED,
                         absl::StrCat("response of ", header_bytes + payload_bytes,
                                      " bytes exceeds the message limit of ", limits.max_message)));
  }
  transport::Buffer buffer(header_bytes + payload_bytes);
  EncodeHeader(envelope, absl::MakeSpan(buffer.data(), header_bytes));
  if (payload_bytes > 0) response->SerializeWithCachedSizesToArray(buffer.data() + header_bytes);
  return buffer;
}

}  // namespace homarpc::internal
