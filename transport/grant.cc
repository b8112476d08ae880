// DESIGN NOTES
// Ranking lives in one ordered set keyed by (unreceived, birth, id): the head is the best
// message. Schedule() walks the head of the set to pick the active set, so each call costs
// O(max_overcommit + peers scanned), not O(all messages); the walk is capped (kScanLimit) so a
// flood of grantable messages from one peer cannot make every packet expensive.
//
// total_incoming is maintained incrementally: each message contributes
// max(0, granted - recv_end), recorded in rpc->counted_incoming so an update subtracts exactly
// what was added. Unscheduled bytes count from the moment the first packet reveals them, as in
// the Homa module (it can overshoot max_incoming briefly; grants then wait).
//
// Filed keys may be stale: Update() re-files a message only when its current unreceived count
// puts it ahead of its predecessor's current count. Since counts only shrink, the set stays in
// the order of current counts except transiently after a re-filed message lands behind one
// whose filed key is stale; that one is re-filed at its own next packet.
//
// Rejected: Homa's needy list (headroom handed out strictly in rank order as it frees). We get
// the same order more simply: Schedule() grants in rank order and stops at the first message
// that cannot get a useful grant for lack of headroom, so a lower-ranked message never takes
// headroom a higher-ranked one is waiting for.
#include "transport/grant.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"

