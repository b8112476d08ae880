// ClientCall: one unary call from encode to completion (client_call.h). A blocking call runs
// on the caller's thread except for the transport callback, which only parks the outcome; an
// asynchronous call completes on the transport's thread, or, when its response is larger
// than kOffloadBytes, on the channel's completion worker (ChannelImpl::TryOffload): parsing
// megabytes on the loop stalled every other call of its socket, as on a server.
//
// DESIGN NOTES
//
// Allocation. A blocking call allocates nothing for its state: the ClientCall lives on the
// caller's stack, and the context's active_call_ (a shared_ptr, because asynchronous calls
// need an owner) is a non-owning alias of it (the aliasing constructor with an empty owner:
// no control block, no reference count). That is safe because the caller does not return
// before it has removed the alias from the context under the context's mutex, and TryCancel()
// only dereferences active_call_ under that same mutex. An asynchronous call is one
// make_shared; the context's active_call_ owns it until the completion callback moves it out.
// The request is encoded straight into the one transport::Buffer that is sent (envelope header,
// then the protobuf serialized in place) -- or, for a blocking call with a payload of
// kZeroCopyMinBytes or more, its large fields are borrowed (payload_encoder.h) and the call
// returns only once the transport has released them; the response's bytes stay in the
// transport's Buffer, which the context keeps so the server-metadata views stay valid; the
// payload is parsed from it in place. The transport callback captures one raw pointer, so std::function stores it
// without allocating.
//
// Waiting. A blocking caller drives its own call when the transport lends it a socket
// (MessageTransport::BorrowDriver, kArgCallerSockets): its thread sends the request, polls the
// socket for the response and runs the protocol's timers, spinning for the poll time and then
// sleeping in the kernel, and gives the socket back when the call is over. Otherwise a loop
// thread would carry the call and the caller would wait for it: three threads (caller, client
// loop, server loop) then want two cores in a loopback benchmark, and measured on this 2-core
// VM the 64 B p50 went from 48 us through the loop to 17 us driven (homarpc-bench
// --scenario=unary, docs/rpc-benchmarks.md). When no socket is lent (all in use, none
// allowed, callback calls, the in-memory fabric) the caller spins for the transport's poll
// time (a sleeping thread costs ~50 us to wake here, a whole small round trip costs less)
// with a CPU pause, yielding now and then so that on a machine with few cores the loop
// threads it waits for get to run; then it sleeps on a PlainNotification. Either way the
// transport callback only stores the outcome and notifies: envelope decoding and protobuf
// parsing happen after the wait, on the caller's thread (so a loop goes back to the network
// sooner). A PlainNotification may be destroyed as soon as it has been notified (its
// destructor waits for Notify() to leave), which the stack-allocated call relies on.
//
// Cancellation. TryCancel() (any thread, under the context's mutex) and Start() (the calling
// thread) race: the transport RPC id is only known once SendRequest() returned, and the
// response may even have arrived by then. Each side sets its flag (cancel_requested_, sent_)
// and then reads the other's, both sequentially consistent, so at least one of them sees both
// and cancels; cancel_done_ makes that happen once. A cancel seen before sending sends
// nothing. Cancelling aborts the transport RPC (the caller sees CANCELLED at once) and sends
// the server a kCancel envelope for the call id so that its IsCancelled() becomes true.
// The kCancel envelope leaves from the socket that carried the call (SendRequestBeside), since
// the server knows calls by client address and call id; for a caller-driven call that socket
// is its lent one, and the abort and the envelope are posted to the thread driving it.
// Aborting from a non-transport thread only posts to the transport, so TryCancel can do it
// under the context's mutex; on the channel's own transport thread (TryCancel from inside a
// completion callback) the abort of an asynchronous call completes it inline, and that
// completion takes the mutex and may run user code that destroys the context: there TryCancel
// releases the mutex first (ClientCall::Cancel explains why the call is still alive then). A
// blocking call is always cancelled under the mutex (its completion never takes it), also
// there: it may be driven by its caller on another thread, which must not return meanwhile.
// Races with the call's own completion: an abort or envelope that reaches a lent socket after
// its caller stopped driving it waits there for the next borrower (or the channel's end),
// when the abort finds nothing and the server answers a cancel for a call it already ended.
//
// Lifetime against the channel. Calls hold a raw ChannelImpl pointer: the caller holds the
// channel while a call starts, and the transport completes every call (CANCELLED) inside
// ~ChannelImpl before the rest of the channel goes. The cancel path is the one that can run
// concurrently with that destructor; ChannelImpl::CancelRpc checks closing_ under close_mu_.
//
// Lock order: ClientContext::mu_ -> ChannelImpl::close_mu_ (the transport's own locks after).
#include "runtime/client_call.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/message_lite.h"
#include "runtime/deadline.h"
#include "runtime/envelope.h"
#include "runtime/executor.h"
#include "runtime/metadata.h"
#include "runtime/payload_encoder.h"
#include "transport/clock.h"
#include "transport/trace_points.h"

