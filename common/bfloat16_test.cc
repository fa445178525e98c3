// The bf16 conversions: rounding to nearest even, ties, NaN and infinities, and that
// RoundToBFloat16 is the round trip. (collectives/reduce_test checks that its vector loops give
// these bits.)
#include "common/bfloat16.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(-2.5f), 0xC020);
  EXPECT_EQ(FloatToBFloat16(0.099975586f), 0x3DCD);  // 0x3DCCC000: up, not truncated
  EXPECT_EQ(FloatToBFloat16(1.00390625f), 0x3F80);   // 0x3F808000: a tie, to even (down)
  EXPECT_EQ(FloatToBFloat16(1.01171875f), 0x3F82);   // 0x3F818000: a tie, to even (up)
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(BFloat16ToFloat(0x3DCD), 0.10009765625f);
}

TEST(BFloat16Test, NaNStaysNaNAndInfinitiesStay) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBFloat16(inf), 0x7F80);
  EXPECT_EQ(FloatToBFloat16(-inf), 0xFF80);
  EXPECT_EQ(FloatToBFloat16(3.4e38f), 0x7F80);  // above bf16's largest finite: rounds to inf
  // A signalling NaN whose payload lies only in the low bits would truncate to infinity.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FloatFromBits(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(RoundToBFloat16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(BFloat16Test, RoundTripKeepsEightSignificantBits) {
  for (float f : {1.f / 3, 3.14159265f, -1234.567f, 1e-20f}) {
    const float r = RoundToBFloat16(f);
    EXPECT_EQ(r, BFloat16ToFloat(FloatToBFloat16(f)));
    EXPECT_EQ(FloatBits(r) & 0xFFFFu, 0u) << f;
    EXPECT_LE(std::fabs(r - f), std::ldexp(std::fabs(f), -8)) << f;
    EXPECT_NE(r, f) << f;  // none of these is a bf16 value
  }
}

}  // namespace
}  // namespace lockstep
