// Engine::Impl: the engine's state and its internal operations, split by concern across
// engine.cc (application calls and packet dispatch), engine_output.cc (transmission) and
// engine_timer.cc (timers, loss recovery, acks). Private to the engine; engine thread only,
// except what the direct-send calls read from any thread: next_client_id_ (atomic) and the
// members fixed at construction.
#ifndef HOMARPC_TRANSPORT_ENGINE_IMPL_H_
#define HOMARPC_TRANSPORT_ENGINE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "transport/engine.h"
#include "transport/grant.h"
#include "transport/pacer.h"
#include "transport/peer.h"
#include "transport/rpc.h"
#include "transport/tombstones.h"

namespace homarpc::transport {

class Engine::Impl {
 public:
  Impl(const Config& config, const Clock* clock, PacketSink* sink, EngineHandler* handler,
       uint16_t local_port, bool ipv6);
  ~Impl();

  // ---- engine.cc: application calls and packet dispatch ----
  absl::StatusOr<RpcId> SendRequest(const Address& dest, MessageBytes request, uint64_t cookie);
  absl::Status SendResponse(const ServerRpcHandle& handle, MessageBytes response);
  absl::Status AdoptSentRequest(const Address& dest, RpcId id, MessageBytes request,
                                uint64_t cookie);
  absl::Status AdoptSentResponse(const ServerRpcHandle& handle, MessageBytes response);
  bool GetDirectRoute(const Address& dest, DirectRoute* route);
  void RetransmitDirect(const Address& peer, RpcId id, bool response);
  // Owes `peer` an acknowledgement (piggybacked on the next request to it, or sent at a tick).
  void AddPendingAck(Peer* peer, const wire::AckEntry& ack);
  void AbortClientRpc(RpcId id, absl::Status status);
  void HandlePacket(const Address& from, absl::Span<const uint8_t> bytes);
  void Reap();
  EngineMemory memory() const;

  void HandleData(const Address& from, const wire::Packet& p);
  void HandleGrant(Rpc* rpc, const wire::Packet& p);
  void HandleResend(const Address& from, Rpc* rpc, const wire::Packet& p);
  void HandleRpcUnknown(Rpc* rpc, const wire::Packet& p);
  void HandleCutoffs(const Address& from, const wire::Packet& p);
  void HandleNeedAck(const Address& from, Rpc* rpc, const wire::Packet& p);
  void HandleAck(const Address& from, const wire::Packet& p);
  void HandleRefused(Rpc* rpc, const wire::Packet& p);
  // Server RPC for a request DATA packet: existing, new, or nullptr (dropped or refused).
  Rpc* ServerRpcForData(const Address& from, const wire::Packet& p);
  // Common receive path for both directions once the RPC is known.
  void ReceiveData(Rpc* rpc, const wire::Packet& p);
  // The granted offset a new incoming message starts with, from its first packet.
  uint32_t InitialGranted(const wire::Packet& p) const;
  void OnMessageComplete(Rpc* rpc);
  // Ends the server RPC `key` names (the client's id ^ 1) if its response is being sent.
  void ProcessAck(const ServerKey& key);
  // Acts on the acks that arrived on requests since the last call (acks_due_).
  void EndAckedRpcs();

  // Finds the RPC a non-DATA packet refers to (by the sender's id), or nullptr.
  Rpc* FindRpc(const Address& from, uint64_t sender_id);
  Rpc* NewRpc(bool is_client, uint64_t id, Peer* peer);
  // Hands `message` to `rpc` as its outgoing request or response and starts sending it.
  void StartOutgoing(Rpc* rpc, MessageBytes message);
  // The server RPC `handle` names, if it still awaits its response: NOT_FOUND (gone) or
  // FAILED_PRECONDITION (already answered) otherwise.
  absl::StatusOr<Rpc*> RpcAwaitingResponse(const ServerRpcHandle& handle);
  // The largest message sent directly (Engine::direct_max_bytes): one packet at Config::mtu
  // whatever the peer's path allows (the sending thread does not know the peer). Thread-safe.
  uint32_t DirectMaxBytes() const {
    return std::min(mtu_payload_per_packet_, config_.unsched_bytes);
  }
  // StartOutgoing for a one-packet message another thread has sent (direct sends).
  void AdoptSentMessage(Rpc* rpc, MessageBytes message);
  // Fails a client RPC (OnResponse with `status`) and ends it.
  void FailClientRpc(Rpc* rpc, absl::Status status);
  // Recounts rpc in sends_in_progress_ and long_replies_awaited_ after its outgoing message or
  // state changed.
  void UpdateSending(Rpc* rpc) {
    const bool live = rpc->state != RpcState::kDead && rpc->out.active;
    const bool sending = live && !rpc->out.FullySent();
    // A client's request that needed grants is all sent and no response byte is in yet
    // (out.active turns false when the response starts).
    const bool awaiting = live && !sending && rpc->is_client &&
                          rpc->out.length > config_.unsched_bytes;
    if (awaiting != rpc->awaiting_long_reply) {
      rpc->awaiting_long_reply = awaiting;
      if (awaiting) {
        ++long_replies_awaited_;
        long_request_sent_nanos_ = now_;
      } else {
        --long_replies_awaited_;
      }
    }
    if (sending == rpc->sending) return;
    rpc->sending = sending;
    if (sending) {
      ++sends_in_progress_;
    } else {
      --sends_in_progress_;
    }
  }
  // Ends an RPC: takes it out of every table and schedules its memory for Reap().
  void EndRpc(Rpc* rpc);
  // After a loss of packets larger than Config::mtu allows (a RESEND, a restart), sends `peer`
  // Config::mtu-sized packets from then on: a route's MTU (Config::use_path_mtu) is this
  // host's, and a smaller hop further on, or ICMP filtered on the way, can drop every larger
  // packet. Once per peer; it never grows back.
  void FallBackToConfigMtu(Peer* peer);
  // Ends a server RPC that nobody will complete (client gone, refused, silent), counting it.
  void AbandonServerRpc(Rpc* rpc) {
    ++stats_.server_rpcs_abandoned;
    EndRpc(rpc);
  }