namespace homarpc::internal {
namespace {

// The id of the channel whose completion callback the current thread is running, 0 for none
// (see ChannelImpl::InCallbackThread).
thread_local uint64_t t_callback_channel = 0;
// The same for a completion running on a channel's completion worker (InCompletionWorker).
thread_local uint64_t t_worker_channel = 0;

// Sets one of the marks above for the current thread for the scope's life, then restores it.
class ThreadMark {
 public:
  ThreadMark(uint64_t& mark, uint64_t channel_id) : mark_(mark), saved_(mark) {
    mark_ = channel_id;
  }
  ~ThreadMark() { mark_ = saved_; }
  ThreadMark(const ThreadMark&) = delete;
  ThreadMark& operator=(const ThreadMark&) = delete;

 private:
  uint64_t& mark_;
  const uint64_t saved_;
};

}  // namespace

bool ChannelImpl::InCallbackThread() const { return t_callback_channel == id_; }

bool ChannelImpl::InCompletionWorker() const { return t_worker_channel == id_; }

bool ChannelImpl::TryOffload(absl::AnyInvocable<void() &&>& task) {
  absl::MutexLock lock(&offload_mu_);
  if (offload_closed_) return false;
  if (offload_executor_ == nullptr) offload_executor_ = NewWorkerPool(1, /*spin_nanos=*/0);
  offload_executor_->Run(std::move(task));
  return true;
}

Status ChannelImpl::BlockingUnaryCall(const RpcMethod& method, ClientContext* context,
                                      const google::protobuf::MessageLite& request,
                                      google::protobuf::MessageLite* response) {
  return ClientCall::Blocking(*this, method, context, request, response);
}

void ChannelImpl::AsyncUnaryCall(const RpcMethod& method, ClientContext* context,
                                 const google::protobuf::MessageLite* request,
                                 google::protobuf::MessageLite* response,
                                 std::function<void(Status)> on_done) {
  ClientCall::Async(*this, method, context, *request, response, std::move(on_done));
}

Status ClientCall::Blocking(ChannelImpl& channel, const RpcMethod& method, ClientContext* context,
                            const google::protobuf::MessageLite& request,
                            google::protobuf::MessageLite* response) {
  HOMARPC_TRACE_POINT(kCallBegin);
  HOMARPC_TRACE_POINT_AT_EXIT(kCallEnd);
  if (!channel.error_.ok()) {
    return Status(StatusCode::UNAVAILABLE, std::string(channel.error_.message()));
  }
  if (channel.InCallbackThread()) {
    // The response would have to be delivered by the very thread that would wait for it.
    return Status(StatusCode::FAILED_PRECONDITION,
                  "blocking call from a completion callback of the same channel would deadlock");
  }
  const uint64_t call_id = channel.next_call_id_.fetch_add(1, std::memory_order_relaxed);
  int64_t deadline_nanos = INT64_MAX;
  // Constructed first: a zero-copy request notifies it when released.
  ClientCall call(&channel, context, response, nullptr);
  transport::MessageBytes bytes;
  Status status = Encode(channel, method, *context, request, call_id, &deadline_nanos,
                         &call.request_released_, &call.request_borrowed_, &bytes);
  if (!status.ok()) return status;
  HOMARPC_TRACE_POINT(kCallEncoded);
  // Non-owning alias (see DESIGN NOTES): `call` outlives its registration in the context.
  const std::shared_ptr<ClientCall> alias(std::shared_ptr<ClientCall>(), &call);
  status = call.Start(alias, call_id, std::move(bytes), deadline_nanos);
  if (!status.ok()) return status;
  return call.Wait();
}

void ClientCall::Async(ChannelImpl& channel, const RpcMethod& method, ClientContext* context,
                       const google::protobuf::MessageLite& request,
                       google::protobuf::MessageLite* response,
                       std::function<void(Status)> on_done) {
  if (!channel.error_.ok()) {
    on_done(Status(StatusCode::UNAVAILABLE, std::string(channel.error_.message())));
    return;
  }
  const uint64_t call_id = channel.next_call_id_.fetch_add(1, std::memory_order_relaxed);
  int64_t deadline_nanos = INT64_MAX;
  transport::MessageBytes bytes;
  // Copied, never borrowed: the caller may drop the request once the call has started.
  Status status = Encode(channel, method, *context, request, call_id, &deadline_nanos,
                         /*released=*/nullptr, /*borrowed=*/nullptr, &bytes);
  if (!status.ok()) {
    on_done(std::move(status));
    return;
  }
  // `call` keeps the call alive until Start() returns even if it completes inside it.
  auto call = std::make_shared<ClientCall>(&channel, context, response, std::move(on_done));
  status = call->Start(call, call_id, std::move(bytes), deadline_nanos);
  if (!status.ok()) {
    std::function<void(Status)> done = std::move(call->on_done_);
    done(std::move(status));
  }
}

Status ClientCall::Encode(const ChannelImpl& channel, const RpcMethod& method,
                          const ClientContext& context,
                          const google::protobuf::MessageLite& request, uint64_t call_id,
                          int64_t* deadline_nanos, transport::PlainNotification* released,
                          bool* borrowed, transport::MessageBytes* out) {
  const ChannelLimits& limits = channel.limits_;
  Envelope envelope;
  envelope.kind = EnvelopeKind::kRequest;
  envelope.call_id = call_id;
  envelope.method = method.name;

  if (!context.metadata_.empty()) {
    size_t bytes = 0;
    envelope.metadata.reserve(context.metadata_.size());
    for (const auto& [key, value] : context.metadata_) {
      if (absl::Status s = ValidateMetadata(key, value, /*user_added=*/true); !s.ok()) {
        return Status(StatusCode::INTERNAL, std::string(s.message()));
      }
      bytes += MetadataEntrySize(key, value);
      envelope.metadata.emplace_back(key, value);
    }
    if (bytes > limits.max_metadata_bytes) {
      return Status(StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("request metadata larger than max (", bytes, " vs. ",
                                 limits.max_metadata_bytes, " bytes)"));
    }
  }

  // Saturating (deadline.h): max() = no deadline, <= 0 = already passed.
  if (const std::chrono::nanoseconds left = TimeUntil(context.deadline_);
      left != std::chrono::nanoseconds::max()) {
    if (left.count() <= 0) return Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
    const int64_t remaining = left.count();
    // Round up: a server must not see a deadline earlier than the client's. No overflow:
    // remaining / 1000 + 1 is far below INT64_MAX.
    envelope.timeout_micros = remaining / transport::kNanosPerMicro +
                              (remaining % transport::kNanosPerMicro != 0 ? 1 : 0);
    *deadline_nanos =
        SaturatingAdd(std::chrono::nanoseconds(transport::MonotonicClock::Get()->NowNanos()),
                      std::chrono::nanoseconds(remaining))
            .count();  // INT64_MAX (none) when saturated
  }

  const size_t payload = request.ByteSizeLong();
  if (limits.max_send_bytes >= 0 && payload > static_cast<uint64_t>(limits.max_send_bytes)) {
    return Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("Sent message larger than max (", payload, " vs. ",
                               limits.max_send_bytes, ")"));
  }
  const size_t header = EncodedHeaderSize(envelope);
  if (header + payload > limits.max_message_length) {
    return Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("request of ", header + payload,
                               " bytes exceeds the transport's message limit of ",
                               limits.max_message_length));
  }
  if (released != nullptr && payload >= kZeroCopyMinBytes) {
    transport::Buffer head(header + kZeroCopyHeadScratch);
    EncodeHeader(envelope, absl::Span<uint8_t>(head.data(), header));
    if (!EncodeBorrowing(request, payload, std::move(head), header, out)) {
      return Status(StatusCode::INTERNAL, "request changed while it was being serialized");
    }
    out->OnRelease([released] { released->Notify(); });
    *borrowed = true;
    return Status::OK;
  }
  transport::Buffer buffer(header + payload);
  EncodeHeader(envelope, absl::Span<uint8_t>(buffer.data(), header));
  request.SerializeWithCachedSizesToArray(buffer.data() + header);
  *out = std::move(buffer);
  return Status::OK;
}

