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

// How a test builds values of a dtype from floats and reads them back: f32 and f64 as
// themselves, f16 and bf16 through their bit patterns.
template <typename T>
struct Native {
  static T From(float f) { return static_cast<T>(f); }
  static float To(T t) { return static_cast<float>(t); }
};
struct Half {
  static uint16_t From(float f) { return FloatToHalf(f); }
  static float To(uint16_t h) { return HalfToFloat(h); }
};
struct BFloat16 {
  static uint16_t From(float f) { return FloatToBFloat16(f); }
  static float To(uint16_t b) { return BFloat16ToFloat(b); }
};

// Two ranks combine the same pair in opposite orders (recursive doubling): every operator
// must give bitwise the same result either way, also for NaNs and signed zeros. 21 elements:
// the 16-bit kernels' 8-wide vector loop and their scalar tail.
template <typename T, typename Codec = Native<T>>
void ExpectCommutativeBitwise(DType dtype) {
  const float nan_a = std::numeric_limits<float>::quiet_NaN();
  const float nan_b = -nan_a;  // another payload (sign bit)
  const float xs[] = {0.0f, -0.0f, nan_a, 1, nan_a, -3, 2};
  const float ys[] = {-0.0f, 0.0f, 1, nan_b, nan_b, -3, 5};
  std::vector<T> x, y;
  for (int i = 0; i < 21; ++i) {
    x.push_back(Codec::From(xs[i % 7]));
    y.push_back(Codec::From(ys[i % 7]));
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<T> xy = x, yx = y;
    Reduce(dtype, op, xy.data(), y.data(), x.size());
    Reduce(dtype, op, yx.data(), x.data(), x.size());
    EXPECT_EQ(std::memcmp(xy.data(), yx.data(), xy.size() * sizeof(T)), 0)
        << DTypeName(dtype) << " " << ReduceOpName(op);
    for (size_t at : {size_t{0}, size_t{14}}) {  // in the vector loop and in the tail
      auto r = [&](size_t i) { return Codec::To(xy[at + i]); };
      if (op == ReduceOp::kMin) {
        EXPECT_TRUE(std::signbit(r(0)) && std::signbit(r(1))) << "min(+0, -0) is -0";
        EXPECT_TRUE(std::isnan(r(2)) && std::isnan(r(3))) << "NaN propagates";
        EXPECT_EQ(r(6), 2.0f);
      }
      if (op == ReduceOp::kMax) {
        EXPECT_TRUE(!std::signbit(r(0)) && !std::signbit(r(1))) << "max(+0, -0) is +0";
        EXPECT_TRUE(std::isnan(r(2)) && std::isnan(r(3))) << "NaN propagates";
        EXPECT_EQ(r(6), 5.0f);
      }
      if (op == ReduceOp::kSum) {
        EXPECT_TRUE(!std::signbit(r(0)) && !std::signbit(r(1))) << "+0 + -0 is +0";
        EXPECT_TRUE(std::isnan(r(2)) && std::isnan(r(4))) << "NaN propagates";
        EXPECT_EQ(r(6), 7.0f);
      }
    }
  }
}