  // ---- engine_output.cc: transmission ----
  // Sends what the pacer allows, SRPT first. Re-entrancy safe (nested calls return at once).
  void Pump();
  // Pump() for `rpc`, whose message was just made sendable (StartOutgoing): where nothing else
  // waits in the pacer and `rpc` may go now, its first burst leaves without a stop in the
  // ready set (for a one-packet message that stop was a btree node allocated and freed).
  void PumpNew(Rpc* rpc);
  // Sends DATA packets of rpc->out from next_xmit while granted and the pacer allows; returns
  // bytes of payload sent.
  uint32_t TransmitFrom(Rpc* rpc, uint32_t max_bytes);
  // Sends the DATA packet at `offset` with at most `max_len` payload bytes (fewer where a
  // gathered message would need a third iovec: MessageBytes::Gather) and returns its length.
  // Counts it in packets_sent and, with `retransmit`, in retransmitted_packets.
  uint32_t SendDataPacket(Rpc* rpc, uint32_t offset, uint32_t max_len, bool retransmit,
                          uint8_t priority);
  void SendControl(const Address& to, wire::Packet& p);
  void SendGrant(Rpc* rpc, uint32_t offset, uint8_t priority);
  void SendResendsFor(Rpc* rpc);
  void SendSimple(const Address& to, wire::PacketType type, uint64_t sender_id);
  void SendRefused(const Address& to, uint64_t sender_id, wire::RefuseReason reason);
  void SendAcks(Peer* peer, uint64_t header_id);
  // Sends the acks of every peer in peers_with_acks_ as explicit ACK packets.
  void FlushAcks();
  void MaybeSendCutoffs(Peer* peer, uint16_t their_version);
  void ScheduleGrants();
  uint8_t UnschedPriorityFor(const Peer* peer, uint32_t length) const {
    return UnschedPriority(peer->cutoffs, peer->cutoff_version, length);
  }
  // Thread-safe (config only): the unscheduled priority of a message of `length` bytes to a
  // receiver that published `cutoffs` as `version` (0 = none yet).
  uint8_t UnschedPriority(const std::array<uint32_t, 8>& cutoffs, uint16_t version,
                          uint32_t length) const;
  uint8_t Prio(uint8_t level) const { return config_.use_priorities ? level : 0; }

  // ---- engine_timer.cc ----
  void OnTimer();
  int64_t NextTimerNanos() const;
  void Tick();
  void TickClientRpc(Rpc* rpc);
  void TickServerRpc(Rpc* rpc);
  // Forgets at most `max` tombstones whose time is up (oldest first).
  void ExpireTombstones(int64_t now, size_t max);

  // ---- state ----
  const Config config_;
  const Clock* clock_;
  PacketSink* sink_;
  EngineHandler* handler_;
  const uint16_t local_port_;
  const bool ipv6_;
  const uint32_t mtu_payload_per_packet_;  // at Config::mtu; peers have their own
  const uint8_t top_prio_;          // control packets
  const uint8_t first_unsched_prio_;
  const uint8_t max_sched_prio_;
  const uint16_t cutoff_version_ = 1;  // version of the cutoffs we publish

  EngineStats stats_;
  PeerTable peers_;
  GrantScheduler grants_;
  Pacer pacer_;
  std::atomic<uint64_t> next_client_id_{2};  // client ids are even; ReserveClientId
  absl::flat_hash_map<uint64_t, std::unique_ptr<Rpc>> client_rpcs_;
  absl::flat_hash_map<ServerKey, std::unique_ptr<Rpc>> server_rpcs_;
  // Server RPCs recently ended after delivery: a late duplicate of their request must not run
  // again (at-most-once). Expire after 2 x timeout_ticks, a few at each RPC's end and the rest
  // at the tick (engine_timer.cc, DESIGN NOTES).
  Tombstones tombstones_;
  std::vector<std::unique_ptr<Rpc>> dead_;
  // Server RPCs whose clients acknowledged them on a request packet (the piggybacked ack),
  // ended at the next Reap() rather than before the request they rode on is served, or at
  // once when that request would otherwise be refused a per-peer slot (ServerRpcForData).
  std::vector<ServerKey> acks_due_;
  std::vector<Peer*> peers_with_acks_;
  // The clock, read once per entry into the engine (HandlePacket, OnTimer and the application
  // calls): one read per packet instead of one per decision. Stale by at most the duration of
  // one entry, including handler callbacks that run inside it.
  int64_t now_ = 0;
  uint32_t sends_in_progress_ = 0;  // RPCs whose outgoing message is not fully sent
  // Client RPCs whose long request (more than unsched_bytes) is all sent and whose response
  // has not started, and when the last of those requests was done (MidTransfer).
  uint32_t long_replies_awaited_ = 0;
  int64_t long_request_sent_nanos_ = 0;
  int64_t next_tick_nanos_;
  int64_t next_peer_gc_nanos_;
  bool in_pump_ = false;
  uint64_t route_epoch_ = 0;  // Engine::route_epoch()
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_ENGINE_IMPL_H_
