// PrefaultedAllocator: a standard allocator whose large blocks arrive with their pages already
// mapped. For containers that grow on a latency-critical thread (the engine's tombstones).
// Stateless; any thread may allocate and free.
//
// Why: on the VMs this project measures on, the first touch of a fresh page costs a page fault
// of ~11-14 us, and a table that grows maps its new pages one insert at a time, so a growing
// table slowed one call in every few by a whole fault: the server's tombstones alone took ~650
// faults in a 30000-call run, ~2% of the calls, which lifted the 64 B p99 by ~20 us. Mapping a
// block's pages in one mmap(MAP_POPULATE) costs ~1.2 us per page here, and it is paid once, at
// the resize, instead of by the calls after it (docs/rpc-benchmarks.md, session 18).
#ifndef HOMARPC_TRANSPORT_PREFAULTED_H_
#define HOMARPC_TRANSPORT_PREFAULTED_H_

#include <cstddef>
#include <new>

namespace homarpc::transport {

namespace prefaulted_internal {
// Blocks of at least this many bytes are mapped populated; smaller ones come from operator new
// (the heap's recycled pages). A block's size decides its source in both directions.
inline constexpr size_t kMinBytes = 16 * 1024;
// An anonymous private mapping of `bytes` (rounded up to pages) with every page present;
// throws std::bad_alloc when the kernel refuses it.
void* MapPopulated(size_t bytes);
void Unmap(void* p, size_t bytes);
}  // namespace prefaulted_internal

template <typename T>
class PrefaultedAllocator {
 public:
  using value_type = T;

  PrefaultedAllocator() = default;
  template <typename U>
  PrefaultedAllocator(const PrefaultedAllocator<U>&) {}  // NOLINT: rebinding is implicit

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < prefaulted_internal::kMinBytes) {
      return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
    }
    // Page-aligned, so any alignment a T needs.
    return static_cast<T*>(prefaulted_internal::MapPopulated(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < prefaulted_internal::kMinBytes) {
      ::operator delete(p, std::align_val_t{alignof(T)});
    } else {
      prefaulted_internal::Unmap(p, bytes);
    }
  }

  template <typename U>
  friend bool operator==(const PrefaultedAllocator&, const PrefaultedAllocator<U>&) {
    return true;
  }
};

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_PREFAULTED_H_
