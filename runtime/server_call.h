// ServerCall: one unary call on the server, from the decoded request to the reply.
//
// Owns the request message (whose bytes the client metadata views point into), the request
// and response objects, and the context handed to the handler. Created by ServerImpl on the
// loop thread that received the request, after the envelope has been validated and the
// payload parsed; deleted by ServerImpl::FinalizeCall once the last hold is released.
//
// Holds: the call starts with one (the handler's), released when the sync handler returns or
// the reactor is finished. Anyone else who must keep the call alive while touching it from
// another thread (a kCancel lookup, shutdown, a running OnCancel) takes one first. The reply
// always goes out before the handler's hold is released, so every request is answered
// exactly once: by the handler's outcome or, if that comes too late, by a cancellation.
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
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

class ServerCall {
 public:
  // Loop thread. `envelope` views point into `request.payload`, which the call takes over
  // (moving a Buffer keeps its bytes in place, so the views stay valid).
  ServerCall(ServerImpl* server, MessageTransport* transport, transport::IncomingRequest request,
             const Envelope& envelope, std::string_view method, const MethodHandler* handler,
             std::unique_ptr<CallMessages> messages, int64_t arrival_nanos);
  ~ServerCall();
  ServerCall(const ServerCall&) = delete;
  ServerCall& operator=(const ServerCall&) = delete;

  const transport::Address& client() const { return request_.peer; }
  uint64_t call_id() const { return call_id_; }

  // Loop thread, once, after ServerImpl registered the call: runs a callback handler here, or
  // hands a sync handler to `executor`. The call may be gone when this returns.
  void Start(Executor* executor);
  // Loop thread, instead of Start() when the call could not be registered (the server is
  // shutting down): answers `status`; the caller then deletes the call.
  void Reject(const Status& status);

  // ---- For the context (server_context.cc) ----
  bool IsCancelled() const;
  // Validates and stores; an invalid entry is dropped and the call will fail INTERNAL.
  void AddMetadata(bool trailing, const std::string& key, const std::string& value);
  std::string peer() const;
  // Cancels the call: IsCancelled() becomes true, the client is answered CANCELLED (with
  // `status`) unless it has been answered already, and a callback reactor's OnCancel runs
  // once (here, or when the handler returns it). Later handler outcomes are ignored. The
  // caller must hold the call alive (a hold, or being its handler).
  void Cancel(const Status& status);

  // ---- For ServerUnaryReactor::Finish (server_context.cc) ----
  // The reactor attached to this call was finished (first Finish only). Any thread.
  void ReactorFinished(Status status);

  // ---- Holds (ServerImpl) ----
  // Under ServerImpl::calls_mu_: false when the call is already being finalized.
  bool TryAddHold();
  void Release();
  // Runs OnDone on the reactor, if any. ServerImpl::FinalizeCall only.
  void RunOnDone();

 private:
  void RunSync();
  void RunCallback();
  void AttachReactor(ServerUnaryReactor* reactor);
  void RunOnCancel();
  // Answers with the handler's outcome (metadata, payload when OK) unless already answered.
  void SendResponse(const Status& status);
  // Answers with `status` alone unless already answered.
  void SendStatusOnly(const Status& status);
  // True if this caller gets to send the one reply.
  bool ClaimReply();
  transport::Buffer EncodeResponse(const Status& status);

  ServerImpl* const server_;
  MessageTransport* const transport_;
  transport::IncomingRequest request_;
  const uint64_t call_id_;
  const MethodHandler* const handler_;
  std::unique_ptr<CallMessages> messages_;
  int64_t deadline_nanos_ = INT64_MAX;  // MonotonicClock

  std::optional<ServerContext> sync_context_;
  std::optional<CallbackServerContext> callback_context_;

  // Written by the handler's thread (context contract), read when the reply is encoded.
  std::vector<std::pair<std::string, std::string>> initial_metadata_;
  std::vector<std::pair<std::string, std::string>> trailing_metadata_;
  std::optional<Status> metadata_error_;

  std::atomic<bool> cancelled_{false};  // also written under mu_ (see Cancel)
  mutable absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_) = 1;
  bool replied_ ABSL_GUARDED_BY(mu_) = false;
  bool handler_done_ ABSL_GUARDED_BY(mu_) = false;  // outcome known (or abandoned)
  ServerUnaryReactor* reactor_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool on_cancel_pending_ ABSL_GUARDED_BY(mu_) = false;  // cancelled before the reactor came
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_SERVER_CALL_H_
