// ServerCall implementation (server_call.h): running the handler and sending the one reply.
//
// DESIGN NOTES
// - Exactly one reply. Two parties may want to answer a request: the handler's outcome (sync
//   return or reactor Finish) and a cancellation (client kCancel, ServerContext::TryCancel,
//   the deadline timer, a Shutdown deadline). ClaimReply() (an atomic exchange) picks the
//   first; the loser does nothing. A sync handler still running after a cancellation returns
//   later and its result is dropped; the call (context, messages) lives until then. A handler
//   that finishes after its deadline is answered DEADLINE_EXCEEDED, not with its own status:
//   the timer may not have fired yet, and that is what gRPC servers answer.
// - Lifetime by holds, not shared_ptr: the call is destroyed exactly once, by ServerImpl, when
//   the holds reach zero. The handler's hold is released only after the reply has been
//   handed to the transport, so a call never disappears unanswered. A kCancel lookup, the
//   deadline timer or a shutdown takes a hold under ServerImpl::calls_mu_ (TryAddHold refuses
//   once the count has reached zero, i.e. finalization started; the call leaves the registry
//   under that lock before it is freed), so the call cannot be freed under them.
// - Few locks. The hold count, "replied" and "cancelled" are atomics, so a sync call takes no
//   lock of its own at all. mu_ only orders the callback protocol below (who runs OnCancel).
// - One allocation: Create() puts the request and response objects right after the call
//   (MethodHandler::ConstructMessages), and the parse happens in that storage before the call
//   object is even constructed; the method name is a pointer to the registry's key.
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
// - Recycled storage (message_pool.h). The response constructed for a call may hold the
//   storage of an earlier call's large response (MethodHandler::ConstructMessages); when the
//   call is freed the handler takes that storage back (Recycle), and a large response sent
//   zero-copy goes to the method's response pool once the transport releases it. A bulk
//   method's payload then lands in memory that is already mapped. Requests are not pooled
//   (service.h says why).
// - The reply is encoded on the finishing thread (a worker for sync handlers), so payload
//   serialization stays off the loop thread. Header and payload go into one Buffer: the
//   response bytes are written once and never copied before the socket.
//
// Lock order: ServerImpl::calls_mu_ -> ServerCall::mu_; ServerUnaryReactor::mu_ is never held
// together with either. No lock is held while application code (handler, OnCancel, OnDone) or
// the transport runs.
#include "runtime/server_call.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <exception>
#include <limits>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "runtime/deadline.h"
#include "runtime/metadata.h"
#include "runtime/payload_encoder.h"
#include "runtime/server_impl.h"
#include "runtime/target.h"
#include "transport/clock.h"
#include "transport/log.h"
#include "transport/trace_points.h"

namespace homarpc::internal {
namespace {

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

// The code that goes on the wire: gRPC has 17 (0..16); anything else a handler made up
// (DO_NOT_USE, a cast) would make the client reject the response, so it becomes UNKNOWN.
uint32_t WireCode(StatusCode code) {
  const int n = static_cast<int>(code);
  return n >= 0 && n <= 16 ? static_cast<uint32_t>(n) : static_cast<uint32_t>(StatusCode::UNKNOWN);
}

void FillStatus(const Status& status, Envelope* envelope) {
  envelope->status_code = WireCode(status.error_code());
  envelope->status_message = status.error_message();
  envelope->status_details = status.error_details();
}

// Where the messages sit in a call's allocation, and how that allocation is aligned.
size_t AllocAlign(const MethodHandler* handler) {
  return std::max(alignof(ServerCall), handler->messages_align());
}
size_t MessagesOffset(const MethodHandler* handler) {
  const size_t align = handler->messages_align();
  return (sizeof(ServerCall) + align - 1) / align * align;
}
void* Allocate(const MethodHandler* handler) {
  const size_t bytes = MessagesOffset(handler) + handler->messages_size();
  const size_t align = AllocAlign(handler);
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes);
  return ::operator new(bytes, std::align_val_t(align));
}
void Deallocate(void* storage, const MethodHandler* handler) {
  const size_t align = AllocAlign(handler);
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    ::operator delete(storage);
  } else {
    ::operator delete(storage, std::align_val_t(align));
  }
}

}  // namespace

