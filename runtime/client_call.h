// ChannelImpl and ClientCall: the client side of unary RPCs (internal; users see Channel and
// ClientContext).
//
// ChannelImpl is what a Channel owns: the resolved addresses, the limits taken from the
// ChannelArguments and the MessageTransport (a Homa endpoint with its loop thread). It is
// created by CreateCustomChannel / CreateChannelWithTransport (channel.cc) and lives until the
// last Channel reference goes. All its methods are thread-safe.
//
// ClientCall is one unary call in flight: it is what ClientContext::active_call_ points to
// while the call runs, so TryCancel() can find it. A blocking call's ClientCall lives on the
// caller's stack; an asynchronous call's is allocated once (make_shared) and freed after its
// completion callback returned. The call algorithm is in client_call.cc; the channel's
// construction, arguments and teardown in channel.cc.
#ifndef HOMARPC_RUNTIME_CLIENT_CALL_H_
#define HOMARPC_RUNTIME_CLIENT_CALL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/plain_sync.h"
#include "runtime/channel.h"
#include "runtime/client_context.h"
#include "runtime/executor.h"
#include "runtime/message_transport.h"
#include "runtime/status.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/message_bytes.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace homarpc::internal {

// Limits a channel applies to each call, from its ChannelArguments.
struct ChannelLimits {
  int64_t max_send_bytes = -1;                  // request payload; -1 = unlimited
  int64_t max_receive_bytes = 4 * 1024 * 1024;  // response payload; -1 = unlimited
  size_t max_metadata_bytes = 8 * 1024;         // each side's metadata, metadata.h's counting
  uint32_t max_message_length = 64u << 20;      // the transport's ceiling (envelope included)
};

class ChannelImpl {
 public:
  // `addresses` is the resolution result (an error makes every call fail UNAVAILABLE with
  // it); `transport` is null exactly when `error` is set.
  ChannelImpl(std::vector<transport::Address> addresses,
              std::unique_ptr<MessageTransport> transport, ChannelLimits limits, bool round_robin,
              absl::Status error);
  // Runs the completions queued on the completion worker and joins it, then destroys the
  // transport: calls in flight complete CANCELLED (their callbacks run during this
  // destructor, on the transport's threads), then nothing touches this object.
  ~ChannelImpl();
  ChannelImpl(const ChannelImpl&) = delete;
  ChannelImpl& operator=(const ChannelImpl&) = delete;

  // Wraps an implementation into the public handle (Channel's constructor is private).
  static std::shared_ptr<Channel> MakeChannel(std::unique_ptr<ChannelImpl> impl);

  // See Channel.
  Status BlockingUnaryCall(const RpcMethod& method, ClientContext* context,
                           const google::protobuf::MessageLite& request,
                           google::protobuf::MessageLite* response);
  void AsyncUnaryCall(const RpcMethod& method, ClientContext* context,
                      const google::protobuf::MessageLite* request,
                      google::protobuf::MessageLite* response, std::function<void(Status)> on_done);
  bool resolved() const { return error_.ok(); }
  std::string DebugTarget() const;

  // True when the calling thread is running a completion callback of this channel (where a
  // blocking call on it would wait on itself, and where the channel must not be destroyed
  // synchronously: see Channel::~Channel). Goes by the channel's id, not its address, which a
  // later channel may reuse.
  bool InCallbackThread() const;
  // True when the calling thread is running a completion of this channel on its completion
  // worker (see TryOffload): there too the channel must not be destroyed synchronously, since
  // its destructor joins that worker.
  bool InCompletionWorker() const;

 private:
  friend class ClientCall;

  // Hands `task` (an asynchronous call's completion: parsing a response larger than
  // kOffloadBytes and running the callback) to the channel's completion worker, a one-thread
  // WorkerPool started on first use, and returns true; returns false, leaving `task`
  // untouched, once the channel is closing (the caller then runs it itself).
  bool TryOffload(absl::AnyInvocable<void() &&>& task);

  // Next address (round-robin, or always the first for pick_first).
  const transport::Address& PickAddress();
  // Sends the server a kCancel envelope for the call and aborts its transport RPC with
  // CANCELLED (in that order: the abort may complete the call, and free it, inline). Safe
  // from any thread, also while the channel is being destroyed (then a no-op).
  void CancelRpc(uint64_t rpc_id, transport::Address dest, uint64_t call_id);

  // Unique in the process (the thread-local InCallbackThread() mark holds it).
  static std::atomic<uint64_t> next_id_;
  const uint64_t id_;
  const std::vector<transport::Address> addresses_;
  const ChannelLimits limits_;
  const bool round_robin_;
  const absl::Status error_;
  const int64_t spin_nanos_;
  std::unique_ptr<MessageTransport> transport_;  // reset first in the destructor

  std::atomic<uint64_t> next_call_id_{1};
  std::atomic<uint32_t> next_address_{0};