TEST(ReduceTest, EveryOperatorIsCommutativeBitwiseWithNaNsAndSignedZeros) {
  ExpectCommutativeBitwise<float>(DType::kF32);
  ExpectCommutativeBitwise<double>(DType::kF64);
  ExpectCommutativeBitwise<uint16_t, Half>(DType::kF16);
  ExpectCommutativeBitwise<uint16_t, BFloat16>(DType::kBF16);
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

TEST(ReduceTest, HalfPrecisionConversionsRoundToNearestEven) {
  for (float f : {0.0f, 1.0f, -2.5f, 1024.0f, 0.099975586f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f);  // exact in f16
  }
  // bf16 keeps an f32's top half, rounded to nearest even on the bits dropped.
  EXPECT_EQ(FloatToBFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(-2.5f), 0xC020);
  EXPECT_EQ(FloatToBFloat16(1024.0f), 0x4480);
  EXPECT_EQ(FloatToBFloat16(0.099975586f), 0x3DCD);  // 0x3DCCC000: rounds up, not truncated
  EXPECT_EQ(BFloat16ToFloat(0x3DCD), 0.10009765625f);
  EXPECT_EQ(FloatToBFloat16(1.00390625f), 0x3F80);  // 0x3F808000: a tie, to even (down)
  EXPECT_EQ(FloatToBFloat16(1.01171875f), 0x3F82);  // 0x3F818000: a tie, to even (up)
  EXPECT_EQ(FloatToBFloat16(-1.01171875f), 0xBF82);
}

// A 16-bit SUM is the f32 sum of the two values, rounded to nearest even once. Each case is
// `a + b = expected` in bit patterns; the f32 sums are exact here, so the expected values are
// the exactly rounded sums. 19 elements: the f16 kernel's 8-wide vector loop and its tail.
struct Sum16 {
  uint16_t a, b, expected;
};

void ExpectSums(DType dtype, const std::vector<Sum16>& cases) {
  std::vector<uint16_t> a, b;
  for (size_t i = 0; i < 19; ++i) {
    a.push_back(cases[i % cases.size()].a);
    b.push_back(cases[i % cases.size()].b);
  }
  Reduce(dtype, ReduceOp::kSum, a.data(), b.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Sum16& c = cases[i % cases.size()];
    EXPECT_EQ(a[i], c.expected) << DTypeName(dtype) << " element " << i << std::hex << ": 0x" << c.a
                                << " + 0x" << c.b << " gave 0x" << a[i];
  }
}

TEST(ReduceTest, HalfPrecisionSumsRoundTheFloatSumOnceToNearestEven) {
  ExpectSums(DType::kF16, {
                              {0x3E00, 0x4080, 0x4380},  // 1.5 + 2.25 = 3.75, exact
                              {0x3C00, 0x1000, 0x3C00},  // 1 + 2^-11: a tie, to even (down)
                              {0x3C01, 0x1000, 0x3C02},  // (1 + 2^-10) + 2^-11: a tie, up
                              {0x3C00, 0x1200, 0x3C01},  // 1 + 0.75 ulp: up
                              {0x3C00, 0x0E00, 0x3C00},  // 1 + 0.375 ulp: down
                              // 2048 + (1 + 2^-10) = 2049 + 2^-10, just above the tie between
                              // 2048 and 2050: up. An adder that kept no bits below the
                              // rounding position would see a tie and round to 2048.
                              {0x6800, 0x3C01, 0x6801},
                              {0xBC00, 0x3C00, 0x0000},  // -1 + 1 = +0
                          });
  ExpectSums(DType::kBF16, {
                               {0x3FC0, 0x4010, 0x4070},  // 1.5 + 2.25 = 3.75, exact
                               {0x3F80, 0x3B80, 0x3F80},  // 1 + 2^-8: a tie, to even (down)
                               {0x3F81, 0x3B80, 0x3F82},  // (1 + 2^-7) + 2^-8: a tie, up
                               {0x3F80, 0x3BC0, 0x3F81},  // 1 + 0.75 ulp: up
                               {0x3F80, 0x3B40, 0x3F80},  // 1 + 0.375 ulp: down
                               // 256 + (1 + 2^-7), just above the tie between 256 and 258.
                               {0x4380, 0x3F81, 0x4381},
                               {0xBF80, 0x3F80, 0x0000},  // -1 + 1 = +0
                           });
}

// Partial sums are 16-bit: each reduction step rounds (as NCCL does). 1 + 2^-11 + 2^-11 is
// 1 after two steps (each a tie, to even), where one f32 accumulation would give 1 + 2^-10.
TEST(ReduceTest, HalfPrecisionRoundsAfterEveryStep) {
  std::vector<uint16_t> acc(9, 0x3C00);
  const std::vector<uint16_t> small(9, 0x1000);
  Reduce(DType::kF16, ReduceOp::kSum, acc.data(), small.data(), acc.size());
  Reduce(DType::kF16, ReduceOp::kSum, acc.data(), small.data(), acc.size());
  EXPECT_EQ(acc, std::vector<uint16_t>(9, 0x3C00));
}

TEST(ReduceTest, BFloat16Product) {
  std::vector<uint16_t> c(5, FloatToBFloat16(3.0f)), d(5, FloatToBFloat16(-1.0f));
  Reduce(DType::kBF16, ReduceOp::kProd, c.data(), d.data(), c.size());
  for (uint16_t h : c) EXPECT_EQ(BFloat16ToFloat(h), -3.0f);
}

// The vector conversions give bitwise FloatToBFloat16 / BFloat16ToFloat, out of place and in
// place, for every length around their 16- and 8-wide blocks: ties both ways, NaNs (signalling
// ones become quiet), infinities, subnormals, values that round up to infinity.
std::vector<float> ConversionCases(size_t count) {
  const uint32_t patterns[] = {0x00000000, 0x80000000, 0x3F808000, 0x3F818000, 0xBF818000,
                               0x3DCCC000, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFA00000,
                               0x7FC00000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x3F7FFFFF,
                               0x12345678, 0xC0490FDB};
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits = patterns[i % std::size(patterns)] ^ static_cast<uint32_t>(i / 17);
    std::memcpy(&v[i], &bits, sizeof(bits));
  }
  return v;
}

TEST(ReduceTest, VectorBFloat16ConversionsMatchTheScalarOnesInAndOutOfPlace) {
  for (size_t count : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000}) {
    const std::vector<float> in = ConversionCases(count);
    std::vector<uint16_t> expected(count);
    for (size_t i = 0; i < count; ++i) expected[i] = FloatToBFloat16(in[i]);

    std::vector<uint16_t> out(count);
    FloatsToBFloat16(in.data(), out.data(), count);
    EXPECT_EQ(out, expected) << count << " elements, out of place";

    std::vector<float> buf = in;  // narrowed into its own first half, then widened back
    FloatsToBFloat16(buf.data(), reinterpret_cast<uint16_t*>(buf.data()), count);
    std::vector<uint16_t> narrowed(count);
    if (count > 0) std::memcpy(narrowed.data(), buf.data(), 2 * count);
    EXPECT_EQ(narrowed, expected) << count << " elements, in place";

    BFloat16ToFloats(reinterpret_cast<const uint16_t*>(buf.data()), buf.data(), count);
    std::vector<float> widened(count);
    BFloat16ToFloats(expected.data(), widened.data(), count);
    for (size_t i = 0; i < count; ++i) {
      uint32_t a, b;
      const float want = BFloat16ToFloat(expected[i]);
      std::memcpy(&a, &buf[i], 4);
      std::memcpy(&b, &want, 4);
      ASSERT_EQ(a, b) << count << " elements, widened in place, element " << i;
      std::memcpy(&a, &widened[i], 4);
      ASSERT_EQ(a, b) << count << " elements, widened out of place, element " << i;
    }
  }
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
