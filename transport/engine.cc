// DESIGN NOTES
// The engine is one object per socket, driven from one thread; nothing here locks. Its state
// is three tables (client RPCs by id, server RPCs by (client address, id), peers by address)
// plus two schedulers: Pacer (what we send next) and GrantScheduler (what we let others send).
//
// Re-entrancy: handler callbacks run inside engine calls and may call SendRequest,
// SendResponse or AbortClientRpc. So an RPC is always taken out of the tables *before* its
// completion callback runs, code never holds a table iterator across a callback, and Pump()
// ignores nested calls (the outer call continues with the updated state).
//
// Memory safety with zero-copy sends: packets handed to the sink point into RPC buffers.
// EndRpc() therefore moves the RPC to dead_ and Reap() frees it after the owner has flushed the
// sink; a flushed sink no longer needs the bytes.
//
// At-most-once: a server RPC whose request was delivered stays until the client acknowledges
// the response (or is gone for need_ack_give_up_ticks); then a tombstone remembers its key for
// 2 x timeout_ticks so a duplicate request packet still in flight cannot run it again (the
// Homa module has this gap, reference §2.4).
//
// Acks that ride on requests. A client's next request to us usually carries the ack for its last
// RPC (its engine's pending ack, or one its loop set aside for a direct request: Loop::StashAck),
// so ending that RPC (two table updates, a tombstone, its memory) would come between every request
// and its handler: ~0.25 us of a 64 B call's ~11 us on loopback (docs/rpc-benchmarks.md, session
// 20). HandleData sets it aside in acks_due_ and Reap() ends it, which the loop calls early in its
// next round (after the posted closures and a flush) or at the end of a round without work, after
// the responses have left. A request that would be refused for want of a per-peer RPC slot first
// ends the acked RPCs (one may hold the slot); a duplicate of an acked request meanwhile finds the
// RPC still there, past delivery, and is suppressed as before. In the meantime a tick may still ask
// for that ack (NEED_ACK) or give the RPC up: an extra packet at worst.
#include "transport/engine.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "transport/engine_impl.h"
#include "transport/log.h"