namespace homarpc::transport {
namespace {

constexpr int kScanLimit = 256;

int64_t FifoInterval(const Config& c) {
  if (c.grant_fifo_fraction == 0) return INT64_MAX;
  const uint64_t mbps = c.link_mbps ? c.link_mbps : 25000;
  // Time to send fifo_grant_increment bytes at link_mbps * fraction / 1000.
  return static_cast<int64_t>(uint64_t{c.fifo_grant_increment} * 8 * 1'000'000 /
                              (mbps * c.grant_fifo_fraction));
}

}  // namespace

GrantScheduler::GrantScheduler(const Config& config, uint8_t max_sched_prio,
                               uint32_t packet_payload)
    : config_(config),
      max_sched_prio_(max_sched_prio),
      packet_payload_(packet_payload),
      fifo_interval_nanos_(FifoInterval(config)),
      next_fifo_nanos_(fifo_interval_nanos_ == INT64_MAX ? INT64_MAX : 0) {}

GrantScheduler::Key GrantScheduler::KeyOf(const Rpc* rpc) {
  return {rpc->grant_key_unreceived, rpc->birth_nanos, rpc->id, const_cast<Rpc*>(rpc)};
}

void GrantScheduler::Account(Rpc* rpc) {
  // Bytes in flight towards us: granted beyond the highest byte received. Gaps below it are not
  // counted: their bytes come back only when our RESENDs ask (ResendBudget() per round), and a
  // late retransmission far into a message must not make every other grant wait.
  const InMessage& in = rpc->in;
  int64_t outstanding = static_cast<int64_t>(in.granted()) - static_cast<int64_t>(in.recv_end());
  if (outstanding < 0) outstanding = 0;
  total_incoming_ += outstanding - rpc->counted_incoming;
  rpc->counted_incoming = outstanding;
}

void GrantScheduler::Update(Rpc* rpc) {
  Account(rpc);
  const InMessage& in = rpc->in;
  const bool want = !in.complete() && in.granted() < in.length();
  if (rpc->grantable && want) {
    // Unreceived bytes only shrink, so a message can only move towards the front. While it
    // still ranks behind its predecessor (by their current counts) it keeps its filed key:
    // re-filing on every packet cost ~10% of a receiving core.
    auto it = ranked_.find(KeyOf(rpc));
    if (it == ranked_.begin()) return;
    const Rpc* prev = std::get<3>(*std::prev(it));
    if (std::make_tuple(prev->in.unreceived(), prev->birth_nanos, prev->id) <=
        std::make_tuple(in.unreceived(), rpc->birth_nanos, rpc->id)) {
      return;
    }
  }
  if (rpc->grantable) {
    ranked_.erase(KeyOf(rpc));
    rpc->grantable = false;
  }
  if (want) {
    rpc->grant_key_unreceived = in.unreceived();
    ranked_.insert(KeyOf(rpc));
    rpc->grantable = true;
  }
}

void GrantScheduler::Remove(Rpc* rpc) {
  if (rpc->grantable) {
    ranked_.erase(KeyOf(rpc));
    rpc->grantable = false;
  }
  total_incoming_ -= rpc->counted_incoming;
  rpc->counted_incoming = 0;
}

uint32_t GrantScheduler::WindowFor(size_t active) const {
  return config_.window ? config_.window
                        : config_.max_incoming / static_cast<uint32_t>(active + 1);
}

uint32_t GrantScheduler::Increment(uint32_t window) const {
  return config_.grant_increment ? config_.grant_increment : window / 4;
}

bool GrantScheduler::WorthScheduling(const Rpc* rpc) const {
  if (headroom_blocked_) return true;
  if (!rpc->grantable) return false;
  const InMessage& in = rpc->in;
  const uint32_t window = WindowFor(last_active_);
  const uint64_t target = std::min<uint64_t>(uint64_t{in.received()} + window, in.length());
  if (target <= in.granted()) return false;
  return target == in.length() || target - in.granted() >= Increment(window);
}

void GrantScheduler::Schedule(EmitGrant emit) {
  headroom_blocked_ = false;
  if (ranked_.empty()) return;
  // Pick the active set: first the best message of each distinct peer, then fill remaining
  // slots in rank order. `rank` is the position in ranked_ order.
  struct Pick {
    int rank;
    Rpc* rpc;
  };
  absl::InlinedVector<Pick, 8> active;
  absl::InlinedVector<const Peer*, 8> peers_with_slot;
  const size_t slots = config_.max_overcommit;
  int rank = 0;
  for (auto it = ranked_.begin(); it != ranked_.end() && rank < kScanLimit; ++it, ++rank) {
    Rpc* rpc = std::get<3>(*it);
    if (std::find(peers_with_slot.begin(), peers_with_slot.end(), rpc->peer) !=
        peers_with_slot.end()) {
      continue;
    }
    peers_with_slot.push_back(rpc->peer);
    active.push_back({rank, rpc});
    if (active.size() == slots) break;
  }
  if (active.size() < slots) {
    rank = 0;
    for (auto it = ranked_.begin(); it != ranked_.end() && rank < kScanLimit && active.size() < slots;
         ++it, ++rank) {
      Rpc* rpc = std::get<3>(*it);
      bool taken = std::any_of(active.begin(), active.end(),
                               [rpc](const Pick& p) { return p.rpc == rpc; });
      if (!taken) active.push_back({rank, rpc});
    }
    std::sort(active.begin(), active.end(),
              [](const Pick& a, const Pick& b) { return a.rank < b.rank; });
  }

  const int n = static_cast<int>(active.size());
  last_active_ = active.size();
  const uint32_t window = WindowFor(active.size());
  for (int r = 0; r < n; ++r) {
    Rpc* rpc = active[r].rpc;
    InMessage& in = rpc->in;
    const uint32_t target =
        static_cast<uint32_t>(std::min<uint64_t>(uint64_t{in.received()} + window, in.length()));
    if (target <= in.granted()) continue;
    // Batch grants: wait until this one is worth a packet of its own.
    if (target < in.length() && target - in.granted() < Increment(window)) continue;
    int64_t headroom = static_cast<int64_t>(config_.max_incoming) - total_incoming_;
    uint32_t extra = target - in.granted();
    if (headroom < static_cast<int64_t>(extra)) {
      // Not enough headroom for the whole window. A partial grant is still worth sending if it
      // covers at least a packet (or finishes the message); otherwise this message waits, and
      // so does everyone ranked below it.
      const uint32_t useful = std::min(packet_payload_, extra);
      if (headroom < static_cast<int64_t>(useful)) {
        headroom_blocked_ = true;
        break;
      }
      extra = static_cast<uint32_t>(headroom);
    }
    // Scheduled priority: the best message gets the highest level; with fewer active messages
    // than levels, use the lowest ones so a newcomer can preempt (reference §3.2 step 5).
    const int top = std::min<int>(max_sched_prio_, n - 1);
    const uint8_t prio = static_cast<uint8_t>(std::max(0, top - r));
    in.set_granted(in.granted() + extra);
    Update(rpc);
    emit(rpc, in.granted(), prio);
  }
}

void GrantScheduler::MaybeFifoGrant(int64_t now_nanos, EmitGrant emit) {
  if (ranked_.empty() || fifo_interval_nanos_ == INT64_MAX) return;
  if (now_nanos < next_fifo_nanos_) return;
  next_fifo_nanos_ = now_nanos + fifo_interval_nanos_;
  // The oldest grantable message, skipping one that already has a lot outstanding (its sender
  // is not using the grants it has).
  const uint32_t window = config_.window ? config_.window : config_.max_incoming / 2;
  Rpc* oldest = nullptr;
  int scanned = 0;
  for (auto it = ranked_.begin(); it != ranked_.end() && scanned < kScanLimit; ++it, ++scanned) {
    Rpc* rpc = std::get<3>(*it);
    const uint64_t outstanding = rpc->in.granted() - std::min(rpc->in.granted(), rpc->in.received());
    if (outstanding > uint64_t{window} + 2ull * config_.fifo_grant_increment) continue;
    if (oldest == nullptr || rpc->birth_nanos < oldest->birth_nanos) oldest = rpc;
  }
  if (oldest == nullptr) return;
  InMessage& in = oldest->in;
  const uint32_t granted = static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t{in.granted()} + config_.fifo_grant_increment, in.length()));
  if (granted <= in.granted()) return;
  in.set_granted(granted);
  Update(oldest);
  const uint8_t high = static_cast<uint8_t>(config_.num_priorities >= 2 ? config_.num_priorities - 2 : 0);
  emit(oldest, granted, high);
}

}  // namespace homarpc::transport
