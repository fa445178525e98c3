#include "collectives/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>
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

// Two ranks combine the same pair in opposite orders (recursive doubling): every operator
// must give bitwise the same result either way, also for NaNs and signed zeros.
template <typename T>
void ExpectCommutativeBitwise(DType dtype) {
  const T nan_a = std::numeric_limits<T>::quiet_NaN();
  const T nan_b = -std::numeric_limits<T>::quiet_NaN();  // another payload (sign bit)
  const std::vector<T> x = {T(0.0), -T(0.0), nan_a, T(1), nan_a, T(-3), T(2)};
  const std::vector<T> y = {-T(0.0), T(0.0), T(1), nan_b, nan_b, T(-3), T(5)};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<T> xy = x, yx = y;
    Reduce(dtype, op, xy.data(), y.data(), x.size());
    Reduce(dtype, op, yx.data(), x.data(), x.size());
    EXPECT_EQ(std::memcmp(xy.data(), yx.data(), xy.size() * sizeof(T)), 0)
        << "op " << static_cast<int>(op);
    if (op == ReduceOp::kMin) {
      EXPECT_TRUE(std::signbit(xy[0]) && std::signbit(xy[1])) << "min(+0, -0) is -0";
      EXPECT_TRUE(std::isnan(xy[2]) && std::isnan(xy[3])) << "NaN propagates";
      EXPECT_EQ(xy[6], T(2));
    }
    if (op == ReduceOp::kMax) {
      EXPECT_TRUE(!std::signbit(xy[0]) && !std::signbit(xy[1])) << "max(+0, -0) is +0";
      EXPECT_TRUE(std::isnan(xy[2]) && std::isnan(xy[3])) << "NaN propagates";
      EXPECT_EQ(xy[6], T(5));
    }
  }
}

TEST(ReduceTest, EveryOperatorIsCommutativeBitwiseWithNaNsAndSignedZeros) {
  ExpectCommutativeBitwise<float>(DType::kF32);
  ExpectCommutativeBitwise<double>(DType::kF64);
}

// Integer SUM and PROD wrap around (two's complement) where the signed result overflows,
// as every peer library effectively does; 17 elements run the vector loop and its tail.
// reduce_ubsan_test runs this under -fsanitize=undefined, where a signed overflow fails.
template <typename T>
void ExpectWrapsAround(DType dtype) {
  using U = std::make_unsigned_t<T>;
  const T max = std::numeric_limits<T>::max(), min = std::numeric_limits<T>::min();
  const T half = static_cast<T>(U{1} << (sizeof(T) * 4));  // half * half = 2^bits = 0
  struct Case {
    T a, b, sum, prod;
  };
  const Case cases[] = {
      {max, 1, min, max},
      {min, -1, max, min},
      {min, min, 0, 0},
      {max, 2, static_cast<T>(min + 1), -2},
      {half, half, static_cast<T>(U{2} * static_cast<U>(half)), 0},
      {max, max, -2, 1},
  };
  constexpr size_t kCount = 17;
  std::vector<T> sum(kCount), prod(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    const Case& c = cases[i % std::size(cases)];
    sum[i] = prod[i] = c.a;
    b[i] = c.b;
  }
  Reduce(dtype, ReduceOp::kSum, sum.data(), b.data(), kCount);
  Reduce(dtype, ReduceOp::kProd, prod.data(), b.data(), kCount);
  for (size_t i = 0; i < kCount; ++i) {
    const Case& c = cases[i % std::size(cases)];
    EXPECT_EQ(sum[i], c.sum) << DTypeName(dtype) << " " << c.a << " + " << c.b;
    EXPECT_EQ(prod[i], c.prod) << DTypeName(dtype) << " " << c.a << " * " << c.b;
  }
}

TEST(ReduceTest, IntegerSumAndProductWrapAround) {
  ExpectWrapsAround<int32_t>(DType::kI32);
  ExpectWrapsAround<int64_t>(DType::kI64);
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
