// Transmission: the engine's packets leave through here.
//
// DESIGN NOTES
// Pump() is where data packets are scheduled: it asks the Pacer for the best ready message (SRPT,
// with a FIFO share), sends a burst of up to kBurstBytes from it, and repeats while the pacer's
// NIC-backlog estimate allows. A new message with nothing else ready (PumpNew) sends its first
// burst as Pump() would, without being filed in the ready set first. Bursts keep consecutive
// packets of one message together so the I/O backend can hand them to the kernel as one GSO send; a
// burst is short enough (one GSO frame) that a newly arrived shorter message waits at most that
// long. Control packets (GRANT, RESEND, ...) bypass the pacer and go out at the top priority. DATA
// to a peer on this host (Peer::unpaced, Config::pace_local) is sent as soon as it is granted, in
// the same bursts, not counted in the NIC backlog, and without a priority mark: it never reaches
// a NIC. Control packets are counted and marked whatever their destination (a few dozen bytes
// each, and rare on a small call's path).
#include <algorithm>

#include "transport/engine_impl.h"

namespace homarpc::transport {
namespace {

// About one GSO send's worth: 45 packets of 1416 bytes (seven 8916-byte ones and part of an
// eighth at a 9000-byte MTU).
constexpr uint32_t kBurstBytes = 64000;

}  // namespace

void Engine::Impl::Pump() {
  if (in_pump_) return;
  in_pump_ = true;
  const int64_t now = now_;
  while (Rpc* rpc = pacer_.Pick()) {
    // A held-back message first in SRPT order holds back the rest too, a peer on this host's
    // (which is never held back itself) included: it waits at most until the backlog drains.
    if (!rpc->peer->unpaced && !pacer_.MaySend(now, rpc->out.remaining())) break;
    const uint32_t before = rpc->out.next_xmit;
    const bool empty_before = rpc->out.sent_empty;
    TransmitFrom(rpc, kBurstBytes);
    pacer_.Update(rpc);
    if (rpc->out.next_xmit == before && rpc->out.sent_empty == empty_before) break;
  }
  in_pump_ = false;
}

void Engine::Impl::PumpNew(Rpc* rpc) {
  // What Pump() would do with `rpc` first in SRPT order, less filing it: with the ready set
  // empty it is Pick()'s only answer. Not counted as a pick (Pacer::Pick counts every pick
  // for its FIFO share; with nothing else ready there is nobody to be fair to).
  if (!in_pump_ && pacer_.empty() &&
      (rpc->peer->unpaced || pacer_.MaySend(now_, rpc->out.remaining()))) {
    TransmitFrom(rpc, kBurstBytes);
  }
  pacer_.Update(rpc);  // files it only if something is left to send
  Pump();
}

uint32_t Engine::Impl::TransmitFrom(Rpc* rpc, uint32_t max_bytes) {
  OutMessage& out = rpc->out;
  const int64_t now = now_;
  // After a restart every packet is a retransmission (PROTOCOL.md).
  const bool restarted = rpc->restarts > 0;
  if (out.NeedsEmptyPacket()) {
    SendDataPacket(rpc, 0, 0, /*retransmit=*/restarted, UnschedPriorityFor(rpc->peer, 0));
    out.sent_empty = true;
    UpdateSending(rpc);
    return 0;
  }
  const uint8_t unsched_prio = UnschedPriorityFor(rpc->peer, out.length);
  uint32_t sent = 0;
  while (out.HasSendable() && sent < max_bytes) {
    if (sent > 0 && !rpc->peer->unpaced && !pacer_.MaySend(now, out.remaining())) break;
    const uint8_t prio = out.next_xmit < out.unscheduled ? unsched_prio : out.sched_priority;
    const uint32_t len =
        SendDataPacket(rpc, out.next_xmit, std::min(rpc->peer->payload_per_packet, out.remaining()),
                       /*retransmit=*/restarted, prio);
    out.next_xmit += len;
    sent += len;
  }
  UpdateSending(rpc);
  return sent;
}

uint32_t Engine::Impl::SendDataPacket(Rpc* rpc, uint32_t offset, uint32_t max_len,
                                      bool retransmit, uint8_t priority) {
  Peer* peer = rpc->peer;
  OutMessage& out = rpc->out;
  OutPacket op;
  const uint32_t len =
      static_cast<uint32_t>(out.bytes.Gather(offset, max_len, &op.payload, &op.payload2));
  wire::Packet p;
  p.type = wire::PacketType::kData;
  p.sport = local_port_;
  p.dport = peer->address.port();
  p.sender_id = rpc->id;
  p.data.message_length = out.length;
  p.data.incoming = retransmit ? std::max(out.granted, offset + len) : out.granted;
  if (rpc->is_client && !peer->pending_acks.empty()) {
    p.data.ack = peer->pending_acks.back();
    peer->pending_acks.pop_back();
  }
  p.data.cutoff_version = peer->cutoff_version;
  p.data.retransmit = retransmit;
  p.data.offset = offset;

  op.dest = peer->address;
  op.priority = peer->unpaced ? 0 : Prio(priority);  // Config::pace_local
  op.header_len = static_cast<uint8_t>(wire::EncodeHeader(p, op.header));
  sink_->Send(op);
  if (!peer->unpaced) pacer_.OnTransmit(now_, len, op.header_len);
  ++stats_.packets_sent[static_cast<uint8_t>(wire::PacketType::kData)];
  if (retransmit) ++stats_.retransmitted_packets;
  stats_.data_bytes_sent += len;
  return len;
}

void Engine::BuildDirectPacket(const Address& dest, const DirectRoute& route, RpcId id,
                               uint32_t length, OutPacket* packet,
                               const wire::AckEntry* ack) const {
  const Impl& e = *impl_;
  wire::Packet p;
  p.type = wire::PacketType::kData;
  p.sport = e.local_port_;
  p.dport = dest.port();
  p.sender_id = id;
  p.data.message_length = length;
  p.data.incoming = std::min(length, e.config_.unsched_bytes);  // what StartOutgoing grants
  p.data.cutoff_version = route.cutoff_version;
  p.data.offset = 0;
  if (ack != nullptr) p.data.ack = *ack;
  packet->dest = dest;
  packet->priority =
      route.local ? 0 : e.Prio(e.UnschedPriority(route.cutoffs, route.cutoff_version, length));
  packet->header_len = static_cast<uint8_t>(wire::EncodeHeader(p, packet->header));
  packet->payload = {};
  packet->payload2 = {};
}

void Engine::Impl::SendControl(const Address& to, wire::Packet& p) {
  p.sport = local_port_;
  p.dport = to.port();
  OutPacket op;
  op.dest = to;
  op.priority = Prio(top_prio_);
  op.header_len = static_cast<uint8_t>(wire::EncodeHeader(p, op.header));
  sink_->Send(op);
  pacer_.OnTransmit(now_, 0, op.header_len);
  ++stats_.packets_sent[static_cast<uint8_t>(p.type)];
}

void Engine::Impl::SendSimple(const Address& to, wire::PacketType type, uint64_t sender_id) {
  wire::Packet p;
  p.type = type;
  p.sender_id = sender_id;
  SendControl(to, p);
}

void Engine::Impl::SendRefused(const Address& to, uint64_t sender_id, wire::RefuseReason reason) {
  wire::Packet p;
  p.type = wire::PacketType::kRefused;
  p.sender_id = sender_id;
  p.refused.reason = reason;
  SendControl(to, p);
}

void Engine::Impl::SendGrant(Rpc* rpc, uint32_t offset, uint8_t priority) {
  wire::Packet p;
  p.type = wire::PacketType::kGrant;
  p.sender_id = rpc->id;
  p.grant.offset = offset;
  p.grant.priority = Prio(priority);
  SendControl(rpc->peer->address, p);
}

void Engine::Impl::SendResendsFor(Rpc* rpc) {
  const InMessage& in = rpc->in;
  const uint32_t round = ++rpc->resend_rounds;
  auto resend = [&](uint32_t offset, uint32_t length) {
    wire::Packet p;
    p.type = wire::PacketType::kResend;
    p.sender_id = rpc->id;
    p.resend.offset = offset;
    p.resend.length = length;
    p.resend.priority = Prio(top_prio_);
    p.resend.round = round;
    SendControl(rpc->peer->address, p);
    ++stats_.resends_sent;
  };
  if (!in.started()) {
    resend(0, wire::kResendAll);
    return;
  }
  // Ask for at most ResendBudget() bytes per round, lowest offsets first: a receiver that lost
  // much (an overflowing socket buffer) must not trigger a retransmission storm that overflows
  // it again. What is not asked for now is asked for next round.
  uint64_t budget = config_.ResendBudget();
  auto ask = [&](uint32_t start, uint32_t size) {
    if (budget == 0 || size == 0) return;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(size, budget));
    resend(start, n);
    budget -= n;
  };
  for (const ByteRange& gap : in.gaps()) ask(gap.start, gap.size());
  if (in.recv_end() < in.granted()) ask(in.recv_end(), in.granted() - in.recv_end());
}