Status ClientCall::Start(const std::shared_ptr<ClientCall>& self, uint64_t call_id,
                         transport::MessageBytes request, int64_t deadline_nanos) {
  ClientContext* const context = context_;
  dest_ = channel_->PickAddress();
  call_id_ = call_id;
  {
    transport::PlainMutexLock lock(&context->mu_);
    if (context->cancelled_) return Status(StatusCode::CANCELLED, "Cancelled");
    if (context->active_call_ != nullptr) {
      return Status(StatusCode::INTERNAL, "ClientContext is already used by a call in flight");
    }
    context->active_call_ = self;
    context->peer_ = dest_;
  }
  // Results of an earlier call on this context (gRPC forbids reuse; we tolerate it).
  context->server_initial_metadata_.clear();
  context->server_trailing_metadata_.clear();
  context->response_message_ = transport::Buffer();

  if (cancel_requested_.load()) {  // TryCancel() since we registered: send nothing
    transport::PlainMutexLock lock(&context->mu_);
    context->active_call_.reset();
    return Status(StatusCode::CANCELLED, "Cancelled");
  }
  ClientCall* const call = this;
  auto on_response = [call](absl::StatusOr<transport::Buffer> response) {
    call->OnTransportDone(std::move(response));
  };
  MessageTransport* const transport = channel_->transport_.get();
  if (!on_done_) driver_ = transport->BorrowDriver();  // blocking: this thread may drive
  rpc_id_ = driver_ != nullptr
                ? driver_->SendRequest(dest_, std::move(request), on_response, deadline_nanos)
                : transport->SendRequest(dest_, std::move(request), on_response, deadline_nanos);
  // From here on an asynchronous call may have completed already (`self`, held by our
  // caller, keeps the object alive); only this object's fields and the channel are touched.
  sent_.store(true);
  if (cancel_requested_.load()) CancelOnce();
  return Status::OK;
}

