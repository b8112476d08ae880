// Rpc: the engine's state for one RPC, on the client or the server side.
//
// Client: kOutgoing (sending the request) -> kIncoming (receiving the response) -> ended.
// Server: kIncoming (receiving the request) -> kInService (the application has it) ->
// kOutgoing (sending the response, then waiting for the client's ACK) -> ended.
// An ended RPC is removed from the engine's tables at once and its memory freed at the next
// Reap(), because packets already handed to the sink may still point into its buffers.
// Owned by the engine; touched only from the engine's thread.
#ifndef HOMARPC_TRANSPORT_RPC_H_
#define HOMARPC_TRANSPORT_RPC_H_

#include <cstdint>

#include "transport/message.h"
#include "transport/peer.h"

namespace homarpc::transport {

enum class RpcState : uint8_t { kOutgoing, kIncoming, kInService, kDead };

struct Rpc {
  bool is_client = false;
  RpcState state = RpcState::kOutgoing;
  uint64_t id = 0;  // local id: even on the client, odd on the server
  uint64_t cookie = 0;
  Peer* peer = nullptr;
  int64_t birth_nanos = 0;  // when it started (client) or its first packet arrived (server)

  OutMessage out;  // request (client) or response (server)
  InMessage in;    // response (client) or request (server)

  // Ticks without hearing anything useful from the peer about this RPC.
  uint32_t silent_ticks = 0;
  // Client: ticks its response has waited on our own grant scheduler (see TickClientRpc).
  uint32_t waiting_ticks = 0;
  // Client: times the request was sent again from the start after RPC_UNKNOWN, and ticks
  // since the first of them (restarts are bounded by time, not by count).
  uint32_t restarts = 0;
  uint32_t restart_ticks = 0;
  // Client: restarted, and nothing since from the server shows it has the request (a BUSY, a
  // GRANT or a response byte): its probes back off (engine_timer.cc, ProbeScale).
  bool unconfirmed_restart = false;
  // RESEND rounds sent for this RPC; each RESEND carries its round and an RPC_UNKNOWN echoes
  // it. Client: an RPC_UNKNOWN answering a round below first_live_round is stale, because that
  // RESEND went out before the latest restart or before the first response byte arrived (the
  // server has known the RPC since), and is ignored (PROTOCOL.md, "Answering RPC_UNKNOWN").
  uint32_t resend_rounds = 0;
  uint32_t first_live_round = 1;
  // Server: ticks since the whole response was handed to the sink, still unacknowledged.
  uint32_t unacked_ticks = 0;

  // Counted in the engine's sends_in_progress_ (its outgoing message is not fully sent).
  bool sending = false;
  // Client: counted in the engine's long_replies_awaited_ (UpdateSending).
  bool awaiting_long_reply = false;
  // Scheduling bookkeeping (owned by Pacer and GrantScheduler respectively).
  bool in_ready_set = false;
  uint64_t ready_key = 0;
  bool grantable = false;
  uint64_t grant_key_unreceived = 0;  // the unreceived count it is filed under while grantable
  int64_t counted_incoming = 0;       // this message's share of the receiver's total_incoming

  // The id the peer uses for this RPC (bit 0 flipped).
  uint64_t peer_id() const { return id ^ 1; }
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_RPC_H_