void Engine::Impl::SendAcks(Peer* peer, uint64_t header_id) {
  wire::Packet p;
  p.type = wire::PacketType::kAck;
  auto& pending = peer->pending_acks;
  if (header_id == 0) {
    if (pending.empty()) return;
    header_id = pending.back().client_id;
    pending.pop_back();
  }
  p.sender_id = header_id;
  while (!pending.empty() && p.ack.num_acks < wire::kMaxAcksPerPacket) {
    p.ack.acks[p.ack.num_acks++] = pending.back();
    pending.pop_back();
  }
  SendControl(peer->address, p);
}

void Engine::Impl::MaybeSendCutoffs(Peer* peer, uint16_t their_version) {
  if (their_version == cutoff_version_ || !config_.use_priorities) return;
  const int64_t now = now_;
  const int64_t tick = int64_t{config_.tick_usecs} * kNanosPerMicro;
  if (peer->cutoffs_sent_nanos != INT64_MIN && now - peer->cutoffs_sent_nanos < tick) return;
  peer->cutoffs_sent_nanos = now;
  wire::Packet p;
  p.type = wire::PacketType::kCutoffs;
  p.cutoffs.unsched_cutoffs = config_.unsched_cutoffs;
  p.cutoffs.cutoff_version = cutoff_version_;
  SendControl(peer->address, p);
}

void Engine::Impl::ScheduleGrants() {
  grants_.Schedule([this](Rpc* rpc, uint32_t offset, uint8_t priority) {
    SendGrant(rpc, offset, priority);
  });
}

uint8_t Engine::Impl::UnschedPriority(const std::array<uint32_t, 8>& cutoffs, uint16_t version,
                                      uint32_t length) const {
  if (!config_.use_priorities || config_.num_priorities == 1) return 0;
  const uint8_t max_level = top_prio_;
  if (version == 0) {
    // No cutoffs from this receiver yet: the next-to-highest level, as the Homa module does.
    return static_cast<uint8_t>(max_level >= 1 ? max_level - 1 : 0);
  }
  // Highest level whose cutoff admits this length; the lowest unscheduled level otherwise.
  uint8_t lowest = 0;
  for (int i = 7; i >= 1; --i) {
    const uint32_t cutoff = cutoffs[i];
    if (cutoff == 0) continue;
    lowest = static_cast<uint8_t>(i);
    if (length <= cutoff) return std::min<uint8_t>(static_cast<uint8_t>(i), max_level);
  }
  return std::min(lowest, max_level);
}

}  // namespace homarpc::transport
