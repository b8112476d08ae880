// ServerContextBase, ServerContext, CallbackServerContext and ServerUnaryReactor
// (server_context.h). Contexts are created and owned by internal::ServerCall; everything that
// touches the call's state is forwarded to it (server_call.cc explains the threading).
//
// A context that no call owns (one a test constructs itself) reports no deadline, no
// metadata, never cancelled, and an empty peer; adding metadata to it does nothing.
//
// ServerUnaryReactor::StartSendInitialMetadata only marks intent: Homa carries the initial
// metadata with the response, so nothing is sent early and OnSendInitialMetadataDone is not
// called.
#include "runtime/server_context.h"

#include <utility>

#include "runtime/server_call.h"

namespace homarpc {
namespace {

const std::string& EmptyString() {
  static const std::string* const empty = new std::string();
  return *empty;
}

}  // namespace

ServerContextBase::ServerContextBase() = default;
ServerContextBase::~ServerContextBase() = default;

void ServerContextBase::AddInitialMetadata(const std::string& key, const std::string& value) {
  if (call_ != nullptr) call_->AddMetadata(/*trailing=*/false, key, value);
}

void ServerContextBase::AddTrailingMetadata(const std::string& key, const std::string& value) {
  if (call_ != nullptr) call_->AddMetadata(/*trailing=*/true, key, value);
}

bool ServerContextBase::IsCancelled() const { return call_ != nullptr && call_->IsCancelled(); }

void ServerContextBase::TryCancel() const {
  if (call_ != nullptr) call_->Cancel(Status(StatusCode::CANCELLED, "cancelled by the server"));
}

const std::string& ServerContextBase::method() const {
  return method_ != nullptr ? *method_ : EmptyString();
}

std::string ServerContextBase::peer() const {
  return call_ != nullptr ? call_->peer() : std::string();
}

ServerContext::ServerContext() = default;

CallbackServerContext::CallbackServerContext() = default;
CallbackServerContext::~CallbackServerContext() = default;

ServerUnaryReactor* CallbackServerContext::DefaultReactor() {
  if (!default_reactor_.has_value()) default_reactor_.emplace();
  return &*default_reactor_;
}

void ServerUnaryReactor::StartSendInitialMetadata() {}

void ServerUnaryReactor::Finish(Status status) {
  internal::ServerCall* call;
  {
    transport::PlainMutexLock lock(&mu_);
    if (finished_) return;  // gRPC forbids a second Finish; ignore it
    finished_ = true;
    call = call_;
    if (call == nullptr) {  // the handler has not returned this reactor yet
      early_finish_ = std::move(status);
      return;
    }
  }
  // May run OnDone, which may delete this reactor: touch nothing of ours afterwards.
  call->ReactorFinished(std::move(status));
}

}  // namespace homarpc
