// Tests of transport/buffer: ownership and moves, and the large-block cache that recycles the
// memory of bulk messages.
#include "transport/buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace homarpc::transport {
namespace {

TEST(Buffer, MovesTransferOwnership) {
  Buffer a = Buffer::CopyOf("hello");
  const uint8_t* bytes = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(b.data(), bytes);
  EXPECT_EQ(b.view(), "hello");
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(Buffer(0).data(), nullptr);
}

TEST(Buffer, LargeBlockIsReusedByTheNextBufferOfItsClass) {
  const BufferCacheStats before = GetBufferCacheStats();
  const uint8_t* first;
  {
    Buffer big(1 << 20);  // 1 MiB: a cached size class
    std::memset(big.data(), 0xab, big.size());
    first = big.data();
  }
  // The next buffer of the same class (1 MiB < size <= 2 MiB rounds to 2 MiB; 1 MiB is its
  // own class) gets the same block back.
  Buffer again((1 << 20) - 100);
  EXPECT_EQ(again.data(), first);
  const BufferCacheStats after = GetBufferCacheStats();
  EXPECT_EQ(after.allocations - before.allocations, 2u);
  EXPECT_EQ(after.reused - before.reused, 1u);
}

TEST(Buffer, SmallAndHugeBuffersBypassTheCache) {
  const BufferCacheStats before = GetBufferCacheStats();
  { Buffer small(4096); }
  { Buffer huge((size_t{64} << 20) + 1); }  // above the largest cached class
  const BufferCacheStats after = GetBufferCacheStats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
}

TEST(Buffer, CacheHoldsABoundedNumberOfBlocksPerClass) {
  // Free 20 blocks of one class at once: at most 8 stay cached (4 MiB each -> <= 32 MiB).
  const BufferCacheStats before = GetBufferCacheStats();
  {
    std::vector<Buffer> many;
    for (int i = 0; i < 20; ++i) many.emplace_back(size_t{3} << 20);  // 4 MiB class
  }
  const BufferCacheStats after = GetBufferCacheStats();
  EXPECT_LE(after.cached_bytes - before.cached_bytes, size_t{8} * (4 << 20));
  EXPECT_GT(after.cached_bytes, before.cached_bytes);
}

TEST(Buffer, FreedOnAnotherThreadIsReusable) {
  Buffer big(size_t{300} << 10);  // 512 KiB class
  const uint8_t* block = big.data();
  std::thread([b = std::move(big)]() mutable { b = Buffer(); }).join();
  Buffer again(size_t{400} << 10);
  EXPECT_EQ(again.data(), block);
}

}  // namespace
}  // namespace homarpc::transport
