// Tests of Address (transport/address.h): parsing, comparison and the loopback test that
// decides whether a peer's route stays on this host (LookupRoute, Config::pace_local).
#include "transport/address.h"

#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"

namespace homarpc::transport {
namespace {

Address A(const char* text) { return Address::Parse(text).value(); }

TEST(AddressTest, ParsesIpv4AndIpv6WithPorts) {
  EXPECT_EQ(A("10.1.2.3:80").ToString(), "10.1.2.3:80");
  EXPECT_EQ(A("[::1]:443").ToString(), "[::1]:443");
  EXPECT_EQ(Address::Parse("10.1.2.3", 7).value().port(), 7);
  EXPECT_FALSE(Address::Parse("localhost:80").ok());  // numeric only
  EXPECT_FALSE(Address::Parse("10.1.2.3:99999").ok());
  EXPECT_FALSE(Address::Parse("").ok());
}

TEST(AddressTest, EqualityAndHashIncludeThePort) {
  EXPECT_EQ(A("10.0.0.1:5"), A("10.0.0.1:5"));
  EXPECT_NE(A("10.0.0.1:5"), A("10.0.0.1:6"));
  EXPECT_NE(A("10.0.0.1:5"), A("10.0.0.2:5"));
  EXPECT_NE(A("127.0.0.1:5"), A("[::1]:5"));
  EXPECT_EQ(Address(), Address());
  absl::flat_hash_set<Address> set = {A("10.0.0.1:5"), A("10.0.0.1:6"), A("10.0.0.1:5")};
  EXPECT_EQ(set.size(), 2u);
}

TEST(AddressTest, LoopbackIsAll127And6sLoopbackAndMapped127) {
  EXPECT_TRUE(A("127.0.0.1:1").is_loopback());
  EXPECT_TRUE(A("127.255.0.9:1").is_loopback());
  EXPECT_TRUE(Address::Loopback4(1).is_loopback());
  EXPECT_TRUE(Address::Loopback6(1).is_loopback());
  EXPECT_TRUE(A("[::ffff:127.0.0.1]:1").is_loopback());
  EXPECT_FALSE(A("128.0.0.1:1").is_loopback());
  EXPECT_FALSE(A("126.255.255.255:1").is_loopback());
  EXPECT_FALSE(A("10.0.0.1:1").is_loopback());
  EXPECT_FALSE(A("[::2]:1").is_loopback());
  EXPECT_FALSE(A("[::ffff:10.0.0.1]:1").is_loopback());
  EXPECT_FALSE(A("[::]:1").is_loopback());
  EXPECT_FALSE(Address().is_loopback());
}

}  // namespace
}  // namespace homarpc::transport
