// ServerImpl: the state behind a homarpc::Server (server.h) -- its listening ports and their
// transports, the method registry, the executor, the live calls, and shutdown. Internal to
// the runtime; built by ServerBuilder (server_builder.cc), implemented in server.cc.
//
// Threads: requests arrive on transport loop threads (OnRequest); calls finish on whichever
// thread completes them (a worker, a loop, a thread calling ServerUnaryReactor::Finish);
// Shutdown/Wait come from application threads. Everything here is thread-safe unless a
// comment says otherwise.
#ifndef HOMARPC_RUNTIME_SERVER_IMPL_H_
#define HOMARPC_RUNTIME_SERVER_IMPL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "transport/plain_sync.h"
#include "runtime/deadline_heap.h"
#include "runtime/envelope.h"
#include "runtime/executor.h"
#include "runtime/message_transport.h"
#include "runtime/metadata.h"
#include "runtime/service.h"
#include "transport/address.h"

namespace homarpc::internal {

class ServerCall;

// Limits resolved by the builder (server_builder.cc documents the defaults).
struct ServerLimits {
  size_t max_receive_message = 4u << 20;           // request payload bytes
  size_t max_send_message = 64u << 20;             // response payload bytes
  size_t max_metadata = kDefaultMaxMetadataBytes;  // each side, as metadata.h counts it
  size_t max_message = (64u << 20) + (64u << 10);  // whole Homa message (transport config)
  size_t max_concurrent_calls = 100000;            // live calls; more: RESOURCE_EXHAUSTED
};

// One listening port. `transport` is set once, before the server starts, and never changes
// while loops run (request handlers read it without a lock); `owned` is released at the end
// of shutdown (after its Stop()).
struct ServerPort {
  transport::Address address;
  std::unique_ptr<MessageTransport> transport;  // Stop()ped, then reset, at shutdown
};

// Marks the current thread as a loop thread running request handling inline (ServerImpl's
// OnRequest); ServerCall asks, when a handler finishes, whether it is still inside one.
class InlineLoopScope {
 public:
  InlineLoopScope() : outer_(active_) { active_ = true; }
  ~InlineLoopScope() { active_ = outer_; }
  InlineLoopScope(const InlineLoopScope&) = delete;
  InlineLoopScope& operator=(const InlineLoopScope&) = delete;
  static bool active() { return active_; }

 private:
  static thread_local bool active_;
  const bool outer_;
};

class ServerImpl {
 public:
  // A registry entry; a null handler means "registered but not implemented" (streaming).
  using MethodMap = absl::flat_hash_map<std::string, const MethodHandler*>;

  ServerImpl(ServerLimits limits, MethodMap methods, std::unique_ptr<Executor> executor);
  // Shuts down if nobody did (waiting for calls in flight), joins the asynchronous shutdown
  // thread if one ran. Must not run on a handler thread of this server.
  ~ServerImpl();
  ServerImpl(const ServerImpl&) = delete;
  ServerImpl& operator=(const ServerImpl&) = delete;

  // Builder thread, before Start()/AbortStart(): creates a transport for `options` (through
  // `factory` when set, else UDP) whose requests come here. Errors from the transport.
  absl::Status AddPort(const UdpTransportOptions& options, const TransportFactory& factory);
  const std::vector<std::unique_ptr<ServerPort>>& ports() const { return ports_; }
  // Builder thread, once: requests that arrived since AddPort() (held on their loop threads)
  // and all later ones are served.
  void Start();
  // Builder thread, instead of Start() when building failed: answers held requests
  // UNAVAILABLE and releases the transports. The object may then only be destroyed.
  void AbortStart();

  // Server::Shutdown. `deadline_nanos` is on MonotonicClock; nullopt = wait for calls however
  // long they take. Past the deadline every live call is cancelled (clients answered
  // CANCELLED, IsCancelled() true, OnCancel run), and shutdown still waits for sync handlers
  // to return and callback reactors to be finished, as gRPC does. From a handler (or
  // OnCancel/OnDone) of this server the shutdown runs on a server-owned thread and this
  // returns at once (waiting there would wait on ourselves).
  // Otherwise returns when shutdown is complete; a second caller waits for the first.
  void Shutdown(std::optional<int64_t> deadline_nanos);
  // Server::Wait: blocks until a shutdown has completed.
  void Wait();

  const ServerLimits& limits() const { return limits_; }

  // Called by ServerCall when its last hold is released (any thread): runs the reactor's
  // OnDone, forgets the call, destroys it.
  void FinalizeCall(ServerCall* call);

  // Where ServerCall sends a large response from a loop thread (see kOffloadBytes); nullptr
  // when the executor is inline (the application asked for everything on the loops).
  Executor* offload_executor() const {
    return executor_->num_threads() > 0 ? executor_.get() : nullptr;
  }

