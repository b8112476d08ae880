// ClientContext (client_context.h): per-call settings and results. Owned by the application;
// the call in flight (ClientCall) reads its settings and writes its results, and TryCancel()
// may come from any thread, which is why the cancellation state sits under mu_ (per context,
// so uncontended on the call's fast path: taken once to register the call, once to finish).
#include "runtime/client_context.h"

#include <memory>
#include <string>
#include <utility>

#include "runtime/client_call.h"
#include "runtime/server_context.h"
#include "runtime/target.h"

namespace homarpc {

ClientContext::ClientContext() = default;

ClientContext::~ClientContext() = default;

std::unique_ptr<ClientContext> ClientContext::FromServerContext(
    const ServerContextBase& server_context, PropagationOptions options) {
  auto context = std::make_unique<ClientContext>();
  if (options.deadline_propagation()) context->deadline_ = server_context.deadline();
  // Checked once, now: a server call cancelled later does not reach this context (gRPC
  // propagates that too; homarpc does not yet).
  if (options.cancellation_propagation() && server_context.IsCancelled()) {
    transport::PlainMutexLock lock(&context->mu_);
    context->cancelled_ = true;
  }
  return context;
}

std::unique_ptr<ClientContext> ClientContext::FromCallbackServerContext(
    const CallbackServerContext& server_context, PropagationOptions options) {
  return FromServerContext(server_context, options);
}

void ClientContext::AddMetadata(const std::string& meta_key, const std::string& meta_value) {
  // Validated when the call starts, so that a bad entry fails that call (INTERNAL), as gRPC.
  metadata_.emplace_back(meta_key, meta_value);
}

void ClientContext::TryCancel() {
  internal::ClientCall* deferred = nullptr;
  {
    transport::PlainMutexLock lock(&mu_);
    cancelled_ = true;
    // Under mu_: the call cannot complete and go away meanwhile (see client_call.cc).
    if (active_call_ != nullptr) deferred = active_call_->Cancel();
  }
  // Nothing of this context may be touched after this: the call's completion may run inside
  // and destroy it.
  if (deferred != nullptr) deferred->FinishCancel();
}

std::string ClientContext::peer() const {
  transport::PlainMutexLock lock(&mu_);
  return internal::PeerString(peer_);
}

}  // namespace homarpc