Status DeadlineExceededStatus() {
  return Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
}

transport::Buffer EncodeStatusResponse(uint64_t call_id, const Status& status) {
  Envelope envelope;
  envelope.kind = EnvelopeKind::kResponse;
  envelope.call_id = call_id;
  FillStatus(status, &envelope);
  transport::Buffer buffer(EncodedHeaderSize(envelope));
  EncodeHeader(envelope, absl::MakeSpan(buffer.data(), buffer.size()));
  return buffer;
}

ServerCall* ServerCall::Create(ServerImpl* server, MessageTransport* transport,
                               transport::IncomingRequest& request, const Envelope& envelope,
                               const std::string* method, const MethodHandler* handler,
                               int64_t arrival_nanos) {
  void* storage = Allocate(handler);
  CallMessages* messages =
      handler->ConstructMessages(static_cast<char*>(storage) + MessagesOffset(handler));
  if (!messages->request()->ParseFromArray(envelope.payload.data(),
                                           static_cast<int>(envelope.payload.size()))) {
    handler->Recycle(messages);  // pooled storage it was given goes back
    messages->~CallMessages();
    Deallocate(storage, handler);
    return nullptr;
  }
  return new (storage) ServerCall(server, transport, std::move(request), envelope, method, handler,
                                  messages, arrival_nanos);
}

void ServerCall::Destroy(ServerCall* call) {
  const MethodHandler* handler = call->handler_;
  call->~ServerCall();
  Deallocate(call, handler);
}

ServerCall::ServerCall(ServerImpl* server, MessageTransport* transport,
                       transport::IncomingRequest request, const Envelope& envelope,
                       const std::string* method, const MethodHandler* handler,
                       CallMessages* messages, int64_t arrival_nanos)
    : server_(server),
      transport_(transport),
      request_(std::move(request)),
      call_id_(envelope.call_id),
      handler_(handler),
      messages_(messages) {
  ServerContextBase* context;
  if (handler_->kind() == MethodHandler::Kind::kCallback) {
    context = &callback_context_.emplace();
  } else {
    context = &sync_context_.emplace();
  }
  context->call_ = this;
  context->method_ = method;
  for (const MetadataEntry& entry : envelope.metadata) {
    context->client_metadata_.emplace(entry.first, entry.second);
  }
  if (envelope.timeout_micros >= 0) {
    // Saturating (deadline.h): a timeout too long to represent means no deadline, which is
    // INT64_MAX for the timer and time_point::max() for the context.
    const std::chrono::nanoseconds timeout = SaturatingDurationCast<std::chrono::nanoseconds>(
        std::chrono::microseconds(envelope.timeout_micros));
    deadline_node_.deadline_nanos =
        SaturatingAdd(std::chrono::nanoseconds(arrival_nanos), timeout).count();
    context->deadline_ = DeadlineAfter(timeout);
  }
}

// The messages live in this allocation and go first; the members (contexts whose metadata
// views point into request_) go after, in reverse order of declaration.
ServerCall::~ServerCall() {
  // A pooled response's storage goes to the method's next call (message_pool.h).
  handler_->Recycle(messages_);
  messages_->~CallMessages();
}

void ServerCall::Start(Executor* executor, bool on_worker) {
  if (is_callback()) {
    RunCallback();
    return;
  }
  if (on_worker) {
    RunSync();
    return;
  }
  if (executor->num_threads() > 0 && handler_->average_run_nanos() < kQuickHandlerNanos) {
    absl::AnyInvocable<void() &&> task = [this] { RunSync(/*after_round=*/true); };
    if (transport_->RunAfterRound(request_, task)) return;
  }
  executor->Run([this] { RunSync(); });
}