 private:
  struct CallKey {
    transport::Address peer;
    uint64_t call_id;
    friend bool operator==(const CallKey& a, const CallKey& b) {
      return a.call_id == b.call_id && a.peer == b.peer;
    }
    template <typename H>
    friend H AbslHashValue(H h, const CallKey& k) {
      return H::combine(std::move(h), k.peer, k.call_id);
    }
  };

  // Loop thread: everything that happens to one incoming Homa request. A request of more than
  // kOffloadBytes is handed whole to the executor (when it has threads) and handled there
  // (ProcessRequest): parsing megabytes, and a callback handler that reads them, would hold
  // up every other request on this loop (see kOffloadBytes).
  void OnRequest(ServerPort* port, transport::IncomingRequest request);
  // The work of OnRequest; `on_worker` says it runs on an executor thread, where a sync
  // handler then runs at once rather than being handed on again.
  void ProcessRequest(ServerPort* port, transport::IncomingRequest request,
                      int64_t arrival_nanos, bool on_worker);
  void HandleCancel(ServerPort* port, const transport::IncomingRequest& request, uint64_t call_id);
  enum class Admission { kAdmitted, kShuttingDown, kOverloaded };
  // Adds `call` to the live set (and, with a deadline, to the timer's heap); nothing is added
  // once shutting down or at max_concurrent_calls.
  Admission Register(ServerCall* call);
  void DoShutdown(std::optional<int64_t> deadline_nanos);
  bool NoCallsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls_mu_) {
    return by_id_.empty() && unkeyed_.empty();
  }
  // Waits (releasing calls_mu_ meanwhile) until no call is live, or until `deadline_nanos`
  // (NowNanos) when given; returns whether none is. Only once accepting_ is false: FinalizeCall
  // signals drained_cv_ then.
  bool AwaitNoCallsLocked(std::optional<int64_t> deadline_nanos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls_mu_);
  // The deadline timer's thread (server.cc, DESIGN NOTES).
  void DeadlineTimerMain();
  void StopDeadlineTimer();

  const ServerLimits limits_;
  const MethodMap methods_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::unique_ptr<ServerPort>> ports_;  // fixed once started

  // Loop threads hold requests until the builder has finished (Start or AbortStart).
  absl::Notification started_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> bad_envelopes_{0};

  // Live calls (from registration until OnDone has returned) by (client address, call id),
  // for kCancel; a call whose key is taken (a client reusing a live id) sits in unkeyed_.
  // A PlainMutex (transport/plain_sync.h): every call locks it twice.
  mutable transport::PlainMutex calls_mu_;
  absl::flat_hash_map<CallKey, ServerCall*> by_id_ ABSL_GUARDED_BY(calls_mu_);
  absl::flat_hash_set<ServerCall*> unkeyed_ ABSL_GUARDED_BY(calls_mu_);
  bool accepting_ ABSL_GUARDED_BY(calls_mu_) = true;
  // A shutdown waits here for the live set to empty; FinalizeCall signals once accepting_ is
  // false (nothing is added after that) and the set is empty.
  transport::PlainCondVar drained_cv_;

  // The deadline timer: live calls with a deadline, earliest first, and the thread that
  // cancels them when it passes. timer_wake_nanos_ is when the sleeping thread will wake
  // (INT64_MAX: only when signalled), kTimerAwake while it is not waiting.
  static constexpr int64_t kTimerAwake = INT64_MIN;
  DeadlineHeap<ServerCall> deadlines_ ABSL_GUARDED_BY(calls_mu_);
  int64_t timer_wake_nanos_ ABSL_GUARDED_BY(calls_mu_) = kTimerAwake;
  bool timer_stop_ ABSL_GUARDED_BY(calls_mu_) = false;
  transport::PlainCondVar timer_cv_;
  std::thread timer_thread_;  // started by Start(), joined by shutdown

  absl::Mutex shutdown_mu_;
  bool shutdown_started_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  bool shutdown_done_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  std::thread shutdown_thread_;  // set when Shutdown was called from a handler
};

// Marks the current thread as running application code (a handler, OnCancel, OnDone) for
// `server`, so that Shutdown() from there does not wait on itself. Scopes nest.
class UserCodeScope {
 public:
  explicit UserCodeScope(const ServerImpl* server);
  ~UserCodeScope();
  UserCodeScope(const UserCodeScope&) = delete;
  UserCodeScope& operator=(const UserCodeScope&) = delete;
  static bool InUserCodeOf(const ServerImpl* server);

 private:
  const ServerImpl* previous_;
};

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_SERVER_IMPL_H_
