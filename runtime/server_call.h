// ServerCall: one unary call on the server, from the decoded request to the reply.
//
// Owns the request message (whose bytes the client metadata views point into), the request
// and response objects, and the context handed to the handler. Created by ServerImpl on the
// loop thread that received the request, after the envelope has been validated, in one
// allocation together with the request and response objects (Create); destroyed by
// ServerImpl::FinalizeCall (Destroy) once the last hold is released.
//
// Holds: the call starts with one (the handler's), released when the sync handler returns or
// the reactor is finished. Anyone else who must keep the call alive while touching it from
// another thread (a kCancel lookup, the deadline timer, shutdown, a running OnCancel) takes
// one first. The reply always goes out before the handler's hold is released, so every
// request is answered exactly once: by the handler's outcome or, if that comes too late, by a
// cancellation (client or server TryCancel, the deadline, a shutdown deadline).
//
// Thread-safety: Cancel/IsCancelled/holds are thread-safe; AddMetadata follows the context's
// contract (one thread at a time, before the call is finished).
#ifndef HOMARPC_RUNTIME_SERVER_CALL_H_
#define HOMARPC_RUNTIME_SERVER_CALL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "transport/plain_sync.h"
#include "runtime/deadline_heap.h"
#include "runtime/envelope.h"
#include "runtime/executor.h"
#include "runtime/message_transport.h"
#include "runtime/server_context.h"
#include "runtime/service.h"
#include "runtime/status.h"
#include "transport/buffer.h"
#include "transport/endpoint.h"

namespace homarpc::internal {

class ServerImpl;

// Builds a response envelope carrying only `status` (no metadata, no payload) for `call_id`.
// Used for every answer that does not come from a handler.
transport::Buffer EncodeStatusResponse(uint64_t call_id, const Status& status);
// What a call whose deadline passed is answered (gRPC's words).
Status DeadlineExceededStatus();

class ServerCall {
 public:
  // Loop thread. Allocates the call and its messages together and parses the request
  // payload into them; nullptr (nothing allocated, `request` untouched) when it does not
  // parse. Otherwise the call takes `request` over: `envelope` views point into its payload,
  // and moving a Buffer keeps its bytes in place, so they stay valid. `method` is the
  // registry's key and must outlive the call.
  static ServerCall* Create(ServerImpl* server, MessageTransport* transport,
                            transport::IncomingRequest& request, const Envelope& envelope,
                            const std::string* method, const MethodHandler* handler,
                            int64_t arrival_nanos);
  // Frees a call made by Create (ServerImpl, once nobody holds it).
  static void Destroy(ServerCall* call);
  ServerCall(const ServerCall&) = delete;
  ServerCall& operator=(const ServerCall&) = delete;

  const transport::Address& client() const { return request_.peer; }
  uint64_t call_id() const { return call_id_; }
  // MonotonicClock nanoseconds; INT64_MAX = no deadline. The node is ServerImpl's, under its
  // calls_mu_ (the deadline timer's heap).
  int64_t deadline_nanos() const { return deadline_node_.deadline_nanos; }
  DeadlineHeapNode* deadline_node() { return &deadline_node_; }

  // A sync method whose handlers average less (MethodHandler::average_run_nanos) runs on the
  // loop thread that read the request, when the transport can (Start).
  static constexpr int64_t kQuickHandlerNanos = 50'000;
  // Once, after ServerImpl registered the call: runs a callback handler here, or a sync one
  // on this loop thread after its round when the method has been quick and the transport can
  // (MessageTransport::RunAfterRound), or hands it to `executor` (or, `on_worker`, already on
  // one of its threads, runs it here). The call may be gone when this returns.
  void Start(Executor* executor, bool on_worker);
  // Loop thread, instead of Start() when the call could not be registered (the server is
  // shutting down or overloaded): answers `status`; the caller then destroys the call.
  void Reject(const Status& status);

