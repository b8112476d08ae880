// DESIGN NOTES
// The large-block cache behind Buffer. Bulk messages (KV-cache blocks, 1 MiB echoes) are
// allocated and freed once per RPC on each side; glibc serves such sizes from mmap or returns
// them to the kernel on free (its trim threshold follows its mmap threshold), so every one of
// them page-faulted afresh: measured about 250 us per MiB on the project's VM, four times per
// 1 MiB echo in the transport alone. Recycling blocks keeps them mapped.
//
// Blocks of at least kMinCachedBytes are rounded up to a power of two (a size class), so a
// stream of messages of similar sizes reuses the same blocks; the pages past a message's end
// are never touched and so cost no memory. Freed blocks wait in a per-class free list, at most
// kMaxBlocksPerClass per class and kMaxCachedBytes in all; past that they go back to the
// allocator. Smaller buffers use operator new directly (malloc's own caches serve them well).
//
// Rejected: thread-local caches (a Buffer is typically allocated on one thread and freed on
// another: serialized by a caller, freed by the loop after sending), and a cache per Endpoint
// (Buffers outlive and cross endpoints). The cache is process-wide, like the allocator it sits
// in front of, and deliberately never destroyed (Buffers may be freed during static
// destruction). One mutex: taken twice per large message, noise next to copying the bytes.
#include "transport/buffer.h"

#include <array>
#include <bit>
#include <vector>

#include <sanitizer/asan_interface.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace homarpc::transport {
namespace buffer_internal {
namespace {

constexpr int kMinClassLog2 = 18;  // 256 KiB
constexpr int kMaxClassLog2 = 26;  // 64 MiB; larger blocks are not cached
constexpr int kNumClasses = kMaxClassLog2 - kMinClassLog2 + 1;
constexpr size_t kMinCachedBytes = size_t{1} << kMinClassLog2;
constexpr size_t kMaxCachedClassBytes = size_t{1} << kMaxClassLog2;
constexpr size_t kMaxCachedBytes = size_t{128} << 20;
constexpr size_t kMaxBlocksPerClass = 8;

class LargeBlockCache {
 public:
  uint8_t* Take(int cls) {
    absl::MutexLock lock(&mu_);
    ++stats_.allocations;
    std::vector<uint8_t*>& list = free_[cls];
    if (list.empty()) return nullptr;
    uint8_t* block = list.back();
    list.pop_back();
    const size_t bytes = size_t{1} << (cls + kMinClassLog2);
    stats_.cached_bytes -= bytes;
    ++stats_.reused;
    ASAN_UNPOISON_MEMORY_REGION(block, bytes);
    return block;
  }
  // Returns false when the block should go back to the allocator instead.
  bool Put(uint8_t* block, int cls) {
    const size_t bytes = size_t{1} << (cls + kMinClassLog2);
    absl::MutexLock lock(&mu_);
    std::vector<uint8_t*>& list = free_[cls];
    if (list.size() >= kMaxBlocksPerClass || stats_.cached_bytes + bytes > kMaxCachedBytes) {
      return false;
    }
    // Under AddressSanitizer a cached block is poisoned, so a use after free of the Buffer
    // that held it is still reported (ASan cannot see a reuse otherwise). No-op without ASan.
    ASAN_POISON_MEMORY_REGION(block, bytes);
    list.push_back(block);
    stats_.cached_bytes += bytes;
    return true;
  }
  BufferCacheStats stats() {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  absl::Mutex mu_;
  std::array<std::vector<uint8_t*>, kNumClasses> free_ ABSL_GUARDED_BY(mu_);
  BufferCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

LargeBlockCache& Cache() {
  static LargeBlockCache* const cache = new LargeBlockCache();  // never destroyed, see above
  return *cache;
}

// The size class of a cached capacity (a power of two in [256 KiB, 64 MiB]).
int ClassOf(size_t capacity) { return std::countr_zero(capacity) - kMinClassLog2; }

}  // namespace

uint8_t* Allocate(size_t size, size_t* capacity) {
  if (size < kMinCachedBytes || size > kMaxCachedClassBytes) {
    *capacity = size;
    return new uint8_t[size];
  }
  const size_t rounded = std::bit_ceil(size);
  *capacity = rounded;
  if (uint8_t* block = Cache().Take(ClassOf(rounded))) return block;
  return new uint8_t[rounded];
}

void Release(uint8_t* block, size_t capacity) {
  if (block == nullptr) return;
  // Every capacity in the cached range came from bit_ceil in Allocate(): a whole class.
  if (capacity >= kMinCachedBytes && capacity <= kMaxCachedClassBytes &&
      Cache().Put(block, ClassOf(capacity))) {
    return;
  }
  delete[] block;
}

}  // namespace buffer_internal

BufferCacheStats GetBufferCacheStats() { return buffer_internal::Cache().stats(); }

}  // namespace homarpc::transport
