#include "collectives/reduce.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(ReduceTest, FloatOps) {
  std::vector<float> a = {1, -2, 3}, b = {4, 5, -6};
  Reduce(DType::kF32, ReduceOp::kSum, a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{5, 3, -3}));
  Reduce(DType::kF32, ReduceOp::kMax, a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{5, 5, -3}));
  Reduce(DType::kF32, ReduceOp::kMin, a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{4, 5, -6}));
  Reduce(DType::kF32, ReduceOp::kProd, a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{16, 25, 36}));
}

TEST(ReduceTest, IntegerMeanTruncates) {
  std::vector<int64_t> a = {7, -7};
  FinishMean(DType::kI64, ReduceOp::kMean, a.data(), 2, 2);
  EXPECT_EQ(a, (std::vector<int64_t>{3, -3}));
}

TEST(ReduceTest, HalfPrecisionRoundTripsAndAddsInFloat) {
  for (float f : {0.0f, 1.0f, -2.5f, 1024.0f, 0.099975586f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f);
    EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(f)), BFloat16ToFloat(FloatToBFloat16(f)));
  }
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f)), 1.0f);
  // 17 elements: the 8-wide vector path and the scalar tail.
  std::vector<uint16_t> a(17, FloatToHalf(1.5f)), b(17, FloatToHalf(2.25f));
  Reduce(DType::kF16, ReduceOp::kSum, a.data(), b.data(), a.size());
  for (uint16_t h : a) EXPECT_EQ(HalfToFloat(h), 3.75f);
  std::vector<uint16_t> c(5, FloatToBFloat16(3.0f)), d(5, FloatToBFloat16(-1.0f));
  Reduce(DType::kBF16, ReduceOp::kProd, c.data(), d.data(), c.size());
  for (uint16_t h : c) EXPECT_EQ(BFloat16ToFloat(h), -3.0f);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