void ServerCall::RunSync(bool after_round) {
  Status status;
  const int64_t start = NowNanos();
  {
    UserCodeScope scope(server_);
    try {
      HOMARPC_TRACE_POINT(kHandlerBegin);
      status = handler_->RunSync(&*sync_context_, messages_->request(), messages_->response());
      HOMARPC_TRACE_POINT(kHandlerEnd);
    } catch (...) {
      status = Status(StatusCode::UNKNOWN, DescribeException());
      HOMARPC_LOG(WARNING) << sync_context_->method() << ": " << status.error_message();
    }
  }
  if (after_round && status.ok() && messages_->response()->ByteSizeLong() > kOffloadBytes) {
    // On the loop's thread, whose next round waits for this: megabytes are serialized on a
    // worker, as for a handler finished on the loop (SendResponseAndRelease).
    handler_->RecordRun(NowNanos() - start);
    server_->offload_executor()->Run([this, status = std::move(status)] {
      SendResponse(status);
      Release();
    });
    return;
  }
  SendResponse(status);
  // The response's encoding counts too (MethodHandler::average_run_nanos).
  handler_->RecordRun(NowNanos() - start);
  Release();
}

void ServerCall::RunCallback() {
  ServerUnaryReactor* reactor = nullptr;
  std::optional<Status> failure;
  {
    UserCodeScope scope(server_);
    try {
      HOMARPC_TRACE_POINT(kHandlerBegin);
      reactor =
          handler_->RunCallback(&*callback_context_, messages_->request(), messages_->response());
      HOMARPC_TRACE_POINT(kHandlerEnd);
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
      transport::PlainMutexLock lock(&mu_);
      handler_done_ = true;
    }
    SendResponse(*failure);
    Release();
    return;
  }
  AttachReactor(reactor);
}

void ServerCall::AttachReactor(ServerUnaryReactor* reactor) {
  std::optional<Status> early;
  {
    transport::PlainMutexLock lock(&reactor->mu_);
    if (reactor->early_finish_.has_value()) {
      // Finished before it was returned: no later Finish() reaches us (the reactor ignores a
      // second one), so the call need not be published to it.
      early = std::move(*reactor->early_finish_);
      reactor->early_finish_.reset();
    } else {
      // From here Finish() may come from any thread and release the handler's hold: keep the
      // call alive with one of our own until we are done attaching.
      holds_.fetch_add(1, std::memory_order_relaxed);
      reactor->call_ = this;
    }
  }
  bool run_on_cancel;
  bool finish_now = false;
  {
    transport::PlainMutexLock lock(&mu_);
    reactor_ = reactor;
    run_on_cancel = std::exchange(on_cancel_pending_, false);
    if (early && !run_on_cancel) {
      handler_done_ = true;  // the common case: one lock for attaching and finishing
      finish_now = true;
    }
  }
  if (finish_now) {
    SendResponseAndRelease(std::move(*early));  // the handler's hold: finalizes (OnDone)
    return;
  }
  if (run_on_cancel) RunOnCancel(reactor);  // the cancel came before the reactor
  if (early) {
    ReactorFinished(std::move(*early));  // releases the handler's hold
  } else {
    Release();  // our attach hold
  }
}

void ServerCall::ReactorFinished(Status status) {
  {
    transport::PlainMutexLock lock(&mu_);
    if (handler_done_) return;
    handler_done_ = true;
  }
  SendResponseAndRelease(std::move(status));
}

void ServerCall::SendResponseAndRelease(Status status) {
  Executor* executor = nullptr;
  if (InlineLoopScope::active() && status.ok()) executor = server_->offload_executor();
  if (executor != nullptr && messages_->response()->ByteSizeLong() > kOffloadBytes) {
    // Finished inside a handler running on a loop thread: serializing megabytes here would
    // hold up that loop's other calls (kOffloadBytes). The hold being released keeps the
    // call alive until the worker is done.
    executor->Run([this, status = std::move(status)] {
      SendResponse(status);
      Release();
    });
    return;
  }
  SendResponse(status);
  Release();
}

