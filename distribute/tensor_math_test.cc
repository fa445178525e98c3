#include "distribute/tensor_math.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TensorMathTest, AddDivideAndSumAxis0) {
  Tensor acc = Tensor::FromVector<float>({1, 2, 3, 4}, Shape{2, 2});
  ASSERT_TRUE(AddInto(Tensor::FromVector<float>({1, 1, 1, 1}, Shape{2, 2}), &acc).ok());
  ASSERT_TRUE(DivideBy(2, &acc).ok());
  EXPECT_THAT(acc.ToVector<float>(), ElementsAre(1, 1.5, 2, 2.5));
  auto sum = SumAxis0(acc);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->shape(), Shape{2});
  EXPECT_THAT(sum->ToVector<float>(), ElementsAre(3, 4));
  Tensor ints = Tensor::FromVector<int32_t>({7}, Shape{1});
  ASSERT_TRUE(DivideBy(2, &ints).ok());
  EXPECT_EQ(ints.data<int32_t>()[0], 3);  // integer MEAN truncates, as in TensorFlow
}

TEST(TensorMathTest, MismatchesAreErrors) {
  Tensor acc = Tensor::FromVector<float>({1, 2}, Shape{2});
  auto expect_refused = [](const absl::Status& s, absl::string_view part) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(part));
  };
  expect_refused(AddInto(Tensor::FromVector<float>({1, 2, 3}, Shape{3}), &acc),
                 "dtypes and shapes must match");
  expect_refused(AddInto(Tensor::FromVector<double>({1, 2}, Shape{2}), &acc),
                 "dtypes and shapes must match");
  expect_refused(SumAxis0(Tensor::Scalar<float>(1)).status(),
                 "cannot reduce over axis 0 of a scalar");
  expect_refused(ConcatAxis0({acc, Tensor::FromVector<float>({1, 2}, Shape{1, 2})}).status(),
                 "ConcatAxis0: part 1 is");
}

TEST(TensorMathTest, SliceAndConcat) {
  Tensor x = Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 5}, Shape{3, 2});
  auto mid = SliceAxis0(x, 1, 9);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->shape(), (Shape{2, 2}));
  auto empty = SliceAxis0(x, 5, 9);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shape(), (Shape{0, 2}));
  auto joined = ConcatAxis0({*empty, *mid, *SliceAxis0(x, 0, 1)});
  ASSERT_TRUE(joined.ok());
  EXPECT_THAT(joined->ToVector<int64_t>(), ElementsAre(2, 3, 4, 5, 0, 1));
}

}  // namespace
}  // namespace lockstep::distribute
