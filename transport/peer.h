// Peer and PeerTable: what an engine remembers about each remote address it talks to.
//
// A Peer holds the unscheduled-priority cutoffs that peer published for messages sent to it
// (CUTOFFS), the acks we owe it (client side), counts of live RPCs for the per-peer limit, and
// when we last heard from it. Peers are owned by the PeerTable of one engine and touched only
// from that engine's thread. Idle peers (no RPCs, no pending acks) are forgotten after
// Config::peer_idle_secs so a server that saw many clients does not grow without bound.
#ifndef HOMARPC_TRANSPORT_PEER_H_
#define HOMARPC_TRANSPORT_PEER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "transport/address.h"
#include "transport/wire.h"

namespace homarpc::transport {

struct Peer {
  explicit Peer(const Address& a) : address(a) {}
  Address address;
  // Cutoffs this peer published (for messages we send to it); version 0 = none yet.
  std::array<uint32_t, 8> cutoffs{};
  uint16_t cutoff_version = 0;
  // Last time we sent this peer our cutoffs (rate limit: one per tick).
  int64_t cutoffs_sent_nanos = INT64_MIN;
  // Completed client RPCs whose server may now forget them (piggybacked or sent as ACK).
  absl::InlinedVector<wire::AckEntry, 2> pending_acks;
  // Set when the peer is created, from the route to it (PacketSink::RouteTo):
  // payload bytes per DATA packet we send it (Config::MtuForPath), and whether its DATA
  // packets skip the pacer and go without a priority mark (a peer on this host, unless
  // Config::pace_local).
  uint32_t payload_per_packet = 0;
  bool unpaced = false;
  uint32_t client_rpcs = 0;
  uint32_t server_rpcs = 0;
  int64_t last_active_nanos = 0;
};

class PeerTable {
 public:
  // `setup` fills a new peer's route-dependent fields (payload_per_packet, unpaced); engine
  // thread.
  PeerTable(uint32_t max_peers, std::function<void(Peer*)> setup)
      : max_peers_(max_peers), setup_(std::move(setup)) {}

  // Returns the peer for `address`, creating it if needed; nullptr if the table is full.
  Peer* FindOrCreate(const Address& address, int64_t now_nanos);
  Peer* Find(const Address& address);
  size_t size() const { return peers_.size(); }

  // Forgets peers idle since before `idle_before_nanos` with no RPCs and no pending acks.
  // Returns how many were forgotten.
  size_t CollectIdle(int64_t idle_before_nanos);

  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& [address, peer] : peers_) fn(*peer);
  }

 private:
  uint32_t max_peers_;
  std::function<void(Peer*)> setup_;
  absl::flat_hash_map<Address, std::unique_ptr<Peer>> peers_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_PEER_H_
