#include "engine/variable_set.h"

#include <cmath>

#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

v1::Initializer Init(v1::Initializer::Kind kind, double value = 0) {
  v1::Initializer i;
  i.set_kind(kind);
  i.set_value(value);
  return i;
}

Graph TwoVariables(uint64_t seed) {
  Graph g(seed);
  (void)g.Variable("a/kernel", DType::kF32, Shape{64, 128}, Init(v1::Initializer::GLOROT_UNIFORM),
                   64, 128);
  (void)g.Variable("a/bias", DType::kF32, Shape{128}, Init(v1::Initializer::CONSTANT, 0.5), 64,
                   128);
  (void)g.Variable("b/kernel", DType::kF64, Shape{3, 3, 8, 16}, Init(v1::Initializer::HE_NORMAL),
                   72, 144);
  return g;
}

TEST(VariableSet, InitialValuesDependOnlyOnSeedAndName) {
  auto a = VariableSet::Initialize(TwoVariables(42));
  auto b = VariableSet::Initialize(TwoVariables(42));
  auto c = VariableSet::Initialize(TwoVariables(43));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (int i = 0; i < a->size(); ++i) EXPECT_TRUE(a->tensor(i).BitwiseEquals(b->tensor(i)));
  EXPECT_FALSE(a->tensor(0).BitwiseEquals(c->tensor(0)));
  // A variable's values do not depend on which other variables exist.
  Graph only(42);
  (void)only.Variable("b/kernel", DType::kF64, Shape{3, 3, 8, 16}, Init(v1::Initializer::HE_NORMAL),
                      72, 144);
  EXPECT_TRUE(VariableSet::Initialize(only)->tensor(0).BitwiseEquals(a->tensor(2)));
}

TEST(VariableSet, InitializerStatistics) {
  auto vars = *VariableSet::Initialize(TwoVariables(7));
  const Tensor& glorot = vars.tensor(0);
  const double limit = std::sqrt(6.0 / (64 + 128));
  double sum = 0;
  for (int64_t i = 0; i < glorot.num_elements(); ++i) {
    float v = glorot.data<float>()[i];
    ASSERT_LE(std::fabs(v), limit);
    sum += v;
  }
  EXPECT_NEAR(sum / glorot.num_elements(), 0, 0.01);
  EXPECT_EQ(vars.tensor(1).data<float>()[5], 0.5f);
  const Tensor& he = vars.tensor(2);
  double sq = 0;
  for (int64_t i = 0; i < he.num_elements(); ++i) sq += he.data<double>()[i] * he.data<double>()[i];
  // Truncated at 2 sigma then rescaled: the stddev is sqrt(2 / fan_in).
  EXPECT_NEAR(std::sqrt(sq / he.num_elements()), std::sqrt(2.0 / 72), 0.02);
}

TEST(VariableSet, SerialisesByName) {
  auto vars = *VariableSet::Initialize(TwoVariables(1));
  auto other = *VariableSet::Initialize(TwoVariables(2));
  ASSERT_TRUE(other.Restore(vars.ToProtos()).ok());
  for (int i = 0; i < vars.size(); ++i) EXPECT_TRUE(other.tensor(i).BitwiseEquals(vars.tensor(i)));
  EXPECT_EQ(vars.Find("a/bias"), 1);

  auto protos = vars.ToProtos();
  protos.pop_back();
  auto missing = other.Restore(protos);
  EXPECT_NE(missing.message().find("\"b/kernel\" is missing"), std::string::npos);
  protos = vars.ToProtos();
  *protos[1].mutable_tensor() = Tensor::Zeros(DType::kF32, Shape{127}).ToProto();
  auto wrong = other.Restore(protos);
  EXPECT_NE(wrong.message().find("a/bias"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::engine
