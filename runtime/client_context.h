// ClientContext: per-call settings and results on the client side, shaped like
// grpc::ClientContext (deadline, metadata, cancellation, peer, server metadata).
//
// One context serves one call, as in gRPC: fill it in, make the call, read the server's
// metadata afterwards. The caller owns it and keeps it alive until the call completes (for a
// callback call: until the completion callback has run). TryCancel() may be called from any
// thread at any time; everything else from one thread at a time.
#ifndef HOMARPC_RUNTIME_CLIENT_CONTEXT_H_
#define HOMARPC_RUNTIME_CLIENT_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "transport/plain_sync.h"
#include "runtime/deadline.h"
#include "runtime/metadata.h"
#include "transport/address.h"
#include "transport/buffer.h"

namespace homarpc {

class Channel;
class ServerContextBase;
class CallbackServerContext;
namespace internal {
class ClientCall;
}  // namespace internal

// What a child call inherits from the server call it is made for (FromServerContext).
class PropagationOptions {
 public:
  PropagationOptions& enable_deadline_propagation() { deadline_ = true; return *this; }
  PropagationOptions& disable_deadline_propagation() { deadline_ = false; return *this; }
  PropagationOptions& enable_cancellation_propagation() { cancel_ = true; return *this; }
  PropagationOptions& disable_cancellation_propagation() { cancel_ = false; return *this; }
  bool deadline_propagation() const { return deadline_; }
  bool cancellation_propagation() const { return cancel_; }

 private:
  bool deadline_ = true;
  bool cancel_ = true;
};

class ClientContext {
 public:
  ClientContext();
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  // A context for a call made while serving `server_context` (which must be alive now only):
  // inherits its deadline and, when the server call is already cancelled at this moment
  // (IsCancelled()), starts cancelled, so that its call fails CANCELLED without sending.
  // Checked once, here: a server call cancelled after this returns does not reach the context
  // or its call (gRPC propagates that too; homarpc does not yet).
  static std::unique_ptr<ClientContext> FromServerContext(
      const ServerContextBase& server_context, PropagationOptions options = PropagationOptions());
  static std::unique_ptr<ClientContext> FromCallbackServerContext(
      const CallbackServerContext& server_context,
      PropagationOptions options = PropagationOptions());

  // Request metadata. Keys: lowercase [0-9a-z_.-]; "-bin" keys carry any bytes, others
  // printable ASCII; "grpc-" keys are reserved. A key or value that breaks the rules makes
  // the call fail INTERNAL without sending anything; metadata beyond the channel's limit
  // (default 8 KiB) makes it fail RESOURCE_EXHAUSTED.
  void AddMetadata(const std::string& meta_key, const std::string& meta_value);

  // Absolute deadline; the call fails DEADLINE_EXCEEDED once it passes and the server sees it
  // as cancelled. Any std::chrono clock and duration type: a system_clock deadline is kept
  // as it is; another clock's is taken as the time left until it on that clock, counted
  // from now. Extremes saturate instead of overflowing: a deadline beyond what
  // system_clock::time_point can represent (time_point::max() of any clock, a deadline in
  // seconds centuries away) means no deadline; one before its range has passed. Default: none.
  template <typename Clock, typename Duration>
  void set_deadline(const std::chrono::time_point<Clock, Duration>& deadline) {
    deadline_ = internal::ToSystemDeadline(deadline);
  }
  // homarpc: deadline = now + timeout, saturating as set_deadline (duration::max(), or any
  // timeout reaching past system_clock's range, means no deadline).
  template <typename Rep, typename Period>
  void set_timeout(std::chrono::duration<Rep, Period> timeout) {
    deadline_ = internal::DeadlineAfter(timeout);
  }
  // system_clock::time_point::max() when no deadline is set.
  std::chrono::system_clock::time_point deadline() const { return deadline_; }

  // Cancels the call if it is in flight (it fails CANCELLED and the server's IsCancelled()
  // becomes true), or makes the next call fail CANCELLED at once. Thread-safe, any time.
  void TryCancel();

  // The server's address once a call has started: "ipv4:127.0.0.1:50051" / "ipv6:[::1]:50051".
  std::string peer() const;

  // The server's initial and trailing metadata, valid after the call completed and for as
  // long as this context lives.
  const std::multimap<string_ref, string_ref>& GetServerInitialMetadata() const {
    return server_initial_metadata_;
  }
  const std::multimap<string_ref, string_ref>& GetServerTrailingMetadata() const {
    return server_trailing_metadata_;
  }

  // Accepted for source compatibility and ignored. Homa has no connection to wait for: a call
  // to an address where nothing listens fails UNAVAILABLE after the channel's timeout either
  // way.
  void set_wait_for_ready(bool /*wait_for_ready*/) {}
  void set_fail_fast(bool /*fail_fast*/) {}
  // Accepted for source compatibility and ignored: Homa does no virtual hosting.
  void set_authority(const std::string& /*authority*/) {}

 private:
  friend class internal::ClientCall;
  friend class Channel;

  std::vector<std::pair<std::string, std::string>> metadata_;
  std::chrono::system_clock::time_point deadline_ = std::chrono::system_clock::time_point::max();

  // Filled in by the call when it completes: the response message owns the bytes the
  // metadata views point into.
  transport::Buffer response_message_;
  std::multimap<string_ref, string_ref> server_initial_metadata_;
  std::multimap<string_ref, string_ref> server_trailing_metadata_;

  // Cancellation: TryCancel() may race with the call starting and finishing.
  mutable transport::PlainMutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // The call in flight, to cancel; null before it starts and after it completes.
  std::shared_ptr<internal::ClientCall> active_call_ ABSL_GUARDED_BY(mu_);
  // The server address of the last call started (peer() formats it: no string per call).
  transport::Address peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_CLIENT_CONTEXT_H_
