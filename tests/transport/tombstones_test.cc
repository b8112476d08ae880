// Tests for Tombstones (transport/tombstones.h) and PrefaultedAllocator (transport/prefaulted.h).
#include "transport/tombstones.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "transport/prefaulted.h"

namespace homarpc::transport {
namespace {

ServerKey Key(uint16_t port, uint64_t id) { return ServerKey{Address::Loopback4(port), id}; }

TEST(TombstonesTest, RemembersKeysUntilTheirExpiry) {
  Tombstones t;
  t.Add(Key(1000, 2), 100);
  t.Add(Key(1000, 4), 200);
  t.Add(Key(1001, 2), 200);  // same id, another client: a different key
  EXPECT_EQ(t.size(), 3u);
  EXPECT_TRUE(t.Contains(Key(1000, 2)));
  EXPECT_TRUE(t.Contains(Key(1001, 2)));
  EXPECT_FALSE(t.Contains(Key(1002, 2)));
  EXPECT_FALSE(t.Contains(Key(1000, 6)));

  t.Expire(99, SIZE_MAX);  // nothing due yet
  EXPECT_EQ(t.size(), 3u);
  t.Expire(100, SIZE_MAX);  // the first, exactly at its expiry
  EXPECT_FALSE(t.Contains(Key(1000, 2)));
  EXPECT_TRUE(t.Contains(Key(1000, 4)));
  EXPECT_EQ(t.size(), 2u);
  t.Expire(1000, SIZE_MAX);
  EXPECT_TRUE(t.empty());
}

TEST(TombstonesTest, ExpireForgetsAtMostMaxOldestFirst) {
  Tombstones t;
  for (uint64_t i = 0; i < 5; ++i) t.Add(Key(1000, 2 * i), 10);
  t.Expire(10, 2);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_FALSE(t.Contains(Key(1000, 0)));
  EXPECT_FALSE(t.Contains(Key(1000, 2)));
  EXPECT_TRUE(t.Contains(Key(1000, 4)));
  t.Expire(10, 0);
  EXPECT_EQ(t.size(), 3u);
}

// The expiry ring grows while its start is mid-array (after expiries moved it): every key must
// still expire at its own time, in order, across several doublings.
TEST(TombstonesTest, KeysExpireInOrderAcrossRingGrowthAndWrapAround) {
  Tombstones t;
  uint64_t next_add = 0;
  uint64_t next_expire = 0;
  // Keep a window that grows by one each round: adds two, expires one (the oldest).
  for (int round = 0; round < 5000; ++round) {
    for (int k = 0; k < 2; ++k, ++next_add) {
      t.Add(Key(2000, next_add), static_cast<int64_t>(next_add));
    }
    t.Expire(static_cast<int64_t>(next_expire), SIZE_MAX);
    ++next_expire;
    ASSERT_EQ(t.size(), next_add - next_expire) << "round " << round;
    ASSERT_FALSE(t.Contains(Key(2000, next_expire - 1))) << "round " << round;
    ASSERT_TRUE(t.Contains(Key(2000, next_expire))) << "round " << round;
    ASSERT_TRUE(t.Contains(Key(2000, next_add - 1))) << "round " << round;
  }
  // Every remaining key, each exactly at its own expiry.
  while (next_expire < next_add) {
    t.Expire(static_cast<int64_t>(next_expire), SIZE_MAX);
    ASSERT_FALSE(t.Contains(Key(2000, next_expire)));
    ++next_expire;
    if (next_expire < next_add) ASSERT_TRUE(t.Contains(Key(2000, next_expire)));
  }
  EXPECT_TRUE(t.empty());
}

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
