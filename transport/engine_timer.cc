// Timers: loss recovery, timeouts, acknowledgements, housekeeping (reference §4).
//
// DESIGN NOTES
// Time is counted in ticks (tick_usecs, 1 ms by default) of silence per RPC, as the Homa
// module does: packets are far more often delayed than lost, so retries happen only on this
// coarse timer. A tick walks every live RPC (O(RPCs) per millisecond); each RPC's silence
// counter is reset by any useful packet for it. Where the next move is ours (we still hold
// granted bytes to send, or we have received all we granted) silence does not count.
//
// The walk works on a snapshot of RPC pointers because ending an RPC runs callbacks that may
// start or end others; ended RPCs stay allocated (dead_) until Reap(), so the snapshot never
// dangles, and their state is kDead.
//
// Tombstones (engine.cc, at-most-once) expire mostly outside the tick: each server RPC that
// ends forgets up to two expired ones before it adds its own, and the tick only takes what is
// left (when RPCs stop ending). Expiring all of them at the tick made it a burst that grows with
// the call rate: at ~55k RPCs/s, ~55 hash-set erases per tick (~7 us, measured) landed on one
// RPC of every millisecond, ~2% of the calls of a loopback ping-pong (homarpc-bench unary).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/engine_impl.h"

namespace homarpc::transport {

void Engine::Impl::OnTimer() {
  now_ = clock_->NowNanos();
  const int64_t now = now_;
  if (now >= next_tick_nanos_) {
    const int64_t tick = int64_t{config_.tick_usecs} * kNanosPerMicro;
    next_tick_nanos_ += tick;
    if (next_tick_nanos_ <= now) next_tick_nanos_ = now + tick;  // we fell behind: skip ahead
    Tick();
  }
  grants_.MaybeFifoGrant(now, [this](Rpc* rpc, uint32_t offset, uint8_t priority) {
    SendGrant(rpc, offset, priority);
  });
  Pump();
}

int64_t Engine::Impl::NextTimerNanos() const {
  // With no RPC, ack or tombstone to look after, ticks have nothing to do until the next peer
  // collection: an idle endpoint then sleeps instead of waking (and spinning) every tick.
  if (client_rpcs_.empty() && server_rpcs_.empty() && peers_with_acks_.empty() &&
      tombstones_.empty()) {
    return std::max(next_tick_nanos_, next_peer_gc_nanos_);
  }
  int64_t next = next_tick_nanos_;
  if (!pacer_.empty()) next = std::min(next, pacer_.NextSendNanos());
  if (grants_.grantable_count() > 0) next = std::min(next, grants_.next_fifo_nanos());
  return next;
}

void Engine::Impl::ExpireTombstones(int64_t now, size_t max) {
  tombstones_.Expire(now, max);
  stats_.tombstones = tombstones_.size();
}

void Engine::Impl::FlushAcks() {
  for (Peer* peer : peers_with_acks_) {
    while (!peer->pending_acks.empty()) SendAcks(peer, 0);
  }
  peers_with_acks_.clear();
}

void Engine::Impl::Tick() {
  const int64_t now = now_;
  // Acks that found no DATA packet to ride on go out explicitly, so servers need not ask.
  FlushAcks();

  std::vector<Rpc*> rpcs;
  rpcs.reserve(client_rpcs_.size() + server_rpcs_.size());
  for (auto& [id, rpc] : client_rpcs_) rpcs.push_back(rpc.get());
  for (auto& [key, rpc] : server_rpcs_) rpcs.push_back(rpc.get());
  for (Rpc* rpc : rpcs) {
    if (rpc->state == RpcState::kDead) continue;
    if (rpc->is_client) {
      TickClientRpc(rpc);
    } else {
      TickServerRpc(rpc);
    }
  }

  ExpireTombstones(now, SIZE_MAX);
  if (now >= next_peer_gc_nanos_) {
    next_peer_gc_nanos_ = now + kNanosPerSecond;
    if (peers_.CollectIdle(now - int64_t{config_.peer_idle_secs} * kNanosPerSecond) > 0) {
      ++route_epoch_;
    }
    stats_.peers = peers_.size();
  }
  stats_.throttled_rpcs = pacer_.size();
}

namespace {

// Whether the RPC is due a RESEND this tick (reference §4: first after resend_ticks, then every
// resend_interval), both stretched `scale` times.
bool ResendDue(const Config& c, uint32_t silent_ticks, uint32_t scale = 1) {
  const uint64_t first = uint64_t{c.resend_ticks} * scale;
  const uint64_t every = uint64_t{c.resend_interval} * scale;
  return silent_ticks >= first && (silent_ticks - first) % every == 0;
}

// How much longer a client whose request the server did not have waits before it asks again:
// doubling with each restart, up to 8x, and never past half of timeout_ticks (so the RPC
// cannot time out before asking). The server did not know the RPC because the request was
// lost, or because it still sits in a queue: a congested link's priority queue can hold it
// for longer than resend_ticks, and then every probe drew another RPC_UNKNOWN and another
// copy of the request, feeding the congestion (the testbed's W1 at 50% load: most calls
// failed "does not know the RPC after 10 restarts"). Once the server shows it has the request
// (BUSY, GRANT, a response byte), or if it never restarted, the client asks on the normal
// schedule: a slow handler must not leave room for only two probes per timeout.
uint32_t ProbeScale(const Config& c, const Rpc& rpc) {
  if (!rpc.unconfirmed_restart) return 1;
  uint32_t scale = 1u << std::min(rpc.restarts, 3u);
  const uint64_t step = std::max(c.resend_ticks, c.resend_interval);
  while (scale > 1 && step * scale * 2 > c.timeout_ticks) scale /= 2;
  return scale;
}

// Whether a server RPC whose response has waited `unacked_ticks` for its ack asks for it this
// tick: at request_ack_ticks, then with the interval doubling (3, 6, 12, 24, ... ticks). A
// client that is alive answers the first; one that is not driven for a while (a socket lent to
// blocking callers between calls, runtime/udp_transport.cc) or gone would otherwise be asked
// every tick until need_ack_give_up_ticks: ten NEED_ACKs instead of a thousand.
bool NeedAckDue(const Config& c, uint32_t unacked_ticks) {
  if (unacked_ticks < c.request_ack_ticks) return false;
  const uint32_t multiple = unacked_ticks / c.request_ack_ticks;
  return unacked_ticks % c.request_ack_ticks == 0 && (multiple & (multiple - 1)) == 0;
}

// Everything we granted has arrived: the next move is ours (more grants), not the sender's.
bool AllGrantedReceived(const InMessage& in) {
  return in.started() && in.gaps().empty() && in.recv_end() >= in.granted();
}

}  // namespace

void Engine::Impl::TickClientRpc(Rpc* rpc) {
  if (rpc->state == RpcState::kIncoming && AllGrantedReceived(rpc->in)) {
    // Our own scheduler holds this response back (outside the active set, or short of
    // headroom). The server hears nothing meanwhile and would give up on it, so repeat the
    // current grant every resend_interval as a keep-alive.
    rpc->silent_ticks = 0;
    if (++rpc->waiting_ticks % config_.resend_interval == 0) {
      SendGrant(rpc, rpc->in.granted(), 0);
    }
    return;
  }
  rpc->waiting_ticks = 0;
  if (rpc->restarts > 0) ++rpc->restart_ticks;
  if (rpc->out.HasSendable() || rpc->out.NeedsEmptyPacket()) {
    rpc->silent_ticks = 0;
    return;
  }
  ++rpc->silent_ticks;
  if (rpc->silent_ticks >= config_.timeout_ticks) {
    ++stats_.client_timeouts;
    FailClientRpc(rpc, absl::UnavailableError(absl::StrCat(
                           "no response from ", rpc->peer->address.ToString(), " for ",
                           int64_t{rpc->silent_ticks} * config_.tick_usecs / 1000, " ms")));
    return;
  }
  if (ResendDue(config_, rpc->silent_ticks, ProbeScale(config_, *rpc))) SendResendsFor(rpc);
}

void Engine::Impl::TickServerRpc(Rpc* rpc) {
  switch (rpc->state) {
    case RpcState::kInService:
      return;  // the application's turn
    case RpcState::kIncoming:
      if (AllGrantedReceived(rpc->in)) {
        rpc->silent_ticks = 0;
        return;
      }
      if (++rpc->silent_ticks >= config_.timeout_ticks) {
        // The client vanished mid-request. Nothing was delivered, so dropping is safe.
        AbandonServerRpc(rpc);
        return;
      }
      if (ResendDue(config_, rpc->silent_ticks)) SendResendsFor(rpc);
      return;
    case RpcState::kOutgoing:
      if (rpc->out.FullySent()) {
        ++rpc->unacked_ticks;
        if (rpc->unacked_ticks >= config_.need_ack_give_up_ticks) {
          AbandonServerRpc(rpc);
        } else if (NeedAckDue(config_, rpc->unacked_ticks)) {
          SendSimple(rpc->peer->address, wire::PacketType::kNeedAck, rpc->id);
        }
        return;
      }
      if (rpc->out.HasSendable()) {
        rpc->silent_ticks = 0;
        return;
      }
      // Waiting for grants from the client; the client's timer asks for what it misses.
      if (++rpc->silent_ticks >= config_.timeout_ticks) {
        AbandonServerRpc(rpc);
      }
      return;
    case RpcState::kDead:
      return;
  }
}

}  // namespace homarpc::transport
