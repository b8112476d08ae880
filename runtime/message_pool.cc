// MessagePool implementation (message_pool.h).
#include "runtime/message_pool.h"

#include <atomic>

namespace homarpc::internal {
namespace {

std::atomic<uint64_t> g_bytes{0};  // in all pools: kMaxTotalBytes

}  // namespace

uint64_t PooledBytes() { return g_bytes.load(std::memory_order_relaxed); }

MessagePool::MessagePool() {
  transport::PlainMutexLock lock(&mu_);
  kept_.reserve(kMaxMessages);  // Put() then never allocates (it runs in destructors)
}

MessagePool::Kept MessagePool::Take() {
  Kept kept;
  if (count_.load(std::memory_order_relaxed) == 0) return kept;
  {
    transport::PlainMutexLock lock(&mu_);
    if (kept_.empty()) return kept;
    kept.message = std::move(kept_.back().first);
    kept.bytes = kept_.back().second;
    bytes_ -= kept.bytes;
    kept_.pop_back();
    count_.store(kept_.size(), std::memory_order_relaxed);
    ++taken_;
  }
  g_bytes.fetch_sub(kept.bytes, std::memory_order_relaxed);
  return kept;
}

void MessagePool::Put(std::unique_ptr<google::protobuf::MessageLite> message, size_t bytes) {
  if (message == nullptr || bytes < kMinBytes || bytes > kMaxBytes) return;
  // Cleared outside the lock (it walks the fields), but only when there may be room; the
  // storage stays.
  if (count_.load(std::memory_order_relaxed) >= kMaxMessages) return;
  message->Clear();
  {
    transport::PlainMutexLock lock(&mu_);
    if (kept_.size() >= kMaxMessages || bytes_ + bytes > kMaxBytes) return;  // destroyed below
    // The process-wide bound, reserved before keeping.
    uint64_t total = g_bytes.load(std::memory_order_relaxed);
    do {
      if (total + bytes > kMaxTotalBytes) return;
    } while (!g_bytes.compare_exchange_weak(total, total + bytes, std::memory_order_relaxed));
    bytes_ += bytes;
    kept_.emplace_back(std::move(message), bytes);  // reserved: does not throw
    count_.store(kept_.size(), std::memory_order_relaxed);
  }
}

MessagePool::~MessagePool() {
  transport::PlainMutexLock lock(&mu_);
  g_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
}

size_t MessagePool::size() const {
  transport::PlainMutexLock lock(&mu_);
  return kept_.size();
}

uint64_t MessagePool::taken() const {
  transport::PlainMutexLock lock(&mu_);
  return taken_;
}

size_t MessagePool::bytes() const {
  transport::PlainMutexLock lock(&mu_);
  return bytes_;
}

}  // namespace homarpc::internal
