// Engine: the Homa protocol for one UDP socket, as a single-threaded state machine.
//
// Pure logic: no system calls, no threads, no sleeping. Inputs are received packets
// (HandlePacket), the passage of time (OnTimer, read from the Clock it was given) and the
// application's calls (SendRequest, SendResponse, AbortClientRpc). Outputs are packets handed
// to a PacketSink and message events delivered to an EngineHandler. This is what lets the
// protocol run under a manual clock on an in-memory fabric in tests, and on io_uring in
// production, unchanged.
//
// Ownership and threads: an Engine is owned by its loop (or by a test) and every method must
// be called from one thread. Handler callbacks run synchronously inside engine calls and must
// not call back into the engine except SendRequest/SendResponse/AbortClientRpc, which are
// re-entrancy safe (they only queue work). Payload spans given to the sink stay valid until
// the next Reap(); the owner calls Reap() only after the sink has flushed.
//
// Completions: every SendRequest that returns an id produces exactly one OnResponse (the
// response, or an error), unless the engine is destroyed first. Every request is delivered by
// OnRequest at most once (at-most-once execution), even when its packets are duplicated or
// the client retransmits.
#ifndef HOMARPC_TRANSPORT_ENGINE_H_
#define HOMARPC_TRANSPORT_ENGINE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "transport/address.h"
#include "transport/buffer.h"
#include "transport/clock.h"
#include "transport/config.h"
#include "transport/message_bytes.h"
#include "transport/packet_sink.h"
#include "transport/wire.h"

