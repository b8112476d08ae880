// Buffer: an owned, move-only, uninitialised byte array holding one whole message.
//
// Messages are handed to the transport as a Buffer (ownership passes to it until the RPC
// ends) and handed back to the application as a Buffer (ownership passes to the application).
// Unlike std::string, allocating a Buffer does not zero it, which matters for 64 MiB messages.
//
// Large buffers (LargeBlockCache, buffer.cc) are recycled: a freed block of 256 KiB or more
// is kept, up to a bound, and handed to the next Buffer of its size class, so bulk messages
// land in memory that is already mapped instead of page-faulting afresh (measured here: about
// 250 us per fresh MiB, more than moving the MiB over loopback). Buffers are thread-compatible;
// the cache is thread-safe, so a Buffer may be freed on another thread than allocated it.
#ifndef HOMARPC_TRANSPORT_BUFFER_H_
#define HOMARPC_TRANSPORT_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace homarpc::transport {

namespace buffer_internal {
// Returns `capacity` bytes: a recycled block when one of that class is cached. Allocation
// failure aborts, as with operator new.
uint8_t* Allocate(size_t size, size_t* capacity);
// Gives a block back (to the cache, or to the allocator past the cache's bound).
void Release(uint8_t* block, size_t capacity);

struct Deleter {
  size_t capacity = 0;
  void operator()(uint8_t* block) const { Release(block, capacity); }
};
}  // namespace buffer_internal

// Statistics of the large-block cache, process-wide (tests and benchmarks).
struct BufferCacheStats {
  uint64_t allocations = 0;  // large Buffers created
  uint64_t reused = 0;       // of which got a recycled block
  uint64_t cached_bytes = 0; // bytes held for reuse now
};
BufferCacheStats GetBufferCacheStats();

class Buffer {
 public:
  Buffer() = default;
  // `size` uninitialised bytes. Allocation failure aborts, as with operator new.
  explicit Buffer(size_t size) : size_(size) {
    if (size == 0) return;
    size_t capacity = 0;
    uint8_t* block = buffer_internal::Allocate(size, &capacity);
    data_ = std::unique_ptr<uint8_t[], buffer_internal::Deleter>(
        block, buffer_internal::Deleter{capacity});
  }
  static Buffer CopyOf(absl::string_view bytes) {
    Buffer b(bytes.size());
    if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
    return b;
  }

  Buffer(Buffer&& other) noexcept : data_(std::move(other.data_)), size_(other.size_) {
    other.size_ = 0;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = other.size_;
    other.size_ = 0;
    return *this;
  }

  // Keeps only the first `size` bytes (no effect when `size` >= size()); the block is neither
  // moved nor reallocated.
  void Shrink(size_t size) {
    if (size < size_) size_ = size;
  }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::Span<const uint8_t> span() const { return {data_.get(), size_}; }
  absl::string_view view() const {
    return {reinterpret_cast<const char*>(data_.get()), size_};
  }

 private:
  std::unique_ptr<uint8_t[], buffer_internal::Deleter> data_;
  size_t size_ = 0;
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_BUFFER_H_
