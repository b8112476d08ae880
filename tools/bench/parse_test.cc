// Tests for tools/bench/parse.cc: what homarpc-bench accepts on its command line.
#include "tools/bench/parse.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace homarpc::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Parse, ByteSizeSuffixesAreBinary) {
  EXPECT_EQ(*ParseByteSize("64"), 64u);
  EXPECT_EQ(*ParseByteSize("16K"), 16u * 1024);
  EXPECT_EQ(*ParseByteSize("16KiB"), 16u * 1024);
  EXPECT_EQ(*ParseByteSize("1m"), 1u << 20);
  EXPECT_EQ(*ParseByteSize("16MiB"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1u << 30);
  EXPECT_EQ(*ParseByteSize(" 2k "), 2048u);
}

TEST(Parse, ByteSizeRejectsJunkZeroAndHuge) {
  EXPECT_THAT(ParseByteSize("12Q").status().message(), HasSubstr("bad size '12Q'"));
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("K").ok());
  EXPECT_FALSE(ParseByteSize("-1").ok());
  EXPECT_FALSE(ParseByteSize("1.5M").ok());
  EXPECT_THAT(ParseByteSize("0").status().message(), HasSubstr("outside"));
  EXPECT_FALSE(ParseByteSize("2G").ok());                 // over the 1 GiB ceiling
  EXPECT_FALSE(ParseByteSize("99999999999999999").ok());  // too many digits, no overflow
}

TEST(Parse, ByteSizeListKeepsOrderAndFailsOnAnyBadItem) {
  EXPECT_THAT(*ParseByteSizeList("64,1K,16MiB"), ElementsAre(64u, 1024u, 16u << 20));
  EXPECT_FALSE(ParseByteSizeList("64,,1K").ok());
  EXPECT_FALSE(ParseByteSizeList("64,x").ok());
}

TEST(Parse, BoundedIntChecksSyntaxAndRange) {
  EXPECT_EQ(*ParseBoundedInt("50", 0, 100), 50);
  EXPECT_EQ(*ParseBoundedInt("0", 0, 100), 0);
  EXPECT_THAT(ParseBoundedInt("abc", 0, 100).status().message(), HasSubstr("not an integer"));
  EXPECT_THAT(ParseBoundedInt("101", 0, 100).status().message(), HasSubstr("outside [0, 100]"));
  EXPECT_FALSE(ParseBoundedInt("-1", 0, 100).ok());
  EXPECT_THAT(*ParseBoundedIntList("1,8,64", 1, 1024), ElementsAre(1, 8, 64));
  EXPECT_FALSE(ParseBoundedIntList("1,0", 1, 1024).ok());
}

TEST(Parse, SplitNamesDropsBlanks) {
  EXPECT_THAT(SplitNames(" udp-floor, ,tcp-floor,"), ElementsAre("udp-floor", "tcp-floor"));
  EXPECT_TRUE(SplitNames("").empty());
}

}  // namespace
}  // namespace homarpc::bench