  // ---- For the context (server_context.cc) ----
  bool IsCancelled() const;
  // Validates and stores; an invalid entry is dropped and the call will fail INTERNAL.
  void AddMetadata(bool trailing, const std::string& key, const std::string& value);
  std::string peer() const;
  // Cancels the call: IsCancelled() becomes true, the client is answered `status` unless it
  // has been answered already, and a callback reactor's OnCancel runs once (here, or when the
  // handler returns it) unless the reactor was finished first. Later handler outcomes are
  // ignored. The caller must hold the call alive (a hold, or being its handler). Any thread.
  void Cancel(const Status& status);

  // ---- For ServerUnaryReactor::Finish (server_context.cc) ----
  // The reactor attached to this call was finished (first Finish only). Any thread.
  void ReactorFinished(Status status);

  // ---- Holds (ServerImpl) ----
  // Under ServerImpl::calls_mu_ (so the call cannot be destroyed meanwhile): false when the
  // last hold is gone already (the call is being finalized).
  bool TryAddHold();
  // The last release finalizes the call (ServerImpl::FinalizeCall) on this thread.
  void Release();
  // Runs OnDone on the reactor, if any. ServerImpl::FinalizeCall only, once no hold is left.
  void RunOnDone();

 private:
  ServerCall(ServerImpl* server, MessageTransport* transport, transport::IncomingRequest request,
             const Envelope& envelope, const std::string* method, const MethodHandler* handler,
             CallMessages* messages, int64_t arrival_nanos);
  ~ServerCall();

  bool is_callback() const { return callback_context_.has_value(); }
  // `after_round`: on the loop's thread after its round (MessageTransport::RunAfterRound).
  void RunSync(bool after_round = false);
  void RunCallback();
  void AttachReactor(ServerUnaryReactor* reactor);
  void RunOnCancel(ServerUnaryReactor* reactor);
  // Answers with the handler's outcome (metadata, payload when OK) unless already answered;
  // DEADLINE_EXCEEDED instead when the deadline has passed (as gRPC servers answer).
  void SendResponse(const Status& status);
  // SendResponse, then Release -- on the executor instead when this thread is a loop running
  // a handler inline and the response is larger than kOffloadBytes.
  void SendResponseAndRelease(Status status);
  // Answers with `status` alone unless already answered.
  void SendStatusOnly(const Status& status);
  // True if this caller gets to send the one reply.
  bool ClaimReply() { return !replied_.exchange(true, std::memory_order_acq_rel); }
  // The reply envelope. A payload of kZeroCopyMinBytes or more is moved out of the call and
  // sent zero-copy (payload_encoder.h); the transport frees it once done.
  transport::MessageBytes EncodeResponse(const Status& status);

  ServerImpl* const server_;
  MessageTransport* const transport_;
  transport::IncomingRequest request_;
  const uint64_t call_id_;
  const MethodHandler* const handler_;
  CallMessages* const messages_;  // constructed in this call's allocation (Create)
  DeadlineHeapNode deadline_node_;

  std::optional<ServerContext> sync_context_;
  std::optional<CallbackServerContext> callback_context_;

  // Written by the handler's thread (context contract), read when the reply is encoded.
  std::vector<std::pair<std::string, std::string>> initial_metadata_;
  std::vector<std::pair<std::string, std::string>> trailing_metadata_;
  std::optional<Status> metadata_error_;

  // Lock-free state: a sync call's whole life takes no lock of its own.
  std::atomic<int> holds_{1};
  std::atomic<bool> replied_{false};
  std::atomic<bool> cancelled_{false};
  // Callback calls only: who runs OnCancel, and whether the outcome is known.
  mutable transport::PlainMutex mu_;
  bool handler_done_ ABSL_GUARDED_BY(mu_) = false;  // outcome known (or abandoned)
  // Set once when the handler returns it; read without mu_ by RunOnDone, when no hold is
  // left (every writer released a hold after writing, so the finalizer sees it).
  ServerUnaryReactor* reactor_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool on_cancel_pending_ ABSL_GUARDED_BY(mu_) = false;  // cancelled before the reactor came
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_SERVER_CALL_H_