  // Guards transport_ for the cancel path only: TryCancel can run on any thread while the
  // destructor tears the transport down. The call paths never take it (a call cannot start
  // while the channel is being destroyed: its caller holds a reference).
  mutable absl::Mutex close_mu_;
  bool closing_ ABSL_GUARDED_BY(close_mu_) = false;

  // The completion worker (TryOffload). Held while a task is queued, so that the destructor,
  // which closes it under the same lock, never races a Run().
  absl::Mutex offload_mu_;
  std::unique_ptr<Executor> offload_executor_ ABSL_GUARDED_BY(offload_mu_);
  bool offload_closed_ ABSL_GUARDED_BY(offload_mu_) = false;
};

class ClientCall {
 public:
  // `on_done` empty = a blocking call (the caller waits in Wait()).
  ClientCall(ChannelImpl* channel, ClientContext* context, google::protobuf::MessageLite* response,
             std::function<void(Status)> on_done)
      : channel_(channel), context_(context), response_(response), on_done_(std::move(on_done)) {}
  ClientCall(const ClientCall&) = delete;
  ClientCall& operator=(const ClientCall&) = delete;

  // The two call shapes Channel offers (see channel.h for their contracts).
  static Status Blocking(ChannelImpl& channel, const RpcMethod& method, ClientContext* context,
                         const google::protobuf::MessageLite& request,
                         google::protobuf::MessageLite* response);
  static void Async(ChannelImpl& channel, const RpcMethod& method, ClientContext* context,
                    const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, std::function<void(Status)> on_done);

  // From ClientContext::TryCancel, under the context's mutex (which keeps this call alive).
  // Returns this call when the cancel must be finished by FinishCancel() after the mutex is
  // released (an asynchronous call, on the channel's own transport thread, where aborting
  // completes the call inline, and the completion takes the mutex and may destroy the
  // context); null otherwise.
  ClientCall* Cancel();
  // Completes a cancel that Cancel() deferred. The call may be gone when it returns.
  void FinishCancel() { CancelOnce(); }

 private:
  // Validates the call and the context and encodes the request (envelope header + payload);
  // computes the transport deadline. A non-OK status means the call fails with it and nothing
  // is sent. Calling thread, before the call is registered. With `released` set, a large
  // request is encoded zero-copy (payload_encoder.h): `*out` then borrows from `request`,
  // `*borrowed` is set and `released` is notified when the transport lets go of it.
  static Status Encode(const ChannelImpl& channel, const RpcMethod& method,
                       const ClientContext& context, const google::protobuf::MessageLite& request,
                       uint64_t call_id, int64_t* deadline_nanos,
                       transport::PlainNotification* released, bool* borrowed,
                       transport::MessageBytes* out);
  // Registers `self` (this call: owning for an asynchronous call, a non-owning alias for a
  // blocking one) as the context's active call and sends `request`. A non-OK status means
  // nothing was sent and the call is not registered (the context was cancelled first).
  Status Start(const std::shared_ptr<ClientCall>& self, uint64_t call_id,
               transport::MessageBytes request, int64_t deadline_nanos);
  // Blocking calls: waits (spin, then sleep) for the outcome -- and, for a request sent
  // zero-copy, for the transport to release it -- unregisters the call from the context and
  // completes it, on the calling thread.
  Status Wait();
  // The transport's response callback (a transport thread). An asynchronous call whose
  // response is larger than kOffloadBytes completes on the channel's completion worker.
  void OnTransportDone(absl::StatusOr<transport::Buffer> response);
  // An asynchronous call's end: Complete(), then the callback (which may free the call, so
  // `self` holds it, and may destroy the context).
  void FinishAsync(std::shared_ptr<ClientCall> self, absl::StatusOr<transport::Buffer> response);
  // Turns the transport's outcome into the call's status; fills the context's server
  // metadata and `response_`.
  Status Complete(absl::StatusOr<transport::Buffer> response);
  void CancelOnce();

  ChannelImpl* const channel_;
  ClientContext* const context_;
  google::protobuf::MessageLite* const response_;
  std::function<void(Status)> on_done_;  // asynchronous calls only

  transport::Address dest_;
  uint64_t call_id_ = 0;
  uint64_t rpc_id_ = 0;  // written before sent_ is set, read after it is seen set

  // Cancellation: Cancel() and Start() race; whoever sees both flags cancels (once).
  std::atomic<bool> sent_{false};
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> cancel_done_{false};

  // Blocking calls: the socket this thread drives (MessageTransport::BorrowDriver), or null
  // when the call went through the transport's loop thread.
  MessageTransport::CallDriver* driver_ = nullptr;
  // Blocking calls: the transport thread parks the outcome here and notifies.
  transport::PlainNotification notification_;
  absl::StatusOr<transport::Buffer> result_;
  // Blocking calls whose request borrows the caller's message: notified by the transport
  // when it no longer reads it.
  bool request_borrowed_ = false;
  transport::PlainNotification request_released_;
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_CLIENT_CALL_H_