Status ClientCall::Wait() {
  const int64_t spin = channel_->spin_nanos_;
  auto ready = [this] {
    return notification_.HasBeenNotified() &&
           (!request_borrowed_ || request_released_.HasBeenNotified());
  };
  if (driver_ != nullptr) {
    // This thread is the socket's loop until the call is over (the lent socket spins, then
    // sleeps in the kernel, as the loop thread would have).
    driver_->Drive(ready);
    channel_->transport_->ReturnDriver(driver_);
    driver_ = nullptr;
  } else if (spin > 0 && !ready()) {
    const transport::Clock* clock = transport::MonotonicClock::Get();
    const int64_t start = clock->NowNanos();
    for (uint32_t n = 1; !ready(); ++n) {
      CpuRelax();
      if (n % 16 != 0) continue;
      if (clock->NowNanos() - start >= spin) break;
      // Yield at every clock check: with a loop thread per side plus this caller on a small
      // machine, the thread with work may be queued behind this one (sched_yield returns at
      // once when nobody is). Measured on 2 cores: 64 B p50 113 us -> 11 us.
      std::this_thread::yield();
    }
  }
  notification_.WaitForNotification();
  // The transport releases a borrowed request when it frees the ended RPC, at the top of the
  // loop's next round or at the end of an idle one (Loop::RunOnce), shortly after the outcome;
  // `request` (the caller's) must not go before.
  if (request_borrowed_) request_released_.WaitForNotification();
  {
    transport::PlainMutexLock lock(&context_->mu_);
    context_->active_call_.reset();
  }
  return Complete(std::move(result_));
}

void ClientCall::OnTransportDone(absl::StatusOr<transport::Buffer> response) {
  if (!on_done_) {  // blocking: the caller completes the call on its own thread
    HOMARPC_TRACE_POINT(kResponseDelivered);
    result_ = std::move(response);
    notification_.Notify();
    return;
  }
  // Take the context's reference: it keeps this call alive to the end of this function, and
  // once it is gone TryCancel() no longer reaches the call.
  std::shared_ptr<ClientCall> self;
  {
    transport::PlainMutexLock lock(&context_->mu_);
    self = std::move(context_->active_call_);
  }
  if (response.ok() && response->size() > kOffloadBytes) {
    // Parsing megabytes here would hold up every other call of this socket (kOffloadBytes).
    // Run on the worker, or right here when the channel is closing (TryOffload then leaves
    // the task to us), where the transport thread's scope applies.
    absl::AnyInvocable<void() &&> task = [self, response = std::move(response),
                                          submitter = std::this_thread::get_id()]() mutable {
      ClientCall* const call = self.get();
      const bool here = std::this_thread::get_id() == submitter;
      const ThreadMark scope(here ? t_callback_channel : t_worker_channel, call->channel_->id_);
      call->FinishAsync(std::move(self), std::move(response));
    };
    if (!channel_->TryOffload(task)) std::move(task)();
    return;
  }
  const ThreadMark scope(t_callback_channel, channel_->id_);
  FinishAsync(std::move(self), std::move(response));
}

