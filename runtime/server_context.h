// ServerContext / CallbackServerContext / ServerUnaryReactor: the server side of one call,
// shaped like gRPC's (grpcpp/server_context.h, grpcpp/support/server_callback.h).
//
// The runtime creates a context per call and hands it to the handler; it stays valid until
// the call is finished (sync handler: it returned; callback handler: Finish() was called and
// the reactor's OnDone() ran). The client's metadata, deadline and peer are read-only and may
// be read from any thread; Add*Metadata must happen before the call is finished, from one
// thread at a time. IsCancelled() and TryCancel() are thread-safe.
#ifndef HOMARPC_RUNTIME_SERVER_CONTEXT_H_
#define HOMARPC_RUNTIME_SERVER_CONTEXT_H_

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "transport/plain_sync.h"
#include "runtime/metadata.h"
#include "runtime/status.h"

namespace homarpc {

namespace internal {
class ServerCall;
}  // namespace internal

class ServerContextBase {
 public:
  virtual ~ServerContextBase();
  ServerContextBase(const ServerContextBase&) = delete;
  ServerContextBase& operator=(const ServerContextBase&) = delete;

  // The client's deadline, converted to this host's clock when the request arrived;
  // system_clock::time_point::max() when the client set none.
  std::chrono::system_clock::time_point deadline() const { return deadline_; }
  // The client's metadata; views into the request message, valid while the call lives.
  const std::multimap<string_ref, string_ref>& client_metadata() const { return client_metadata_; }
  // Sent with the response (Homa has no separate header frame: initial metadata arrives with
  // the reply). Keys and values follow ClientContext::AddMetadata's rules; an invalid entry
  // is dropped and the call fails INTERNAL.
  void AddInitialMetadata(const std::string& key, const std::string& value);
  void AddTrailingMetadata(const std::string& key, const std::string& value);

  // True once the client cancelled (TryCancel), the deadline passed, or the server is
  // shutting down past its grace deadline. A handler that sees it should stop and return:
  // its client has been answered already (CANCELLED or DEADLINE_EXCEEDED) and what it
  // returns is dropped.
  bool IsCancelled() const;
  // Cancels the call from the server: the client sees CANCELLED. Thread-safe.
  void TryCancel() const;

  // "ipv4:127.0.0.1:40000" / "ipv6:[::1]:40000".
  std::string peer() const;
  // The full method name, "/package.Service/Method" (empty for a context no call owns).
  const std::string& method() const;

 protected:
  ServerContextBase();

 private:
  friend class internal::ServerCall;

  internal::ServerCall* call_ = nullptr;  // the call this context belongs to (owner)
  std::chrono::system_clock::time_point deadline_ = std::chrono::system_clock::time_point::max();
  std::multimap<string_ref, string_ref> client_metadata_;
  const std::string* method_ = nullptr;  // the server's registry key (lives as long as it)
};

class ServerContext : public ServerContextBase {
 public:
  ServerContext();
};

// The handler's side of a callback unary call. Finish() exactly once, from any thread, before
// or after the handler returned the reactor. Then OnDone() runs once, after the response has
// been handed to the transport: on the loop thread when Finish() came before the handler
// returned, otherwise on the thread that called Finish() (so do not call Finish() holding a
// lock that OnDone() takes). The reactor (unless it is the context's DefaultReactor) may
// delete itself there.
//
// OnCancel() runs at most once, before OnDone(), when the call is cancelled before it is
// finished: by the client (TryCancel), by the server (TryCancel), by the client's deadline
// passing (the server's deadline timer notices it and answers the client DEADLINE_EXCEEDED,
// as gRPC does), or by a Shutdown deadline. It runs on the cancelling thread (a loop thread, the
// deadline-timer thread, the shutdown thread, a thread calling TryCancel) or, when the cancel
// came before the handler returned the reactor, on the loop thread right after it returned.
// Both callbacks must not block. StartSendInitialMetadata() does nothing (initial metadata
// travels with the response) and OnSendInitialMetadataDone() is not called.
class ServerUnaryReactor {
 public:
  ServerUnaryReactor() = default;
  virtual ~ServerUnaryReactor() = default;
  ServerUnaryReactor(const ServerUnaryReactor&) = delete;
  ServerUnaryReactor& operator=(const ServerUnaryReactor&) = delete;

  // Initial metadata travels with the response over Homa; this only marks it final.
  void StartSendInitialMetadata();
  void Finish(Status status);

  virtual void OnSendInitialMetadataDone(bool ok) {}
  virtual void OnCancel() {}
  virtual void OnDone() = 0;

 private:
  friend class internal::ServerCall;
  transport::PlainMutex mu_;
  internal::ServerCall* call_ ABSL_GUARDED_BY(mu_) = nullptr;  // set when the handler returns
  std::optional<Status> early_finish_ ABSL_GUARDED_BY(mu_);    // Finish() before that
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

namespace internal {
// The reactor CallbackServerContext::DefaultReactor() hands out; lives inside the context.
class DefaultUnaryReactor final : public ServerUnaryReactor {
 public:
  void OnDone() override {}
};
}  // namespace internal

class CallbackServerContext : public ServerContextBase {
 public:
  CallbackServerContext();
  ~CallbackServerContext() override;
  // A reactor owned by this context: call Finish() on it and return it from the handler.
  ServerUnaryReactor* DefaultReactor();

 private:
  friend class internal::ServerCall;
  // Constructed on first use, in place (no allocation per call).
  std::optional<internal::DefaultUnaryReactor> default_reactor_;
};

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_SERVER_CONTEXT_H_
