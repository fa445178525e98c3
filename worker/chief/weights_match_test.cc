#include "worker/chief/weights_match.h"

#include <string>
#include <vector>

#include "engine/tensor.h"
#include "gtest/gtest.h"

namespace lockstep::chief {
namespace {

v1::Checkpoint WithKernel(std::vector<float> values, const std::string& name = "dense/kernel") {
  v1::Checkpoint c;
  v1::NamedTensor* v = c.add_variables();
  v->set_name(name);
  const int64_t n = static_cast<int64_t>(values.size());
  *v->mutable_tensor() = engine::Tensor::FromVector<float>(values, engine::Shape{n}).ToProto();
  return c;
}

TEST(WeightsMatch, RoundingIsAMatch) {
  std::vector<float> a(1000, 1.0f), b = a;
  for (size_t i = 0; i < b.size(); i += 7) b[i] *= 1 + 3e-6f;
  std::string summary;
  EXPECT_TRUE(WeightsMatch(WithKernel(a), WithKernel(b), 1e-5, &summary).ok());
  EXPECT_NE(summary.find("dense/kernel: relative error"), std::string::npos) << summary;
  EXPECT_TRUE(
      WeightsMatch(WithKernel(std::vector<float>(4, 0.0f)), WithKernel(std::vector<float>(4, 0.0f)))
          .ok());
}

// One element off by 1e-3 of the largest: 1e-3 / sqrt(1000) in L2, below 1e-4, but the
// max norm sees it.
TEST(WeightsMatch, AnErrorInOneElementIsNotAveragedAway) {
  std::vector<float> a(1000, 1.0f), b = a;
  b[123] += 1e-3f;
  absl::Status s = WeightsMatch(WithKernel(a), WithKernel(b), 1e-4);
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_NE(s.message().find("dense/kernel"), std::string::npos) << s;
  EXPECT_NE(s.message().find("element 123"), std::string::npos) << s;
}

TEST(WeightsMatch, DifferentVariablesAreRefusedNamingThem) {
  absl::Status s = WeightsMatch(WithKernel({1, 2}), WithKernel({1, 2}, "dense/bias"));
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_NE(s.message().find("dense/bias"), std::string::npos) << s;
  s = WeightsMatch(WithKernel({1, 2}), WithKernel({1, 2, 3}));
  EXPECT_NE(s.message().find("f32[2]"), std::string::npos) << s;
}

}  // namespace
}  // namespace lockstep::chief
