// MessageTransport: what the RPC layer needs from a wire that moves whole request and response
// messages. Homa over UDP (transport::Endpoint, see CreateUdpTransport) is the production
// implementation; tests plug in the in-memory fabric (tests/runtime/fabric_transport.h); an
// HTTP/2 wire through the real gRPC library could be a third.
//
// Contract (the same as transport::Endpoint's, which it mirrors):
// - SendRequest() is thread-safe; `done` fires exactly once, on a transport thread, with the
//   response or an error (UNAVAILABLE: nobody answers / refused; DEADLINE_EXCEEDED: the
//   deadline passed; RESOURCE_EXHAUSTED: too large; CANCELLED: aborted or shutting down).
// - The transport owns what SendRequest() and Reply() are given until it is done with it: a
//   MessageBytes that borrows memory (zero-copy, message_bytes.h) runs its release callback
//   when the RPC has ended and no packet points into it any more -- on a transport thread, or
//   on the calling thread when the message is refused before anything is sent.
// - Requests reach the RequestHandler on a transport thread, which must not block for long;
//   Reply() is thread-safe and is called exactly once per request (the runtime guarantees it).
// - Stop() (and destruction, which calls it) stops the transport's threads; client RPCs still
//   in flight complete first with CANCELLED. Nothing is delivered afterwards. An owner whose
//   RequestHandler or callbacks point at objects it is about to tear down calls Stop() first,
//   while those objects are still whole (a server does, before destroying its transports).
#ifndef HOMARPC_RUNTIME_MESSAGE_TRANSPORT_H_
#define HOMARPC_RUNTIME_MESSAGE_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/endpoint.h"

namespace homarpc::internal {

class MessageTransport {
 public:
  using RequestHandler = std::function<void(transport::IncomingRequest request)>;
  using ResponseCallback = std::function<void(absl::StatusOr<transport::Buffer> response)>;

  virtual ~MessageTransport() = default;

  virtual transport::Address local_address() const = 0;
  // `deadline_nanos` is on MonotonicClock; INT64_MAX = none.
  virtual uint64_t SendRequest(const transport::Address& dest, transport::MessageBytes request,
                               ResponseCallback done, int64_t deadline_nanos) = 0;
  // Ends a client RPC early; its callback fires with `status`. Unknown ids are ignored.
  virtual void Abort(uint64_t id, absl::Status status) = 0;
  virtual void Reply(const transport::IncomingRequest& request,
                     transport::MessageBytes response) = 0;
  // How long a blocked caller should spin before sleeping (the transport's poll time).
  virtual int64_t spin_nanos() const = 0;
  // From the RequestHandler only (optional): runs `task` on this transport thread once its
  // current round is over, another thread ready to take the transport's work over should the
  // task run long (transport::Endpoint::RunAfterRound). False leaves `task` unrun: the caller
  // runs it elsewhere.
  virtual bool RunAfterRound(const transport::IncomingRequest& request,
                             absl::AnyInvocable<void() &&>& task) {
    return false;
  }

  // ---- Calls driven by the caller's own thread (optional) ----
  // A blocking caller waits anyway, so it can do the waiting on a socket of its own: on a
  // socket the transport lends it, the caller's thread sends the request, polls for the
  // response and runs the protocol's timers itself. No loop thread is woken for the call or
  // kept spinning beside the caller (on a machine with few cores that third spinning thread
  // costs more than the hand-offs). See client_call.cc, DESIGN NOTES.
  class CallDriver {
   public:
    virtual ~CallDriver() = default;
    // SendRequest from the lent socket (the id works with Abort() and SendRequestBeside());
    // `done` runs on this thread, inside Drive().
    virtual uint64_t SendRequest(const transport::Address& dest,
                                 transport::MessageBytes request, ResponseCallback done,
                                 int64_t deadline_nanos) = 0;
    // Runs the socket on this thread until `until()` is true: spins for the poll time, then
    // sleeps in the kernel until a datagram, an Abort() from another thread, or a timer.
    virtual void Drive(absl::FunctionRef<bool()> until) = 0;
  };
  // Lends the calling thread a socket to drive, or returns nullptr (then use SendRequest):
  // the transport has none to lend, all are lent, or it is stopping. The same thread gives
  // it back with ReturnDriver() once its call has ended; meanwhile Stop() waits for it.
  virtual CallDriver* BorrowDriver() { return nullptr; }
  virtual void ReturnDriver(CallDriver* driver) {}
  // SendRequest from the socket that carries client RPC `rpc_id`, so that the server sees the
  // same client address (a cancel names its call by client address and call id).
  virtual uint64_t SendRequestBeside(uint64_t rpc_id, const transport::Address& dest,
                                     transport::MessageBytes request, ResponseCallback done,
                                     int64_t deadline_nanos) {
    return SendRequest(dest, std::move(request), std::move(done), deadline_nanos);
  }
  // Server RPCs the transport still holds (response not yet fully sent and acknowledged);
  // a draining server waits for 0. Thread-safe; may be slow (it asks every loop).
  virtual uint64_t live_server_rpcs() const = 0;
  // Stops and joins the transport's threads. When it returns no callback (RequestHandler,
  // response `done`) runs any more and none is running; client RPCs that were in flight have
  // completed CANCELLED. Afterwards Reply() and Abort() do nothing, SendRequest() fails
  // CANCELLED (its `done` may then run on the calling thread) and live_server_rpcs() is 0.
  // Callbacks that run while Stop() is under way may still call Reply() and the rest; what
  // they send may be dropped. Idempotent and thread-safe (a second caller waits for the
  // first); not from this transport's own callbacks (it would wait for itself).
  virtual void Stop() = 0;
};

// Options for Homa over UDP, gathered from ChannelArguments / ServerBuilder.
struct UdpTransportOptions {
  transport::EndpointOptions endpoint;
  // Client only: sockets lent to blocking callers (BorrowDriver), created on first need; at
  // most this many calls are caller-driven at once, the rest go through the loop thread.
  // 0 = none. (ChannelArguments: kArgCallerSockets.)
  uint32_t caller_sockets = 0;
  // How a lent socket's endpoint is made from its options (hand-over mode, port 0); empty =
  // transport::Endpoint::Create. When it fails (out of descriptors, say) the transport logs
  // one warning and lends nothing from then on: every blocking call goes through the loop
  // thread, as with caller_sockets = 0. Tests substitute one that fails.
  std::function<absl::StatusOr<std::unique_ptr<transport::Endpoint>>(
      const transport::EndpointOptions&)>
      lent_socket_factory;
};

// Homa over UDP: wraps a transport::Endpoint. `handler` empty = client only.
absl::StatusOr<std::unique_ptr<MessageTransport>> CreateUdpTransport(
    const UdpTransportOptions& options, MessageTransport::RequestHandler handler);

// Builds transports for a Channel (client only, handler empty) or a Server. Tests substitute
// one that attaches to an in-memory fabric.
using TransportFactory = std::function<absl::StatusOr<std::unique_ptr<MessageTransport>>(
    const UdpTransportOptions& options, MessageTransport::RequestHandler handler)>;

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_MESSAGE_TRANSPORT_H_
