// Tests for PrefaultedAllocator (transport/prefaulted.h).
#include "transport/prefaulted.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <vector>

#include "gtest/gtest.h"

namespace homarpc::transport {
namespace {

// How many of the pages of [p, p + bytes) are resident, by mincore().
size_t ResidentPages(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t pages = (reinterpret_cast<uintptr_t>(p) + bytes - start + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (mincore(reinterpret_cast<void*>(start), pages * page, vec.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

TEST(PrefaultedAllocatorTest, LargeBlocksArriveWithEveryPageMapped) {
  PrefaultedAllocator<uint64_t> alloc;
  constexpr size_t kCount = 1 << 18;  // 2 MiB: 512 pages, none touched by this test
  uint64_t* p = alloc.allocate(kCount);
  ASSERT_NE(p, nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(ResidentPages(p, kCount * sizeof(uint64_t)), kCount * sizeof(uint64_t) / page);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
  p[0] = 1;
  p[kCount - 1] = 2;  // the whole block is writable
  EXPECT_EQ(p[0] + p[kCount - 1], 3u);
  alloc.deallocate(p, kCount);
}

TEST(PrefaultedAllocatorTest, SmallBlocksComeFromTheHeapAndHoldTheirAlignment) {
  struct alignas(32) Wide {
    char bytes[32];
  };
  PrefaultedAllocator<Wide> alloc;
  Wide* p = alloc.allocate(4);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 32, 0u);
  p[3].bytes[31] = 7;
  EXPECT_EQ(p[3].bytes[31], 7);
  alloc.deallocate(p, 4);
}

TEST(PrefaultedAllocatorTest, RefusesACountWhoseBytesOverflow) {
  PrefaultedAllocator<uint64_t> alloc;
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 4), std::bad_alloc);
}

}  // namespace
}  // namespace homarpc::transport
