#include "transport/pacer.h"

#include <algorithm>

namespace homarpc::transport {
namespace {

// Ethernet's preamble, header, FCS and inter-frame gap: what a frame costs the link beyond
// its IP packet.
constexpr uint32_t kEthernetFramingBytes = 42;

}  // namespace

Pacer::Pacer(const Config& config, bool ipv6)
    : config_(config),
      // IP + UDP headers, plus Ethernet's framing.
      per_packet_overhead_((ipv6 ? 40 : 20) + 8 + kEthernetFramingBytes),
      // link_mbps underestimated by 1% so the queue we cannot see stays short.
      nanos_per_byte_(config.link_mbps ? 8.0 * 1000.0 / (config.link_mbps * 0.99) : 0.0),
      max_backlog_nanos_(std::max(
          int64_t{config.max_nic_est_backlog_usecs} * 1000,
          std::min(static_cast<int64_t>(config.min_nic_est_backlog_bytes * nanos_per_byte_),
                   static_cast<int64_t>(Config::kMaxBacklogFloorUsecs * 1000)))),
      refill_backlog_nanos_(RefillMark(config, nanos_per_byte_, max_backlog_nanos_)) {}

int64_t Pacer::RefillMark(const Config& config, double nanos_per_byte, int64_t max_backlog) {
  const int64_t drain = max_backlog * std::min(config.pacer_refill_percent, 100u) / 100;
  // A drain shorter than two full packets would still release them one at a time, with less
  // queue left to cover a late sender (slow links, where one packet is most of the limit).
  const auto packet_nanos =
      static_cast<int64_t>((config.mtu + kEthernetFramingBytes) * nanos_per_byte);
  return drain < 2 * packet_nanos ? max_backlog : max_backlog - drain;
}

void Pacer::Update(Rpc* rpc) {
  const bool want = rpc->out.HasSendable() || rpc->out.NeedsEmptyPacket();
  if (rpc->in_ready_set) {
    ready_.erase({{rpc->ready_key, rpc->id}, rpc});
    rpc->in_ready_set = false;
  }
  if (want) {
    rpc->ready_key = rpc->out.remaining();
    ready_.insert({{rpc->ready_key, rpc->id}, rpc});
    rpc->in_ready_set = true;
  }
}

void Pacer::Remove(Rpc* rpc) {
  if (!rpc->in_ready_set) return;
  ready_.erase({{rpc->ready_key, rpc->id}, rpc});
  rpc->in_ready_set = false;
}

Rpc* Pacer::Pick() {
  if (ready_.empty()) return nullptr;
  ++picks_;
  if (config_.pacer_fifo_fraction > 0 && ready_.size() > 1 &&
      picks_ % (1000 / config_.pacer_fifo_fraction) == 0) {
    // FIFO pick: the oldest ready message. Linear, but only on 1 pick in 20 by default.
    Rpc* oldest = nullptr;
    for (const KeyedRpc& k : ready_) {
      if (oldest == nullptr || k.rpc->birth_nanos < oldest->birth_nanos) oldest = k.rpc;
    }
    return oldest;
  }
  return ready_.begin()->rpc;
}

bool Pacer::MaySend(int64_t now_nanos, uint32_t remaining) {
  if (config_.link_mbps == 0 || remaining <= config_.defer_min_bytes) return true;
  const int64_t backlog = link_idle_nanos_ - now_nanos;
  if (backlog <= refill_backlog_nanos_) burst_open_ = true;
  return burst_open_ && backlog <= max_backlog_nanos_;
}

void Pacer::OnTransmit(int64_t now_nanos, uint32_t payload_bytes, uint32_t header_bytes) {
  if (config_.link_mbps == 0) return;
  const double bytes = payload_bytes + header_bytes + per_packet_overhead_;
  link_idle_nanos_ =
      std::max(link_idle_nanos_, now_nanos) + static_cast<int64_t>(bytes * nanos_per_byte_);
  if (link_idle_nanos_ - now_nanos > max_backlog_nanos_) burst_open_ = false;  // full
}

int64_t Pacer::NextSendNanos() const {
  // May be in the past, meaning "now". Never clamp to a fresh clock reading: the caller
  // compares against its own, earlier reading, and "now" read later always looks future
  // (that bug held paced transfers to one burst per 1 ms tick).
  if (config_.link_mbps == 0) return INT64_MIN;
  return link_idle_nanos_ - (burst_open_ ? max_backlog_nanos_ : refill_backlog_nanos_);
}

}  // namespace homarpc::transport