void ClientCall::FinishAsync(std::shared_ptr<ClientCall> self,
                             absl::StatusOr<transport::Buffer> response) {
  Status status = Complete(std::move(response));
  // Moved out so that whatever it captures is released here, inside the caller's scope (it
  // may hold the last reference to the channel: see Channel::~Channel). The context may be
  // gone once it has run.
  std::function<void(Status)> done = std::move(on_done_);
  done(std::move(status));
}

Status ClientCall::Complete(absl::StatusOr<transport::Buffer> response) {
  if (!response.ok()) return FromAbsl(response.status());
  transport::Buffer message = std::move(*response);
  const ChannelLimits& limits = channel_->limits_;
  // The metadata limit applies while decoding, so that a response made of many tiny entries
  // costs no more memory than the limit allows (envelope.h).
  absl::StatusOr<Envelope> envelope = Decode(message.span(), limits.max_metadata_bytes);
  if (!envelope.ok()) {
    if (envelope.status().code() == absl::StatusCode::kResourceExhausted) {
      return Status(StatusCode::RESOURCE_EXHAUSTED,
                    absl::StrCat("received ", envelope.status().message()));
    }
    return Status(StatusCode::INTERNAL,
                  absl::StrCat("malformed response: ", envelope.status().message()));
  }
  if (envelope->kind != EnvelopeKind::kResponse || envelope->call_id != call_id_) {
    return Status(StatusCode::INTERNAL, "response does not belong to this call");
  }
  if ((envelope->flags & kFlagCompressed) != 0) {  // PROTOCOL.md §14.7
    return Status(StatusCode::INTERNAL, "compressed responses are not supported");
  }
  // The envelope's views point into the message's heap bytes, which do not move with it.
  ClientContext* const context = context_;
  context->response_message_ = std::move(message);
  for (const auto& [key, value] : envelope->metadata) {
    context->server_initial_metadata_.emplace(key, value);
  }
  for (const auto& [key, value] : envelope->trailing_metadata) {
    context->server_trailing_metadata_.emplace(key, value);
  }
  if (envelope->status_code != StatusCode::OK) {
    // Decode() admits only gRPC's codes 0..16 (PROTOCOL.md §14), all StatusCode values.
    return Status(static_cast<StatusCode>(envelope->status_code),
                  std::string(envelope->status_message), std::string(envelope->status_details));
  }
  const size_t payload = envelope->payload.size();
  if (limits.max_receive_bytes >= 0 && payload > static_cast<uint64_t>(limits.max_receive_bytes)) {
    return Status(StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("Received message larger than max (", payload, " vs. ",
                               limits.max_receive_bytes, ")"));
  }
  if (!response_->ParseFromArray(envelope->payload.data(), static_cast<int>(payload))) {
    return Status(StatusCode::INTERNAL, "failed to parse response");
  }
  return Status::OK;
}

ClientCall* ClientCall::Cancel() {
  cancel_requested_.store(true);
  if (!sent_.load()) return nullptr;  // Start() will see the request and cancel
  if (on_done_ && channel_->InCallbackThread()) {
    // An asynchronous call, on this channel's transport thread (TryCancel from a completion
    // callback): the abort would run this call's completion right here, under the context's
    // mutex. Deferred to after the unlock. The call stays alive until then: its completion can
    // only run on this thread.
    return this;
  }
  // A blocking call is cancelled here, under the context's mutex, even on the transport
  // thread: its completion only parks the outcome (it never takes that mutex), and its caller
  // cannot return before it has taken the mutex itself, so the call outlives this. Deferring
  // it would not be safe: a caller-driven call completes on the caller's thread, which could
  // return between the unlock and the deferred cancel.
  CancelOnce();
  return nullptr;
}

void ClientCall::CancelOnce() {
  if (cancel_done_.exchange(true)) return;
  // By value: the abort inside may complete and free this call.
  channel_->CancelRpc(rpc_id_, dest_, call_id_);
}

}  // namespace homarpc::internal
