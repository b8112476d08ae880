// Pacer: the sender's half of Homa — which outgoing message transmits next, and when.
//
// Messages with granted-but-unsent bytes wait in a ready set ordered by bytes remaining (SRPT
// among our own messages); a pacer_fifo_fraction share of picks goes to the oldest instead, so
// long messages progress under sustained load. The pacer models the NIC queue as
// `link_idle_nanos`, the time when everything handed to the kernel will have left at
// link_mbps (underestimated by 1%), and lets a packet go only while that estimated backlog is
// below max_nic_est_backlog_usecs (reference §3.5), or min_nic_est_backlog_bytes at link_mbps
// (at most 100 us) where that is longer (slow links, where 5 us is less than a packet).
// Hysteresis: once the backlog is past that limit, the next paced packet goes only when it has
// drained by pacer_refill_percent of the limit, and then packets go until it is full again,
// so paced data leaves in bursts the I/O backend sends as one GSO batch (not where that drain
// is under two full packets: on slow links it would only shorten the queue).
// Messages with at most defer_min_bytes left and retransmissions are never held back.
// link_mbps == 0 disables pacing.
//
// Owned by the engine; engine thread only.
#ifndef HOMARPC_TRANSPORT_PACER_H_
#define HOMARPC_TRANSPORT_PACER_H_

#include <cstdint>
#include <utility>

#include "absl/container/btree_set.h"
#include "transport/config.h"
#include "transport/rpc.h"

namespace homarpc::transport {

class Pacer {
 public:
  Pacer(const Config& config, bool ipv6);

  // Files `rpc` by its remaining bytes if it has something to send, else takes it out.
  // Call after anything changes rpc->out.
  void Update(Rpc* rpc);
  void Remove(Rpc* rpc);
  bool empty() const { return ready_.empty(); }
  size_t size() const { return ready_.size(); }

  // The next message to transmit from (SRPT, or the oldest on a FIFO pick); nullptr if none.
  Rpc* Pick();

  // Whether a packet of a message with `remaining` bytes left may be sent at `now`.
  bool MaySend(int64_t now_nanos, uint32_t remaining);
  // Records that `payload_bytes` of payload (+ headers) were handed to the kernel at `now`.
  void OnTransmit(int64_t now_nanos, uint32_t payload_bytes, uint32_t header_bytes);
  // When MaySend will next be true for a paced message; a time in the past means now.
  int64_t NextSendNanos() const;

 private:
  // The backlog at which a held-back burst reopens (pacer_refill_percent; the limit itself
  // where that drain would be shorter than two full packets).
  static int64_t RefillMark(const Config& config, double nanos_per_byte, int64_t max_backlog);

  using Key = std::pair<uint64_t /*remaining*/, uint64_t /*id*/>;
  struct KeyedRpc {
    Key key;
    Rpc* rpc;
    bool operator<(const KeyedRpc& o) const { return key < o.key || (key == o.key && rpc < o.rpc); }
  };

  const Config& config_;
  const uint32_t per_packet_overhead_;  // IP + UDP + Ethernet framing bytes
  const double nanos_per_byte_;
  const int64_t max_backlog_nanos_;     // initialized from nanos_per_byte_
  const int64_t refill_backlog_nanos_;  // the burst reopens at or below this backlog
  int64_t link_idle_nanos_ = 0;
  bool burst_open_ = true;  // false from a full backlog until it drains to the refill mark
  uint32_t picks_ = 0;
  absl::btree_set<KeyedRpc> ready_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_PACER_H_