bool ServerCall::IsCancelled() const {
  if (cancelled_.load(std::memory_order_acquire)) return true;
  const int64_t deadline = deadline_node_.deadline_nanos;
  return deadline != INT64_MAX && NowNanos() > deadline;
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
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  ServerUnaryReactor* run_on_cancel = nullptr;
  if (is_callback()) {
    transport::PlainMutexLock lock(&mu_);
    if (!handler_done_) {
      if (reactor_ != nullptr) {
        run_on_cancel = reactor_;
        holds_.fetch_add(1, std::memory_order_relaxed);  // the caller holds one: count > 0
      } else {
        on_cancel_pending_ = true;  // AttachReactor runs it
      }
    }
  }
  SendStatusOnly(status);
  if (run_on_cancel != nullptr) {
    RunOnCancel(run_on_cancel);
    Release();
  }
}

void ServerCall::Reject(const Status& status) { SendStatusOnly(status); }

void ServerCall::RunOnCancel(ServerUnaryReactor* reactor) {
  UserCodeScope scope(server_);
  try {
    reactor->OnCancel();
  } catch (...) {
    HOMARPC_LOG(WARNING) << "OnCancel: " << DescribeException();
  }
}

void ServerCall::RunOnDone() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!is_callback()) return;
  // No hold is left: nothing else touches the call, and the acquire in Release() made every
  // earlier write visible (see reactor_).
  ServerUnaryReactor* reactor = reactor_;
  if (reactor == nullptr) return;
  UserCodeScope scope(server_);
  try {
    reactor->OnDone();
  } catch (...) {
    HOMARPC_LOG(WARNING) << "OnDone: " << DescribeException();
  }
}

bool ServerCall::TryAddHold() {
  int holds = holds_.load(std::memory_order_relaxed);
  do {
    if (holds == 0) return false;
  } while (!holds_.compare_exchange_weak(holds, holds + 1, std::memory_order_relaxed));
  return true;
}

void ServerCall::Release() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) server_->FinalizeCall(this);
}

void ServerCall::SendResponse(const Status& status) {
  if (!ClaimReply()) return;
  const int64_t deadline = deadline_node_.deadline_nanos;  // constant after construction
  if (deadline != INT64_MAX && NowNanos() > deadline) {
    cancelled_.store(true, std::memory_order_release);
    transport_->Reply(request_, EncodeStatusResponse(call_id_, DeadlineExceededStatus()));
    return;
  }
  transport_->Reply(request_, EncodeResponse(status));
}

void ServerCall::SendStatusOnly(const Status& status) {
  if (!ClaimReply()) return;
  transport_->Reply(request_, EncodeStatusResponse(call_id_, status));
}

transport::MessageBytes ServerCall::EncodeResponse(const Status& handler_status) {
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
  if (payload_bytes >= kZeroCopyMinBytes) {
    // The call may be freed before the transport is done with the bytes: the response leaves
    // it (its fields' storage moves, nothing is copied) and the release frees it.
    std::unique_ptr<google::protobuf::MessageLite> owned = messages_->TakeResponse();
    transport::Buffer head(header_bytes + kZeroCopyHeadScratch);
    EncodeHeader(envelope, absl::MakeSpan(head.data(), header_bytes));
    transport::MessageBytes bytes;
    if (owned->ByteSizeLong() != payload_bytes ||
        !EncodeBorrowing(*owned, payload_bytes, std::move(head), header_bytes, &bytes)) {
      return EncodeStatusResponse(
          call_id_, Status(StatusCode::INTERNAL, "response changed while it was being sent"));
    }
    // Once sent, its storage goes to the method's next call (message_pool.h), counted as
    // what this payload used (pooled storage it replaced is not counted).
    bytes.OnRelease([owned = std::move(owned), pool = handler_->response_pool(),
                     payload_bytes]() mutable {
      if (pool != nullptr) pool->Put(std::move(owned), payload_bytes);
    });
    return bytes;
  }
  transport::Buffer buffer(header_bytes + payload_bytes);
  EncodeHeader(envelope, absl::MakeSpan(buffer.data(), header_bytes));
  if (payload_bytes > 0) response->SerializeWithCachedSizesToArray(buffer.data() + header_bytes);
  return buffer;
}

}  // namespace homarpc::internal
