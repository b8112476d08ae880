// Tombstones: the keys of server RPCs that ended after their request was delivered, each kept
// until its expiry, so that a late duplicate of the request is recognised and not run again
// (at-most-once; the engine's ServerRpcForData asks Contains before creating an RPC). Owned by
// Engine::Impl; engine thread only.
//
// Expiries are added in non-decreasing order (each is the end time plus one fixed lifetime), so
// the expiry queue is a ring in arrival order and Expire pops from its front. Both the key table
// and the ring take their large blocks from PrefaultedAllocator: a table that grows under a
// steady stream of RPCs would otherwise fault in a fresh page every few inserts, each fault a
// call's worth of time on a VM (prefaulted.h). Neither shrinks: after a burst they keep its
// peak (at 70k calls/s, 200 ms of tombstones is ~14k entries, 1.5-2 MiB), which the next
// burst then reuses without faulting.
#ifndef HOMARPC_TRANSPORT_TOMBSTONES_H_
#define HOMARPC_TRANSPORT_TOMBSTONES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "transport/address.h"
#include "transport/prefaulted.h"

namespace homarpc::transport {

// A server RPC is named by the client's address and the server-side id.
struct ServerKey {
  Address client;
  uint64_t id;
  friend bool operator==(const ServerKey& a, const ServerKey& b) {
    return a.id == b.id && a.client == b.client;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ServerKey& k) {
    return H::combine(std::move(h), k.client, k.id);
  }
};

class Tombstones {
 public:
  // Bytes one tombstone holds, for the engine's memory report: its table slot with the slot's
  // control byte, and its ring entry.
  static constexpr size_t kBytesPerEntry = sizeof(ServerKey) + 1 + sizeof(int64_t) +
                                           sizeof(ServerKey);

  // Remembers `key` until `expiry_nanos`, which must not be earlier than any expiry added
  // before it. Adding a key already present keeps the earlier expiry's entry too; the key is
  // forgotten at the earlier one.
  void Add(const ServerKey& key, int64_t expiry_nanos);
  bool Contains(const ServerKey& key) const { return keys_.contains(key); }
  // Forgets at most `max` tombstones whose expiry is at or before `now`, oldest first.
  void Expire(int64_t now, size_t max);

  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }

 private:
  struct Entry {
    int64_t expiry_nanos;
    ServerKey key;
  };
  // Entries in arrival order, in a power-of-two array used as a ring.
  class Ring {
   public:
    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }
    const Entry& front() const { return slots_[head_]; }
    void pop_front() {
      head_ = (head_ + 1) & (slots_.size() - 1);
      --count_;
    }
    void push_back(const Entry& e);

   private:
    std::vector<Entry, PrefaultedAllocator<Entry>> slots_;
    size_t head_ = 0;
    size_t count_ = 0;
  };

  absl::flat_hash_set<ServerKey, absl::Hash<ServerKey>, std::equal_to<ServerKey>,
                      PrefaultedAllocator<ServerKey>>
      keys_;
  Ring ring_;
  int64_t last_expiry_nanos_ = 0;  // of the newest entry (debug check of the order)
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_TOMBSTONES_H_
