// Tests for Tombstones (transport/tombstones.h).
#include "transport/tombstones.h"

#include <cstdint>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace homarpc::transport
