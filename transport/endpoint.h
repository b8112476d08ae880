// Endpoint: the transport's message-level API for applications — a Homa socket.
//
// An Endpoint owns one or more Loops; each loop is a thread that owns one UDP socket (an
// IoBackend) and one protocol Engine, and runs: poll the socket, feed the engine, run its
// timers, flush its packets. Several loops share one port through SO_REUSEPORT (the kernel
// spreads clients across them by address hash), giving a multi-core server.
//
// Client side: SendRequest() from any thread; the completion fires exactly once, on a loop
// thread, with the response or an error. Server side: requests are delivered to the
// RequestHandler on the loop thread that received them; Reply() may be called from any thread,
// once per request.
//
// Waiting: an idle loop spins for Config::poll_usecs before sleeping in the kernel (waking a
// sleeping thread costs ~50 us here, a busy-polled round trip ~5 us). Call() waits the same
// way. Payload bytes are never copied in user space on the send side and copied once (from the
// socket's receive buffers into the message) on the receive side.
#ifndef HOMARPC_TRANSPORT_ENDPOINT_H_
#define HOMARPC_TRANSPORT_ENDPOINT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/message_bytes.h"
#include "transport/config.h"
#include "transport/engine.h"
#include "transport/io_backend.h"

namespace homarpc::transport {

class Loop;

// A request delivered to a server, and how to answer it.
struct IncomingRequest {
  Address peer;
  Buffer payload;
  // Opaque routing for Reply(): which loop and which server RPC.
  uint32_t loop_index = 0;
  ServerRpcHandle rpc;
};

struct EndpointOptions {
  Config config;
  IoOptions io;
  // Loops (threads, sockets) to run; > 1 sets SO_REUSEPORT on every socket.
  int num_loops = 1;
  // No loop thread: the thread that creates the endpoint owns it and drives its one loop
  // inside Call() and Poll(); every method (and the destructor) must then be called from that
  // thread, and callbacks run inside those calls. For single-threaded clients and benchmarks,
  // as eRPC's threads own their Rpc objects: it saves a thread hand-off per call and a core
  // that would otherwise spin. Requires num_loops == 1. A thread that drives a loop may be
  // moved to another CPU while it waits, should it keep finding another spinner on its own
  // (transport/sched.h, MoveToAnotherCpu: its affinity is narrowed for a moment, then set back).
  bool inline_loop = false;
  // Inline mode for an endpoint its owner hands from thread to thread (a pool of sockets that
  // blocking callers borrow, runtime/udp_transport.cc): Adopt() makes the calling thread the
  // one that drives it, Release() lets go, and between the two no other thread may touch it.
  // Between a Release() and the next Adopt() nothing drives it: datagrams wait in the socket and
  // timers wait too. Uses the epoll backend (IoOptions::transferable: an io_uring ring stays
  // bound to its first thread). Requires inline_loop.
  bool handed_over = false;
  // Relay mode: each loop gets a standby thread, so that a request handler may run its work
  // on the loop's own thread after the round (RunAfterRound) without a blocking task stalling
  // the socket: one that holds the loop `takeover_nanos` or more has the standby take the
  // loop over. Uses the epoll backend (the loop changes threads). Not with inline_loop.
  bool standby = false;
  int64_t takeover_nanos = 1'000'000;
};

class Endpoint {
 public:
  // Called on a loop thread; must not block for long (hand work to another thread instead).
  using RequestHandler = std::function<void(IncomingRequest request)>;
  // Called exactly once per request, on a loop thread.
  using ResponseCallback = std::function<void(absl::StatusOr<Buffer> response)>;

  // Binds the socket(s) and starts the loop thread(s). `handler` may be empty for a
  // client-only endpoint: requests to it are then refused on the wire (REFUSED kNotServer) and
  // their clients see UNAVAILABLE. Errors: INVALID_ARGUMENT (bad config), socket errors.
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(const EndpointOptions& options,
                                                          RequestHandler handler = nullptr);
  // Stops the loops. Client RPCs still in flight complete with CANCELLED first. No other
  // thread may still be inside a method of this endpoint: a SendRequest() or Reply() can be
  // finishing its direct send after the RPC's callback has already run (loop.cc), so a
  // callback's completion is not proof that its caller has returned.
  ~Endpoint();

  // The bound address (with the port the kernel chose when the options said 0).
  Address local_address() const { return local_address_; }
  IoKind io_kind() const;

  // Starts a client RPC; `done` gets the outcome. Thread-safe. Returns an id usable with
  // Abort(). Synchronous errors (oversized, bad destination) also go to `done`, on a loop
  // thread, so callers have one path. When `deadline_nanos` (MonotonicClock) passes first,
  // the RPC is aborted and `done` gets DEADLINE_EXCEEDED; INT64_MAX = no deadline (the
  // transport's own silence timeout still applies).
  uint64_t SendRequest(const Address& dest, MessageBytes request, ResponseCallback done,
                       int64_t deadline_nanos = INT64_MAX);
  // Blocking form: spins, then sleeps, until the response arrives. FAILED_PRECONDITION when
  // called from a callback running on one of this endpoint's loops (it would wait on itself).
  absl::StatusOr<Buffer> Call(const Address& dest, MessageBytes request);
  // Inline mode only: runs the loop until `deadline_nanos` (MonotonicClock) or, when
  // `until` is given, until it returns true. Callbacks fire inside; a Poll() from inside one of
  // them returns at once.
  void Poll(int64_t deadline_nanos, std::function<bool()> until = nullptr);

  // Relay mode (EndpointOptions::standby), from the RequestHandler only: runs `task` on the
  // calling loop thread once the loop's round is over, with the loop let go (Loop::
  // RunAfterRound); false leaves `task` unrun (no standby, one task is queued already this
  // round, or stopping). A reply from the task takes the path of a reply from another thread.
  bool RunAfterRound(const IncomingRequest& request, absl::AnyInvocable<void() &&>& task);
  // Relay mode: how often a standby took a loop over from a long task, how often a task's
  // round woke a parked standby, and whether every loop's standby is ready (none is while the
  // thread it took over from still runs its task). Thread-safe; for tests and stats.
  uint64_t takeovers() const;
  uint64_t standby_wakes() const;
  bool standbys_ready() const;

  // Hand-over mode only (EndpointOptions::handed_over): the calling thread becomes the one
  // that drives this endpoint, until it calls Release(). Create() returns the endpoint adopted
  // by the creating thread. The owner serializes: one thread between Adopt() and Release().
  void Adopt();
  void Release();

  // Ends a client RPC early: its callback fires with `status`. Thread-safe; unknown or
  // finished ids are ignored.
  void Abort(uint64_t id, absl::Status status);

  // Answers a request. Thread-safe. Errors are reported to the log only (the client sees its
  // RPC fail or time out), because nobody else can act on them.
  void Reply(const IncomingRequest& request, MessageBytes response);

  // Sums over loops (gauges included), read on each loop thread.
  EngineStats stats() const;
  EngineMemory memory() const;
  IoStats io_stats() const;

 private:
  Endpoint() = default;
  RequestHandler handler_;  // shared by the loops; outlives them
  bool inline_loop_ = false;
  bool handed_over_ = false;
  // Names client RPCs for Abort(); also picks their loop (token % loops).
  std::atomic<uint64_t> next_token_{1};
  Address local_address_;
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ENDPOINT_H_
