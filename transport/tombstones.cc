#include "transport/tombstones.h"

#include <cassert>

namespace homarpc::transport {

void Tombstones::Ring::push_back(const Entry& e) {
  if (count_ == slots_.size()) {
    // Full: a ring twice the size, the entries copied in order from its start. The new block is
    // mapped in one go (PrefaultedAllocator) rather than page by page by the inserts after.
    std::vector<Entry, PrefaultedAllocator<Entry>> bigger(slots_.empty() ? 64 : 2 * slots_.size());
    for (size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) & (slots_.size() - 1)];
    slots_.swap(bigger);
    head_ = 0;
  }
  slots_[(head_ + count_) & (slots_.size() - 1)] = e;
  ++count_;
}

void Tombstones::Add(const ServerKey& key, int64_t expiry_nanos) {
  assert(ring_.empty() || expiry_nanos >= last_expiry_nanos_);
  last_expiry_nanos_ = expiry_nanos;
  keys_.insert(key);
  ring_.push_back(Entry{expiry_nanos, key});
}

void Tombstones::Expire(int64_t now, size_t max) {
  for (size_t n = 0; n < max && !ring_.empty() && ring_.front().expiry_nanos <= now; ++n) {
    keys_.erase(ring_.front().key);
    ring_.pop_front();
  }
}

}  // namespace homarpc::transport
