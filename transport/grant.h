// GrantScheduler: the receiver's half of Homa — which incoming messages get grants, how much,
// and at what priority.
//
// Implements reference §3: messages longer than their unscheduled prefix are "grantable" and
// ranked by fewest unreceived bytes (SRPT; ties go to the older). The first max_overcommit of
// them, with each sending peer getting one slot before any gets two, form the active set and
// are granted up to `window` bytes beyond what has arrived (dynamic window =
// max_incoming / (active + 1) by default), while the bytes granted but not yet received across
// all messages, unscheduled ones included, stay below max_incoming. Higher-ranked messages get
// higher scheduled priorities. A small FIFO share of grants goes to the oldest grantable message
// so the largest ones cannot starve.
//
// Owned by the engine; engine thread only. It never sends packets itself: it returns the
// grants to emit through a callback.
#ifndef HOMARPC_TRANSPORT_GRANT_H_
#define HOMARPC_TRANSPORT_GRANT_H_

#include <cstdint>
#include <tuple>

#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"
#include "transport/config.h"
#include "transport/rpc.h"

namespace homarpc::transport {

class GrantScheduler {
 public:
  // `max_sched_prio` is the highest priority level used for scheduled data.
  GrantScheduler(const Config& config, uint8_t max_sched_prio, uint32_t packet_payload);

  // Called when `rpc`'s incoming message has started (rpc->in.started()) and after every
  // change of its received bytes. Keeps total_incoming and the ranking up to date.
  void Update(Rpc* rpc);
  // The message finished or its RPC ended: forget it.
  void Remove(Rpc* rpc);

  // Whether Schedule() could issue a grant now that `rpc` has received more bytes: it is due
  // a grant of at least the grant increment, or some message is waiting for headroom. Lets the
  // engine skip Schedule() on most packets of a long message.
  bool WorthScheduling(const Rpc* rpc) const;

  using EmitGrant = absl::FunctionRef<void(Rpc* rpc, uint32_t offset, uint8_t priority)>;
  // Issues the grants the current state allows; raises rpc->in.granted for each.
  void Schedule(EmitGrant emit);
  // Every FIFO interval (see fifo_interval_nanos()), grants the oldest grantable message
  // fifo_grant_increment more bytes at high priority. Call from the timer.
  void MaybeFifoGrant(int64_t now_nanos, EmitGrant emit);

  int64_t total_incoming() const { return total_incoming_; }
  size_t grantable_count() const { return ranked_.size(); }
  int64_t fifo_interval_nanos() const { return fifo_interval_nanos_; }
  int64_t next_fifo_nanos() const { return next_fifo_nanos_; }

 private:
  using Key = std::tuple<uint64_t /*unreceived*/, int64_t /*birth*/, uint64_t /*id*/, Rpc*>;
  static Key KeyOf(const Rpc* rpc);
  void Account(Rpc* rpc);
  uint32_t WindowFor(size_t active) const;
  uint32_t Increment(uint32_t window) const;

  const Config& config_;
  const uint8_t max_sched_prio_;
  const uint32_t packet_payload_;
  const int64_t fifo_interval_nanos_;
  int64_t next_fifo_nanos_;  // INT64_MAX when FIFO grants are off
  int64_t total_incoming_ = 0;
  size_t last_active_ = 1;         // size of the active set at the last Schedule()
  bool headroom_blocked_ = false;  // the last Schedule() stopped for lack of headroom
  absl::btree_set<Key> ranked_;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_GRANT_H_
