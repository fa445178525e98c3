#include "common/dtype.h"

#include <string>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

constexpr DType kAll[] = {DType::kF32,  DType::kF64, DType::kF16,
                          DType::kBF16, DType::kI32, DType::kI64};

TEST(DTypeTest, SizesNamesAndKinds) {
  const size_t sizes[] = {4, 8, 2, 2, 4, 8};
  const std::string names[] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
  const bool floating[] = {true, true, true, true, false, false};
  for (size_t i = 0; i < std::size(kAll); ++i) {
    EXPECT_EQ(DTypeSize(kAll[i]), sizes[i]) << names[i];
    EXPECT_EQ(DTypeName(kAll[i]), names[i]);
    EXPECT_EQ(IsFloating(kAll[i]), floating[i]) << names[i];
  }
}

TEST(DTypeTest, AValueOutsideTheEnumIsNamedAsUnknown) {
  const DType bad = static_cast<DType>(200);
  EXPECT_EQ(DTypeSize(bad), 0u);
  EXPECT_EQ(std::string(DTypeName(bad)), "?");
  EXPECT_FALSE(IsFloating(bad));
}

TEST(DTypeTest, DTypeOfMatchesTheElementSize) {
  static_assert(DTypeOf<float>() == DType::kF32);
  static_assert(DTypeOf<double>() == DType::kF64);
  static_assert(DTypeOf<int32_t>() == DType::kI32);
  static_assert(DTypeOf<int64_t>() == DType::kI64);
  EXPECT_EQ(DTypeSize(DTypeOf<float>()), sizeof(float));
  EXPECT_EQ(DTypeSize(DTypeOf<double>()), sizeof(double));
  EXPECT_EQ(DTypeSize(DTypeOf<int32_t>()), sizeof(int32_t));
  EXPECT_EQ(DTypeSize(DTypeOf<int64_t>()), sizeof(int64_t));
}

}  // namespace
}  // namespace lockstep
