#include "bench/peers/size_range.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::bench {
namespace {

using ::testing::ElementsAre;

TEST(ParseByteSizeTest, BinarySuffixes) {
  EXPECT_EQ(*ParseByteSize("8"), 8u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("64m"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1u << 30);
}

TEST(ParseByteSizeTest, RejectsGarbage) {
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("K").ok());
  EXPECT_FALSE(ParseByteSize("12X").ok());
  EXPECT_FALSE(ParseByteSize("-4").ok());
  EXPECT_FALSE(ParseByteSize("99999999999999999999G").ok());
}

TEST(ParseSizeRangeTest, DoublesFromMinToMax) {
  EXPECT_THAT(*ParseSizeRange("8:64"), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(*ParseSizeRange("8:100"), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(*ParseSizeRange("4K"), ElementsAre(4096));
  EXPECT_EQ(ParseSizeRange("8:64M")->size(), 24u);
  EXPECT_EQ(ParseSizeRange("8:64M")->back(), 64u << 20);
}

TEST(ParseSizeRangeTest, RejectsBadRanges) {
  EXPECT_FALSE(ParseSizeRange("0:64").ok());
  EXPECT_FALSE(ParseSizeRange("6:64").ok());
  EXPECT_FALSE(ParseSizeRange("64:8").ok());
  EXPECT_FALSE(ParseSizeRange("8:").ok());
  EXPECT_FALSE(ParseSizeRange("8:x").ok());
}

}  // namespace
}  // namespace lockstep::bench
