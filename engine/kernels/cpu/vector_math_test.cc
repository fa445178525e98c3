#include "engine/kernels/cpu/vector_math.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine::cpu {
namespace {

double Phi(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }

// Against the exact values in f64, over [-12, 12] and past it (the clamps), at every tail
// length: GELU within 1e-6 absolute (its values reach 12: 1e-6 relative there), the
// gradient within 2e-6.
TEST(VectorMath, GeluAndItsGradientMatchTheExactOnes) {
  std::vector<float> xs;
  for (int i = -1200; i <= 1200; ++i) xs.push_back(i / 100.f);
  for (float far : {-100.f, -30.f, 30.f, 100.f}) xs.push_back(far);
  for (size_t n : {xs.size(), xs.size() - 1, xs.size() - 7, size_t{3}, size_t{1}}) {
    std::vector<float> y(n), dx(n), dy(n);
    for (size_t i = 0; i < n; ++i) dy[i] = 1.f + static_cast<float>(i % 3);
    GeluForward(xs.data(), y.data(), n);
    GeluBackward(xs.data(), dy.data(), dx.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double x = xs[i];
      EXPECT_NEAR(y[i], x * Phi(x), 1e-6 * std::max(1.0, std::fabs(x))) << "x = " << x;
      const double grad = Phi(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
      EXPECT_NEAR(dx[i], dy[i] * grad, 2e-6 * dy[i]) << "x = " << x << ", n = " << n;
    }
  }
}

// An element's value does not depend on where it lies (vector body or padded tail).
TEST(VectorMath, AnElementsValueDoesNotDependOnItsPosition) {
  const std::vector<float> xs = {-2.5f, -0.3f, 0.f, 0.7f, 1.9f, 3.3f, -1.1f, 0.05f, 2.2f};
  std::vector<float> all(xs.size()), one(1), dy(xs.size(), 0.75f), all_dx(xs.size()), one_dx(1);
  GeluForward(xs.data(), all.data(), xs.size());
  GeluBackward(xs.data(), dy.data(), all_dx.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    GeluForward(&xs[i], one.data(), 1);
    GeluBackward(&xs[i], &dy[i], one_dx.data(), 1);
    EXPECT_EQ(one[0], all[i]) << i;
    EXPECT_EQ(one_dx[0], all_dx[i]) << i;
  }
}

TEST(VectorMath, NanPropagatesAndInPlaceWorks) {
  std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), 1.f, -1.f};
  std::vector<float> dy = {1.f, 1.f, 1.f}, dx(3);
  GeluBackward(x.data(), dy.data(), dx.data(), 3);
  EXPECT_TRUE(std::isnan(dx[0]));
  GeluForward(x.data(), x.data(), 3);
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_NEAR(x[1], Phi(1.0), 1e-6);
  EXPECT_NEAR(x[2], -Phi(-1.0), 1e-6);
}

}  // namespace
}  // namespace lockstep::engine::cpu
