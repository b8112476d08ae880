// Server: serves registered services over Homa, shaped like grpc::Server. Built and started
// by ServerBuilder (server_builder.h).
//
// Requests arrive on loop threads (one or more per listening port, SO_REUSEPORT). Each is
// decoded, matched to a method by its full name, and run: callback methods inline on the loop
// thread; sync methods on the executor (a worker pool by default; inline on the loop when the
// builder says so, for handlers that never block). The response envelope goes back as the
// Homa response message.
//
// Thread-safe. Shutdown() may be called from any thread; called from a handler, OnCancel or
// OnDone it starts the shutdown on a thread of the server's own and returns at once (Wait()
// and ~Server complete it). Destroying the Server from its own handler deadlocks, as in gRPC.
#ifndef HOMARPC_RUNTIME_SERVER_H_
#define HOMARPC_RUNTIME_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/deadline.h"

namespace homarpc {

// Only insecure credentials exist (see ChannelCredentials).
class ServerCredentials {
 public:
  virtual ~ServerCredentials() = default;
};
std::shared_ptr<ServerCredentials> InsecureServerCredentials();

namespace internal {
class ServerImpl;
}  // namespace internal

class Server final {
 public:
  ~Server();  // Shutdown() if not done yet, then releases the ports.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops taking new calls (they fail UNAVAILABLE) and waits for calls in flight to finish.
  void Shutdown();
  // The same, but after `deadline` the calls still running are cancelled (their contexts
  // report IsCancelled(); callers see CANCELLED) and Shutdown returns once their handlers
  // have returned. Any std::chrono time point.
  template <typename Clock, typename Duration>
  void Shutdown(const std::chrono::time_point<Clock, Duration>& deadline) {
    // Saturating: a deadline beyond what nanoseconds hold means none (deadline.h).
    ShutdownWithTimeout(internal::TimeUntil(deadline));
  }
  // Blocks until Shutdown() has completed (from another thread).
  void Wait();

  // The bound addresses, one per AddListeningPort, as "ipv4:127.0.0.1:50051".
  std::vector<std::string> listening_addresses() const;

 private:
  friend class ServerBuilder;
  explicit Server(std::unique_ptr<internal::ServerImpl> impl);
  void ShutdownWithTimeout(std::chrono::nanoseconds timeout);
  std::unique_ptr<internal::ServerImpl> impl_;
};

}  // namespace homarpc

#endif  // HOMARPC_RUNTIME_SERVER_H_