namespace homarpc::transport {
namespace {

uint8_t FirstUnschedLevel(const Config& c) {
  for (uint8_t i = 1; i < 8; ++i) {
    if (c.unsched_cutoffs[i] != 0) return i;
  }
  return 1;
}


const char* RefuseReasonText(wire::RefuseReason r) {
  switch (r) {
    case wire::RefuseReason::kMessageTooLong:
      return "message longer than the receiver accepts";
    case wire::RefuseReason::kNoMemory:
      return "receiver out of buffer memory";
    case wire::RefuseReason::kTooManyRpcs:
      return "receiver has too many RPCs from this client";
    case wire::RefuseReason::kTooManyPeers:
      return "receiver has too many peers";
    case wire::RefuseReason::kNotServer:
      return "nothing serves requests at that address";
  }
  return "refused";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Engine: forwarding to Impl.

Engine::Engine(const Config& config, const Clock* clock, PacketSink* sink, EngineHandler* handler,
               uint16_t local_port, bool ipv6)
    : impl_(std::make_unique<Impl>(config, clock, sink, handler, local_port, ipv6)) {}
Engine::~Engine() = default;
absl::StatusOr<RpcId> Engine::SendRequest(const Address& dest, MessageBytes request,
                                          uint64_t cookie) {
  return impl_->SendRequest(dest, std::move(request), cookie);
}
absl::Status Engine::SendResponse(const ServerRpcHandle& rpc, MessageBytes response) {
  return impl_->SendResponse(rpc, std::move(response));
}
bool Engine::GetDirectRoute(const Address& dest, DirectRoute* route) {
  return impl_->GetDirectRoute(dest, route);
}
uint64_t Engine::route_epoch() const { return impl_->route_epoch_; }
RpcId Engine::ReserveClientId() {
  return impl_->next_client_id_.fetch_add(2, std::memory_order_relaxed);
}
uint32_t Engine::direct_max_bytes() const { return impl_->DirectMaxBytes(); }
absl::Status Engine::AdoptSentRequest(const Address& dest, RpcId id, MessageBytes request,
                                      uint64_t cookie) {
  return impl_->AdoptSentRequest(dest, id, std::move(request), cookie);
}
absl::Status Engine::AdoptSentResponse(const ServerRpcHandle& rpc, MessageBytes response) {
  return impl_->AdoptSentResponse(rpc, std::move(response));
}
void Engine::RetransmitDirect(const Address& peer, RpcId id, bool response) {
  impl_->RetransmitDirect(peer, id, response);
}
bool Engine::TakeAck(const Address& dest, wire::AckEntry* ack) {
  Peer* peer = impl_->peers_.Find(dest);
  if (peer == nullptr || peer->pending_acks.empty()) return false;
  *ack = peer->pending_acks.back();
  peer->pending_acks.pop_back();
  if (peer->pending_acks.empty()) {
    // Nothing left to flush for it: no tick is needed on its account.
    auto& list = impl_->peers_with_acks_;
    list.erase(std::remove(list.begin(), list.end(), peer), list.end());
  }
  return true;
}
void Engine::PutAck(const Address& dest, const wire::AckEntry& ack) {
  Peer* peer = impl_->peers_.FindOrCreate(dest, impl_->clock_->NowNanos());
  if (peer == nullptr) return;  // the table is full: the server will ask (NEED_ACK)
  impl_->AddPendingAck(peer, ack);
}
void Engine::FlushAcks() { impl_->FlushAcks(); }

void Engine::AbortClientRpc(RpcId id, absl::Status status) {
  impl_->AbortClientRpc(id, std::move(status));
}
void Engine::HandlePacket(const Address& from, absl::Span<const uint8_t> bytes) {
  impl_->HandlePacket(from, bytes);
}
void Engine::OnTimer() { impl_->OnTimer(); }
int64_t Engine::NextTimerNanos() const { return impl_->NextTimerNanos(); }
void Engine::Reap() { impl_->Reap(); }
bool Engine::MidTransfer() const {
  const Impl& e = *impl_;
  const int64_t busy_nanos = int64_t{e.config_.busy_poll_usecs} * kNanosPerMicro;
  return e.sends_in_progress_ > 0 || e.grants_.total_incoming() > 0 ||
         (e.long_replies_awaited_ > 0 && e.now_ - e.long_request_sent_nanos_ < busy_nanos);
}
const EngineStats& Engine::stats() const { return impl_->stats_; }
EngineMemory Engine::memory() const { return impl_->memory(); }
const Config& Engine::config() const { return impl_->config_; }
uint16_t Engine::local_port() const { return impl_->local_port_; }

// ---------------------------------------------------------------------------------------------
// Construction.

Engine::Impl::Impl(const Config& config, const Clock* clock, PacketSink* sink,
                   EngineHandler* handler, uint16_t local_port, bool ipv6)
    : config_(config),
      clock_(clock),
      sink_(sink),
      handler_(handler),
      local_port_(local_port),
      ipv6_(ipv6),
      mtu_payload_per_packet_(config.PayloadPerPacket(ipv6)),
      top_prio_(static_cast<uint8_t>(config.num_priorities - 1)),
      first_unsched_prio_(FirstUnschedLevel(config)),
      max_sched_prio_(static_cast<uint8_t>(FirstUnschedLevel(config) - 1)),
      peers_(config.max_peers,
             [this](Peer* peer) {
               Route route;
               if (config_.use_path_mtu || !config_.pace_local) {
                 route = sink_->RouteTo(peer->address);
               }
               peer->payload_per_packet = Config::PayloadPerPacketAt(
                   config_.MtuForPath(config_.use_path_mtu ? route.mtu : 0), ipv6_);
               peer->unpaced = route.local && !config_.pace_local;
               if (peer->unpaced) ++stats_.unpaced_peers;
             }),
      grants_(config_, static_cast<uint8_t>(FirstUnschedLevel(config) - 1),
              config.PayloadPerPacket(ipv6)),
      pacer_(config_, ipv6) {
  absl::Status valid = config.Validate();
  if (!valid.ok()) {
    HOMARPC_LOG(ERROR) << "invalid transport config: " << valid.ToString();
    std::abort();
  }
  now_ = clock_->NowNanos();
  const int64_t now = now_;
  next_tick_nanos_ = now + int64_t{config_.tick_usecs} * kNanosPerMicro;
  next_peer_gc_nanos_ = now + kNanosPerSecond;
}

Engine::Impl::~Impl() = default;

// ---------------------------------------------------------------------------------------------
// Application calls.

absl::StatusOr<RpcId> Engine::Impl::SendRequest(const Address& dest, MessageBytes request,
                                                uint64_t cookie) {
  now_ = clock_->NowNanos();
  if (!dest.is_set() || dest.is_v6() != ipv6_) {
    return absl::InvalidArgumentError(
        absl::StrCat("destination ", dest.ToString(), " is not an ", ipv6_ ? "IPv6" : "IPv4",
                     " address, as this endpoint is"));
  }
  if (request.size() > config_.max_message_length) {
    return absl::ResourceExhaustedError(absl::StrCat("request of ", request.size(),
                                                     " bytes exceeds the maximum message length ",
                                                     config_.max_message_length));
  }
  const int64_t now = now_;
  Peer* peer = peers_.FindOrCreate(dest, now);
  stats_.peers = peers_.size();
  if (peer == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many peers (max_peers = ", config_.max_peers, ")"));
  }
  const uint64_t id = next_client_id_.fetch_add(2, std::memory_order_relaxed);
  Rpc* rpc = NewRpc(/*is_client=*/true, id, peer);
  rpc->cookie = cookie;
  StartOutgoing(rpc, std::move(request));
  return id;
}

absl::Status Engine::Impl::AdoptSentRequest(const Address& dest, RpcId id, MessageBytes request,
                                            uint64_t cookie) {
  now_ = clock_->NowNanos();
  if (!dest.is_set() || dest.is_v6() != ipv6_ || request.size() > DirectMaxBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a direct send to ", dest.ToString(), " of ", request.size(), " bytes"));
  }
  Peer* peer = peers_.FindOrCreate(dest, now_);
  stats_.peers = peers_.size();
  if (peer == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many peers (max_peers = ", config_.max_peers, ")"));
  }
  Rpc* rpc = NewRpc(/*is_client=*/true, id, peer);
  rpc->cookie = cookie;
  AdoptSentMessage(rpc, std::move(request));
  return absl::OkStatus();
}

absl::Status Engine::Impl::AdoptSentResponse(const ServerRpcHandle& handle, MessageBytes response) {
  now_ = clock_->NowNanos();
  absl::StatusOr<Rpc*> found = RpcAwaitingResponse(handle);
  if (!found.ok()) return found.status();
  Rpc* rpc = *found;
  if (response.size() > DirectMaxBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a direct response of ", response.size(), " bytes"));
  }
  AdoptSentMessage(rpc, std::move(response));
  return absl::OkStatus();
}

void Engine::Impl::AdoptSentMessage(Rpc* rpc, MessageBytes message) {
  rpc->state = RpcState::kOutgoing;
  rpc->silent_ticks = 0;
  OutMessage& out = rpc->out;
  out.length = static_cast<uint32_t>(message.size());
  out.bytes = std::move(message);
  out.unscheduled = out.length;  // at most DirectMaxBytes(): one packet, all unscheduled
  out.granted = out.length;
  out.next_xmit = out.length;
  out.sent_empty = out.length == 0;
  out.active = true;
  // The packet left on another thread: account for it as SendDataPacket would have.
  if (!rpc->peer->unpaced) pacer_.OnTransmit(now_, out.length, wire::kDataHeaderSize);
  ++stats_.packets_sent[static_cast<uint8_t>(wire::PacketType::kData)];
  stats_.data_bytes_sent += out.length;
  ++stats_.direct_sends;
}

void Engine::Impl::AddPendingAck(Peer* peer, const wire::AckEntry& ack) {
  if (peer->pending_acks.empty()) peers_with_acks_.push_back(peer);
  peer->pending_acks.push_back(ack);
  if (peer->pending_acks.size() >= wire::kMaxAcksPerPacket) SendAcks(peer, 0);
}

void Engine::Impl::RetransmitDirect(const Address& peer, RpcId id, bool response) {
  now_ = clock_->NowNanos();
  Rpc* rpc = nullptr;
  if (response) {
    auto it = server_rpcs_.find(ServerKey{peer, id});
    if (it != server_rpcs_.end()) rpc = it->second.get();
  } else {
    auto it = client_rpcs_.find(id);
    if (it != client_rpcs_.end()) rpc = it->second.get();
  }
  if (rpc == nullptr || rpc->state != RpcState::kOutgoing || !rpc->out.FullySent()) return;
  // The adoption counted the packet the kernel refused; the loop's own send counts it again.
  --stats_.packets_sent[static_cast<uint8_t>(wire::PacketType::kData)];
  stats_.data_bytes_sent -= rpc->out.length;
  rpc->out.next_xmit = 0;
  rpc->out.sent_empty = false;
  UpdateSending(rpc);
  pacer_.Update(rpc);
  Pump();
}

bool Engine::Impl::GetDirectRoute(const Address& dest, DirectRoute* route) {
  Peer* peer = peers_.Find(dest);
  if (peer == nullptr) return false;
  route->cutoffs = peer->cutoffs;
  route->cutoff_version = peer->cutoff_version;
  route->local = peer->unpaced;
  return true;
}

void Engine::Impl::StartOutgoing(Rpc* rpc, MessageBytes message) {
  rpc->state = RpcState::kOutgoing;
  rpc->silent_ticks = 0;
  OutMessage& out = rpc->out;
  out.length = static_cast<uint32_t>(message.size());
  out.bytes = std::move(message);
  out.unscheduled = std::min(out.length, config_.unsched_bytes);
  out.granted = out.unscheduled;
  out.active = true;
  UpdateSending(rpc);
  PumpNew(rpc);
}

absl::StatusOr<Rpc*> Engine::Impl::RpcAwaitingResponse(const ServerRpcHandle& handle) {
  auto it = server_rpcs_.find(ServerKey{handle.client, handle.id});
  if (it == server_rpcs_.end()) {
    return absl::NotFoundError(absl::StrCat("no server RPC ", handle.id, " from ",
                                            handle.client.ToString(), " (client gone?)"));
  }
  Rpc* rpc = it->second.get();
  if (rpc->state != RpcState::kInService) {
    return absl::FailedPreconditionError(absl::StrCat("server RPC ", handle.id, " from ",
                                                      handle.client.ToString(),
                                                      " was already answered"));
  }
  return rpc;
}

absl::Status Engine::Impl::SendResponse(const ServerRpcHandle& handle, MessageBytes response) {
  now_ = clock_->NowNanos();
  absl::StatusOr<Rpc*> found = RpcAwaitingResponse(handle);
  if (!found.ok()) return found.status();
  Rpc* rpc = *found;
  if (response.size() > config_.max_message_length) {
    SendRefused(rpc->peer->address, rpc->id, wire::RefuseReason::kMessageTooLong);
    EndRpc(rpc);
    return absl::ResourceExhaustedError(absl::StrCat("response of ", response.size(),
                                                     " bytes exceeds the maximum message length ",
                                                     config_.max_message_length));
  }
  StartOutgoing(rpc, std::move(response));
  return absl::OkStatus();
}

void Engine::Impl::AbortClientRpc(RpcId id, absl::Status status) {
  now_ = clock_->NowNanos();
  auto it = client_rpcs_.find(id);
  if (it == client_rpcs_.end()) return;
  if (status.ok()) status = absl::CancelledError("aborted");
  FailClientRpc(it->second.get(), std::move(status));
}

// ---------------------------------------------------------------------------------------------
// RPC bookkeeping.

Rpc* Engine::Impl::NewRpc(bool is_client, uint64_t id, Peer* peer) {
  auto rpc = std::make_unique<Rpc>();
  rpc->is_client = is_client;
  rpc->id = id;
  rpc->peer = peer;
  rpc->birth_nanos = now_;
  Rpc* raw = rpc.get();
  if (is_client) {
    ++peer->client_rpcs;
    client_rpcs_.emplace(id, std::move(rpc));
    stats_.client_rpcs = client_rpcs_.size();
  } else {
    ++peer->server_rpcs;
    server_rpcs_.emplace(ServerKey{peer->address, id}, std::move(rpc));
    stats_.server_rpcs = server_rpcs_.size();
  }
  return raw;
}

void Engine::Impl::EndRpc(Rpc* rpc) {
  if (rpc->state == RpcState::kDead) return;
  pacer_.Remove(rpc);
  const bool held_grants = rpc->grantable || rpc->counted_incoming > 0;
  grants_.Remove(rpc);
  if (rpc->in.started()) {
    stats_.rx_bytes_held -= rpc->in.length();
    rpc->in.Reset();
  }
  const bool delivered =
      !rpc->is_client && (rpc->state == RpcState::kInService || rpc->state == RpcState::kOutgoing);
  rpc->state = RpcState::kDead;
  UpdateSending(rpc);
  std::unique_ptr<Rpc> owned;
  if (rpc->is_client) {
    --rpc->peer->client_rpcs;
    auto it = client_rpcs_.find(rpc->id);
    owned = std::move(it->second);
    client_rpcs_.erase(it);
    stats_.client_rpcs = client_rpcs_.size();
  } else {
    --rpc->peer->server_rpcs;
    ServerKey key{rpc->peer->address, rpc->id};
    auto it = server_rpcs_.find(key);
    owned = std::move(it->second);
    server_rpcs_.erase(it);
    stats_.server_rpcs = server_rpcs_.size();
    if (delivered) {
      // Two old ones go for each new one: expiry keeps up with any steady rate of RPCs, so the
      // tick finds (almost) nothing left to do (engine_timer.cc, DESIGN NOTES).
      ExpireTombstones(now_, 2);
      tombstones_.Add(key, now_ + 2 * int64_t{config_.timeout_ticks} * config_.tick_usecs * 1000);
      stats_.tombstones = tombstones_.size();
    }
  }
  rpc->peer->last_active_nanos = now_;
  dead_.push_back(std::move(owned));
  // Its active slot and headroom may be what other messages wait for.
  if (held_grants) ScheduleGrants();
}

void Engine::Impl::FailClientRpc(Rpc* rpc, absl::Status status) {
  const RpcId id = rpc->id;
  const uint64_t cookie = rpc->cookie;
  EndRpc(rpc);
  handler_->OnResponse(id, cookie, std::move(status));
}

void Engine::Impl::Reap() {
  EndAckedRpcs();
  dead_.clear();
}

EngineMemory Engine::Impl::memory() const {
  EngineMemory m;
  // Each table slot holds the key, a unique_ptr and one control byte (absl's SwissTable).
  m.bytes_per_client_rpc = sizeof(Rpc) + sizeof(uint64_t) + sizeof(void*) + 1;
  m.bytes_per_server_rpc = sizeof(Rpc) + sizeof(ServerKey) + sizeof(void*) + 1;
  m.bytes_per_peer = sizeof(Peer) + sizeof(Address) + sizeof(void*) + 1;
  m.total_state_bytes = client_rpcs_.size() * m.bytes_per_client_rpc +
                        server_rpcs_.size() * m.bytes_per_server_rpc +
                        peers_.size() * m.bytes_per_peer +
                        tombstones_.size() * Tombstones::kBytesPerEntry;
  return m;
}

Rpc* Engine::Impl::FindRpc(const Address& from, uint64_t sender_id) {
  const uint64_t local = sender_id ^ 1;
  if ((sender_id & 1) == 0) {
    // The sender is a client: this is about one of our server RPCs.
    auto it = server_rpcs_.find(ServerKey{from, local});
    return it == server_rpcs_.end() ? nullptr : it->second.get();
  }
  auto it = client_rpcs_.find(local);
  if (it == client_rpcs_.end()) return nullptr;
  if (it->second->peer->address != from) {
    ++stats_.packets_dropped_semantic;  // someone else naming our RPC
    return nullptr;
  }
  return it->second.get();
}

// ---------------------------------------------------------------------------------------------
// Packet input.

void Engine::Impl::HandlePacket(const Address& from, absl::Span<const uint8_t> bytes) {
  now_ = clock_->NowNanos();
  wire::Packet p;
  wire::DecodeError err = wire::Decode(bytes, &p);
  if (err != wire::DecodeError::kOk) {
    ++stats_.packets_dropped[static_cast<int>(err)];
    return;
  }
  if (!from.is_set() || from.is_v6() != ipv6_) {
    ++stats_.packets_dropped_semantic;
    return;
  }
  ++stats_.packets_received[static_cast<uint8_t>(p.type)];
  switch (p.type) {
    case wire::PacketType::kData:
      HandleData(from, p);
      break;
    case wire::PacketType::kGrant:
      if (Rpc* rpc = FindRpc(from, p.sender_id)) HandleGrant(rpc, p);
      break;
    case wire::PacketType::kResend:
      HandleResend(from, FindRpc(from, p.sender_id), p);
      break;
    case wire::PacketType::kRpcUnknown:
      if (Rpc* rpc = FindRpc(from, p.sender_id)) HandleRpcUnknown(rpc, p);
      break;
    case wire::PacketType::kBusy:
      if (Rpc* rpc = FindRpc(from, p.sender_id)) {
        rpc->silent_ticks = 0;
        rpc->unconfirmed_restart = false;  // the server has the request
      }
      break;
    case wire::PacketType::kCutoffs:
      HandleCutoffs(from, p);
      break;
    case wire::PacketType::kNeedAck:
      HandleNeedAck(from, FindRpc(from, p.sender_id), p);
      break;
    case wire::PacketType::kAck:
      HandleAck(from, p);
      break;
    case wire::PacketType::kRefused:
      if (Rpc* rpc = FindRpc(from, p.sender_id)) HandleRefused(rpc, p);
      break;
  }
  Pump();
}

void Engine::Impl::HandleData(const Address& from, const wire::Packet& p) {
  Rpc* rpc = nullptr;
  if ((p.sender_id & 1) == 0) {
    // A request packet from a client. Its piggybacked ack names an RPC of ours it has finished:
    // that one ends at the next Reap(), after this round's responses have left (DESIGN NOTES,
    // "Acks that ride on requests").
    if (p.data.ack.client_id != 0) acks_due_.push_back(ServerKey{from, p.data.ack.client_id ^ 1});
    rpc = ServerRpcForData(from, p);
    if (rpc == nullptr) return;
  } else {
    // A response packet for one of our client RPCs.
    rpc = FindRpc(from, p.sender_id);
    if (rpc == nullptr) {
      ++stats_.packets_dropped_semantic;  // late duplicate of a finished RPC, or bogus
      return;
    }
    if (!rpc->in.started()) {
      const uint32_t len = p.data.message_length;
      wire::RefuseReason reason;
      bool refuse = false;
      if (len > config_.IncomingLimit()) {
        reason = wire::RefuseReason::kMessageTooLong;
        refuse = true;
      } else if (stats_.rx_bytes_held + len > config_.max_rx_bytes_held) {
        reason = wire::RefuseReason::kNoMemory;
        refuse = true;
      }
      if (refuse) {
        ++stats_.refused_messages;
        SendRefused(from, rpc->id, reason);
        FailClientRpc(rpc, absl::ResourceExhaustedError(absl::StrCat(
                               "response of ", len, " bytes refused: ",
                               RefuseReasonText(reason))));
        return;
      }
      // The server answers only after the whole request arrived: stop sending it (a restart
      // may still have been sending), so nothing waits on request bytes that will never go.
      rpc->state = RpcState::kIncoming;
      pacer_.Remove(rpc);
      rpc->out.active = false;
      UpdateSending(rpc);
      rpc->in.Start(len, InitialGranted(p));
      stats_.rx_bytes_held += len;
      // The server has this RPC: an RPC_UNKNOWN answering an earlier RESEND is stale.
      rpc->first_live_round = rpc->resend_rounds + 1;
      rpc->unconfirmed_restart = false;
    }
  }
  ReceiveData(rpc, p);
}

uint32_t Engine::Impl::InitialGranted(const wire::Packet& p) const {
  // Homa takes the first packet's `incoming` as the bytes already granted. A retransmission
  // carries the sender's whole grant, which after we dropped our state (a timeout) can be
  // megabytes beyond this packet: believe at most the unscheduled prefix or this packet's end.
  // (What lies below it is then a gap, re-requested ResendBudget() bytes per RESEND round.)
  const uint32_t shown = p.data.offset + static_cast<uint32_t>(p.payload.size());
  return std::min({p.data.incoming, p.data.message_length,
                   std::max(config_.unsched_bytes, shown)});
}

Rpc* Engine::Impl::ServerRpcForData(const Address& from, const wire::Packet& p) {
  const ServerKey key{from, p.sender_id ^ 1};
  auto it = server_rpcs_.find(key);
  if (it != server_rpcs_.end()) {
    Rpc* rpc = it->second.get();
    if (rpc->state != RpcState::kIncoming) {
      // The request was already delivered: a duplicate or a retransmission. Never run twice.
      ++stats_.duplicate_requests_suppressed;
      stats_.duplicate_data_bytes += p.payload.size();
      return nullptr;
    }
    return rpc;
  }
  if (tombstones_.Contains(key)) {
    ++stats_.duplicate_requests_suppressed;
    stats_.duplicate_data_bytes += p.payload.size();
    return nullptr;
  }
  const uint32_t len = p.data.message_length;
  const int64_t now = now_;
  auto refuse = [&](wire::RefuseReason reason) -> Rpc* {
    ++stats_.refused_messages;
    SendRefused(from, key.id, reason);
    return nullptr;
  };
  if (!config_.accept_requests) return refuse(wire::RefuseReason::kNotServer);
  if (len > config_.IncomingLimit()) return refuse(wire::RefuseReason::kMessageTooLong);
  if (stats_.rx_bytes_held + len > config_.max_rx_bytes_held) {
    return refuse(wire::RefuseReason::kNoMemory);
  }
  Peer* peer = peers_.FindOrCreate(from, now);
  stats_.peers = peers_.size();
  if (peer == nullptr) return refuse(wire::RefuseReason::kTooManyPeers);
  // An acked RPC not yet ended may hold the per-peer slot this request needs. (Its rx bytes
  // went at delivery, OnMessageComplete, so only the slot can be at stake.)
  if (peer->server_rpcs >= config_.max_rpcs_per_peer && !acks_due_.empty()) EndAckedRpcs();
  if (peer->server_rpcs >= config_.max_rpcs_per_peer) {
    return refuse(wire::RefuseReason::kTooManyRpcs);
  }
  Rpc* rpc = NewRpc(/*is_client=*/false, key.id, peer);
  rpc->state = RpcState::kIncoming;
  rpc->in.Start(len, InitialGranted(p));
  stats_.rx_bytes_held += len;
  return rpc;
}

void Engine::Impl::ReceiveData(Rpc* rpc, const wire::Packet& p) {
  InMessage& in = rpc->in;
  if (p.data.message_length != in.length()) {
    ++stats_.packets_dropped_semantic;  // contradicts what earlier packets said
    return;
  }
  rpc->silent_ticks = 0;
  rpc->peer->last_active_nanos = now_;
  MaybeSendCutoffs(rpc->peer, p.data.cutoff_version);
  const uint32_t size = static_cast<uint32_t>(p.payload.size());
  const uint32_t fresh = in.Receive(p.data.offset, p.payload);
  stats_.data_bytes_received += size;
  stats_.duplicate_data_bytes += size - fresh;
  // Senders transmit whole packets, so the last granted packet may end past the grant.
  const uint32_t end = p.data.offset + size;
  if (end > in.granted()) in.set_granted(end);
  if (in.complete()) {
    OnMessageComplete(rpc);
    return;
  }
  grants_.Update(rpc);
  stats_.max_grantable_messages =
      std::max<uint64_t>(stats_.max_grantable_messages, grants_.grantable_count());
  if (grants_.WorthScheduling(rpc)) ScheduleGrants();
}

void Engine::Impl::OnMessageComplete(Rpc* rpc) {
  grants_.Remove(rpc);
  stats_.rx_bytes_held -= rpc->in.length();
  Buffer message = rpc->in.Release();
  if (rpc->is_client) {
    AddPendingAck(rpc->peer, {rpc->id, rpc->peer->address.port()});
    const RpcId id = rpc->id;
    const uint64_t cookie = rpc->cookie;
    EndRpc(rpc);
    ++stats_.responses_delivered;
    handler_->OnResponse(id, cookie, std::move(message));
  } else {
    rpc->state = RpcState::kInService;
    rpc->silent_ticks = 0;
    ++stats_.requests_delivered;
    handler_->OnRequest(ServerRpcHandle{rpc->peer->address, rpc->id}, std::move(message));
  }
  ScheduleGrants();  // the finished message may have held back others
}

void Engine::Impl::HandleGrant(Rpc* rpc, const wire::Packet& p) {
  OutMessage& out = rpc->out;
  if (!out.active) return;
  rpc->silent_ticks = 0;
  rpc->unconfirmed_restart = false;  // a server granting our request has it
  uint32_t offset = p.grant.offset;
  if (offset > out.length) {
    ++stats_.packets_dropped_semantic;  // grant beyond the message: clamp, do not trust
    offset = out.length;
  }
  if (offset > out.granted) {
    out.granted = offset;
    out.sched_priority = p.grant.priority;
    pacer_.Update(rpc);
  }
}

void Engine::Impl::HandleResend(const Address& from, Rpc* rpc, const wire::Packet& p) {
  if (rpc == nullptr) {
    wire::Packet unknown;
    unknown.type = wire::PacketType::kRpcUnknown;
    unknown.sender_id = p.sender_id ^ 1;
    unknown.unknown.resend_round = p.resend.round;  // which RESEND this answers
    SendControl(from, unknown);
    return;
  }
  rpc->unacked_ticks = 0;  // the peer is alive and still wants this RPC
  OutMessage& out = rpc->out;
  if (!out.active) {
    // Server still receiving or computing the request: "alive, nothing to send yet".
    SendSimple(from, wire::PacketType::kBusy, rpc->id);
    return;
  }
  rpc->silent_ticks = 0;
  const uint32_t start = std::min(p.resend.offset, out.length);
  uint32_t end = p.resend.length == wire::kResendAll
                     ? out.next_xmit
                     : static_cast<uint32_t>(std::min<uint64_t>(
                           uint64_t{p.resend.offset} + p.resend.length, out.length));
  if (end > out.granted) {
    out.granted = end;  // the receiver asks beyond our grant: a GRANT was lost
    pacer_.Update(rpc);
  }
  const uint32_t sent_end = std::min(end, out.next_xmit);
  const uint8_t prio = std::min<uint8_t>(p.resend.priority, top_prio_);
  if (out.length == 0) {
    if (out.sent_empty) {
      SendDataPacket(rpc, 0, 0, /*retransmit=*/true, prio);
    } else {
      SendSimple(from, wire::PacketType::kBusy, rpc->id);
    }
    return;
  }
  if (start >= sent_end) {
    SendSimple(from, wire::PacketType::kBusy, rpc->id);
    return;
  }
  // Retransmit whole packets on the original boundaries, at most ResendBudget() bytes per RESEND
  // (an honest receiver never asks for more in one round; a forged RESEND must not turn us into
  // an amplifier). A gathered message may have cut packets short at segment boundaries, so its
  // packets do not start at multiples of the packet size: it restarts at the receiver's gap,
  // which is where a lost packet started (a receiver holding its maximum of gaps takes only
  // packets that start at one).
  uint32_t offset = out.bytes.segment_count() > 1
                        ? start
                        : start - start % rpc->peer->payload_per_packet;  // as they were sent
  // Larger packets than Config::mtu were lost: the route may not carry them after all.
  FallBackToConfigMtu(rpc->peer);
  const uint32_t packet = rpc->peer->payload_per_packet;
  const uint64_t limit = uint64_t{offset} + config_.ResendBudget();
  while (offset < sent_end && offset < limit) {
    const uint32_t len =
        SendDataPacket(rpc, offset, std::min(packet, out.length - offset),
                       /*retransmit=*/true, prio);
    offset += len;
  }
}

void Engine::Impl::FallBackToConfigMtu(Peer* peer) {
  if (peer->payload_per_packet <= mtu_payload_per_packet_) return;
  peer->payload_per_packet = mtu_payload_per_packet_;
  ++stats_.path_mtu_fallbacks;
}

void Engine::Impl::HandleRpcUnknown(Rpc* rpc, const wire::Packet& p) {
  if (!rpc->is_client) {
    // The client has forgotten this RPC: nobody waits for the response.
    AbandonServerRpc(rpc);
    return;
  }
  const uint32_t round = p.unknown.resend_round;
  if (round != 0 && round < rpc->first_live_round) {
    // It answers a RESEND sent before our latest restart or before the response began: the
    // server did not know the RPC then, but has since (a delayed or duplicated answer, or one
    // we read late). Acting on it would restart a request the server already has, or fail a
    // call whose response is arriving. (Round 0: a peer that does not echo; take it as fresh.)
    ++stats_.stale_rpc_unknowns;
    return;
  }
  if (rpc->in.started()) {
    // The server executed the request and then forgot it: sending it again could execute it
    // twice (PROTOCOL.md, "Answering RPC_UNKNOWN").
    FailClientRpc(rpc, absl::UnavailableError(absl::StrCat(
                           "server ", rpc->peer->address.ToString(),
                           " lost the RPC while sending its response")));
    return;
  }
  // Bound the restarts so an RPC whose DATA never gets through fails about when a silent one
  // would: once it has restarted kMinRestarts times over timeout_ticks (PROTOCOL.md,
  // "Answering RPC_UNKNOWN"; the probes between restarts back off, engine_timer.cc).
  constexpr uint32_t kMinRestarts = 4;
  if (rpc->restarts >= kMinRestarts && rpc->restart_ticks >= config_.timeout_ticks) {
    FailClientRpc(rpc, absl::UnavailableError(absl::StrCat(
                           "server ", rpc->peer->address.ToString(),
                           " does not know the RPC after ", rpc->restarts, " restarts in ",
                           int64_t{rpc->restart_ticks} * config_.tick_usecs / 1000, " ms")));
    return;
  }
  // The server has no state for our RPC (every request packet it had was lost): send the
  // request again from the start, in packets of Config::mtu if they were larger.
  FallBackToConfigMtu(rpc->peer);
  ++rpc->restarts;
  ++stats_.restarts;
  rpc->first_live_round = rpc->resend_rounds + 1;
  rpc->unconfirmed_restart = true;
  grants_.Remove(rpc);
  rpc->state = RpcState::kOutgoing;
  rpc->silent_ticks = 0;
  rpc->out.next_xmit = 0;
  rpc->out.sent_empty = false;
  rpc->out.granted = rpc->out.unscheduled;  // as if new: the server has no grant to honour
  UpdateSending(rpc);
  pacer_.Update(rpc);
}

void Engine::Impl::HandleCutoffs(const Address& from, const wire::Packet& p) {
  Peer* peer = peers_.Find(from);
  if (peer == nullptr) return;
  peer->cutoffs = p.cutoffs.unsched_cutoffs;
  peer->cutoff_version = p.cutoffs.cutoff_version;
  ++route_epoch_;
}

void Engine::Impl::HandleNeedAck(const Address& from, Rpc* rpc, const wire::Packet& p) {
  if (rpc != nullptr) {
    // Our response is still incomplete: no ACK; the timer asks for the missing bytes.
    return;
  }
  // We finished (or abandoned) that RPC: the server may forget it.
  Peer* peer = peers_.Find(from);
  if (peer != nullptr) {
    SendAcks(peer, p.sender_id ^ 1);
    return;
  }
  wire::Packet ack;
  ack.type = wire::PacketType::kAck;
  ack.sender_id = p.sender_id ^ 1;
  SendControl(from, ack);
}

void Engine::Impl::HandleAck(const Address& from, const wire::Packet& p) {
  ProcessAck(ServerKey{from, p.sender_id ^ 1});
  for (uint16_t i = 0; i < p.ack.num_acks; ++i) {
    if (p.ack.acks[i].client_id != 0) ProcessAck(ServerKey{from, p.ack.acks[i].client_id ^ 1});
  }
}

void Engine::Impl::EndAckedRpcs() {
  for (const ServerKey& key : acks_due_) ProcessAck(key);
  acks_due_.clear();
}

void Engine::Impl::ProcessAck(const ServerKey& key) {
  auto it = server_rpcs_.find(key);
  if (it == server_rpcs_.end()) return;
  Rpc* rpc = it->second.get();
  // Only a response being sent can be acknowledged; an ack for anything else is bogus.
  if (rpc->state != RpcState::kOutgoing) {
    ++stats_.packets_dropped_semantic;
    return;
  }
  EndRpc(rpc);
}

void Engine::Impl::HandleRefused(Rpc* rpc, const wire::Packet& p) {
  if (rpc->is_client) {
    const std::string why =
        absl::StrCat("server refused the request: ", RefuseReasonText(p.refused.reason));
    FailClientRpc(rpc, p.refused.reason == wire::RefuseReason::kNotServer
                           ? absl::UnavailableError(why)
                           : absl::ResourceExhaustedError(why));
  } else {
    AbandonServerRpc(rpc);  // the client will not take our response

  }
}

}  // namespace homarpc::transport
