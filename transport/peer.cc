#include "transport/peer.h"

namespace homarpc::transport {

Peer* PeerTable::FindOrCreate(const Address& address, int64_t now_nanos) {
  auto it = peers_.find(address);
  if (it != peers_.end()) {
    it->second->last_active_nanos = now_nanos;
    return it->second.get();
  }
  if (peers_.size() >= max_peers_) return nullptr;
  auto peer = std::make_unique<Peer>(address);
  peer->last_active_nanos = now_nanos;
  setup_(peer.get());
  Peer* raw = peer.get();
  peers_.emplace(address, std::move(peer));
  return raw;
}

Peer* PeerTable::Find(const Address& address) {
  auto it = peers_.find(address);
  return it == peers_.end() ? nullptr : it->second.get();
}

size_t PeerTable::CollectIdle(int64_t idle_before_nanos) {
  size_t removed = 0;
  for (auto it = peers_.begin(); it != peers_.end();) {
    const Peer& p = *it->second;
    if (p.client_rpcs == 0 && p.server_rpcs == 0 && p.pending_acks.empty() &&
        p.last_active_nanos < idle_before_nanos) {
      peers_.erase(it++);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

}  // namespace homarpc::transport
