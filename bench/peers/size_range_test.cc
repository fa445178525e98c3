#include "bench/peers/size_range.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
  for (const char* bad : {"", "K", "12X", "-4", "99999999999999999999G"}) {
    absl::Status s = ParseByteSize(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
    EXPECT_NE(s.message().find(absl::StrCat("bad byte size '", bad, "'")), absl::string_view::npos)
        << s;
  }
}

TEST(ParseSizeRangeTest, DoublesFromMinToMax) {
  EXPECT_THAT(*ParseSizeRange("8:64"), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(*ParseSizeRange("8:100"), ElementsAre(8, 16, 32, 64));
  EXPECT_THAT(*ParseSizeRange("4K"), ElementsAre(4096));
  EXPECT_EQ(ParseSizeRange("8:64M")->size(), 24u);
  EXPECT_EQ(ParseSizeRange("8:64M")->back(), 64u << 20);
}

TEST(ParseSizeRangeTest, RejectsBadRanges) {
  auto refused = [](const char* range, const std::string& words) {
    absl::Status s = ParseSizeRange(range).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << range << ": " << s;
    EXPECT_NE(s.message().find(words), absl::string_view::npos) << s << " lacks: " << words;
  };
  refused("0:64", "--sizes '0:64': sizes must be positive multiples of 4 bytes");
  refused("6:64", "--sizes '6:64': sizes must be positive multiples of 4 bytes");
  refused("64:8", "--sizes '64:8': MIN is larger than MAX");
  refused("8:", "bad byte size ''");
  refused("8:x", "bad byte size 'x'");
}

}  // namespace
}  // namespace lockstep::bench