namespace homarpc::transport {

// A client RPC's id: even, unique within the engine.
using RpcId = uint64_t;

// Names a server RPC for SendResponse: the client's address and the server-side id (odd).
struct ServerRpcHandle {
  Address client;
  uint64_t id = 0;
};

class EngineHandler {
 public:
  virtual ~EngineHandler() = default;
  // A whole request arrived; `request` now belongs to the handler. Answer with SendResponse,
  // from inside this call or later.
  virtual void OnRequest(const ServerRpcHandle& rpc, Buffer request) = 0;
  // A client RPC ended, exactly once: its response, or why it failed:
  //   UNAVAILABLE        peer silent for timeout_ticks, or nobody listens (ICMP / RPC_UNKNOWN
  //                      after restart limit)
  //   RESOURCE_EXHAUSTED the server refused the message (size or memory limits)
  //   CANCELLED / any    the status given to AbortClientRpc
  virtual void OnResponse(RpcId id, uint64_t cookie, absl::StatusOr<Buffer> response) = 0;
};

// Counters for tests, benchmarks and debugging. Monotonic except the "now" gauges.
struct EngineStats {
  uint64_t packets_sent[256] = {};      // by wire::PacketType value
  uint64_t packets_received[256] = {};  // valid packets, by type
  uint64_t packets_dropped[static_cast<int>(wire::DecodeError::kCount)] = {};  // by reason
  uint64_t packets_dropped_semantic = 0;  // well-formed but inconsistent with our state
  uint64_t data_bytes_sent = 0;           // payload bytes, retransmissions included
  uint64_t data_bytes_received = 0;
  uint64_t duplicate_data_bytes = 0;      // payload bytes we already had
  uint64_t retransmitted_packets = 0;
  uint64_t direct_sends = 0;  // one-packet requests and responses another thread sent (adopted)
  uint64_t resends_sent = 0;
  uint64_t restarts = 0;                  // client RPCs restarted after RPC_UNKNOWN
  uint64_t stale_rpc_unknowns = 0;  // RPC_UNKNOWNs answering an outdated RESEND, ignored
  uint64_t path_mtu_fallbacks = 0;  // peers sent Config::mtu packets after losing larger ones
  uint64_t unpaced_peers = 0;  // peers created on this host whose DATA skips the pacer
  uint64_t client_timeouts = 0;
  uint64_t server_rpcs_abandoned = 0;     // timed out or given up waiting for an ACK
  uint64_t duplicate_requests_suppressed = 0;
  uint64_t refused_messages = 0;          // messages we refused (limits)
  uint64_t requests_delivered = 0;
  uint64_t responses_delivered = 0;
  // Gauges (current values).
  uint64_t client_rpcs = 0;
  uint64_t server_rpcs = 0;
  uint64_t tombstones = 0;                // ended server RPCs remembered against duplicates
  uint64_t peers = 0;
  uint64_t rx_bytes_held = 0;             // buffers of partially received messages
  uint64_t throttled_rpcs = 0;            // waiting for the pacer
  uint64_t max_grantable_messages = 0;    // high-water mark of messages awaiting grants
};

// Bytes of protocol state, from the engine's own accounting (for the benchmark's memory
// report): the size of each per-RPC and per-peer structure, not counting payload buffers.
struct EngineMemory {
  size_t bytes_per_client_rpc = 0;
  size_t bytes_per_server_rpc = 0;
  size_t bytes_per_peer = 0;
  size_t total_state_bytes = 0;  // all RPCs and peers now alive, payloads excluded
};

class Engine {
 public:
  // `clock`, `sink` and `handler` must outlive the engine. `local_port` is the bound UDP port
  // (written into headers) and `ipv6` selects the payload size per packet. `config` must pass
  // Validate() (checked; an invalid config aborts: it is a programming error).
  Engine(const Config& config, const Clock* clock, PacketSink* sink, EngineHandler* handler,
         uint16_t local_port, bool ipv6);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts a client RPC carrying `request` (ownership passes to the engine until the RPC
  // ends). Returns its id; OnResponse later reports the outcome with `cookie`. Errors, with
  // nothing sent and no OnResponse: RESOURCE_EXHAUSTED (longer than max_message_length),
  // INVALID_ARGUMENT (unset or wrong-family destination).
  absl::StatusOr<RpcId> SendRequest(const Address& dest, MessageBytes request, uint64_t cookie);

  // Sends the response for a request delivered by OnRequest (ownership of `response` passes to
  // the engine). NOT_FOUND if that RPC no longer exists (the client aborted or vanished; the
  // response is dropped), FAILED_PRECONDITION if it was already answered, RESOURCE_EXHAUSTED if
  // it is longer than max_message_length (the client then sees its RPC fail).
  absl::Status SendResponse(const ServerRpcHandle& rpc, MessageBytes response);

  // ---- Direct sends: a one-packet message sent by another thread (loop.cc, DESIGN NOTES) ----
  // Which priority and cutoff version a packet to a peer carries, as the engine last knew it.
  struct DirectRoute {
    std::array<uint32_t, 8> cutoffs{};
    uint16_t cutoff_version = 0;
    bool local = false;  // on this host and not paced: DATA goes unmarked (Config::pace_local)
  };
  // Engine thread: the route to `dest`; false when the engine knows no such peer.
  bool GetDirectRoute(const Address& dest, DirectRoute* route);
  // Engine thread: changes whenever a route GetDirectRoute gave may have changed since (a
  // peer's CUTOFFS arrived, idle peers were forgotten), so a caller that saw a route under the
  // same value may keep it.
  uint64_t route_epoch() const;
  // Thread-safe: a fresh client RPC id, never handed out again by this engine.
  RpcId ReserveClientId();
  // Thread-safe (reads only what is fixed at construction): the largest message sent directly
  // (one DATA packet, all of it unscheduled: min(payload per packet, unsched_bytes)), and
  // that packet's destination, priority and header for a message of `length` bytes (at most
  // that) of RPC `id` to `dest` -- a request, or the response to a request from `dest`. The
  // caller points the payload spans at the message's bytes.
  uint32_t direct_max_bytes() const;
  // `ack` (may be null): an acknowledgement to piggyback (a request only; see TakeAck).
  void BuildDirectPacket(const Address& dest, const DirectRoute& route, RpcId id,
                         uint32_t length, OutPacket* packet,
                         const wire::AckEntry* ack = nullptr) const;
  // Engine thread: takes one acknowledgement this engine owes the server at `dest` (a finished
  // client RPC), so that another thread's direct request carries it; false when none is
  // owed. PutAck gives back one that was not sent after all.
  bool TakeAck(const Address& dest, wire::AckEntry* ack);
  void PutAck(const Address& dest, const wire::AckEntry& ack);
  // Engine thread: takes over the client RPC `id` (from ReserveClientId) whose one packet
  // another thread has sent (or is about to), as if SendRequest had sent it: the response is
  // delivered to OnResponse with `cookie`, losses are recovered as usual. Errors as
  // SendRequest's; the RPC then does not exist (a response to it is ignored).
  absl::Status AdoptSentRequest(const Address& dest, RpcId id, MessageBytes request,
                                uint64_t cookie);
  // Engine thread: SendResponse for a one-packet response another thread has sent (built by
  // BuildDirectPacket for the client's address and the RPC's id). Errors as SendResponse's.
  absl::Status AdoptSentResponse(const ServerRpcHandle& rpc, MessageBytes response);
  // Engine thread: the direct send of RPC `id`'s message (to or from `peer`; `response`: the
  // server's) failed after it was adopted: transmit it again now, as if never sent. Ignored
  // when that RPC is gone or has moved on.
  void RetransmitDirect(const Address& peer, RpcId id, bool response);

  // Ends a client RPC now. OnResponse fires with `status` (which must not be OK) before this
  // returns. The server is not told (it learns from RPC_UNKNOWN or its timeouts). Unknown ids
  // are ignored.
  void AbortClientRpc(RpcId id, absl::Status status);

  // Processes one received datagram from `from`. Anything malformed or inconsistent is dropped
  // and counted; nothing else changes.
  void HandlePacket(const Address& from, absl::Span<const uint8_t> bytes);

  // Runs the timers and the pacer. Call whenever the clock reaches NextTimerNanos(); extra
  // calls are harmless.
  void OnTimer();
  // When OnTimer next has work: the next tick, or sooner when the pacer holds data. A time in
  // the past means "now".
  int64_t NextTimerNanos() const;

  // Whether a message is mid-transfer: one of ours is not fully sent, or bytes we granted (or
  // a message's unscheduled prefix) are still on their way, or a request of ours longer than
  // unsched_bytes finished sending less than busy_poll_usecs ago (as of the engine's last
  // entry) and its response has not started: that response is due as soon as the server has
  // read the request, and sleeping through the gap costs a wake-up on the critical path
  // (measured: unary echoes on loopback, median p50 of 6 A/B pairs: 1 MiB 986 -> 822 us,
  // 64 KiB 127 -> 103 us). The loop spins longer then.
  bool MidTransfer() const;

  // Sends every acknowledgement still owed to servers now, instead of at the next tick (or
  // piggybacked on the next request). An endpoint about to close calls it, so its servers
  // free their RPCs at once rather than asking for acks nobody will send.
  void FlushAcks();

  // Ends the server RPCs acknowledged by acks that rode on request packets since the last call,
  // and frees the state of RPCs that ended. Call only after the sink has flushed the packets
  // emitted so far (their payload spans point into these RPCs' buffers).
  void Reap();

  const EngineStats& stats() const;
  EngineMemory memory() const;
  const Config& config() const;
  uint16_t local_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ENGINE_H_
