#include "engine/kernels/cpu/blas.h"

#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine::cpu {
namespace {

template <typename T>
std::vector<T> NaiveGemm(bool ta, bool tb, int m, int n, int k, T alpha, const std::vector<T>& a,
                         const std::vector<T>& b, T beta, std::vector<T> c) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      T sum = 0;
      for (int p = 0; p < k; ++p) {
        sum += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      }
      c[i * n + j] = alpha * sum + beta * c[i * n + j];
    }
  }
  return c;
}

// Row-major leading dimensions for every transpose: a wrong one shows as wrong elements.
template <typename T>
void CheckEveryTranspose(double tolerance) {
  const int m = 5, n = 7, k = 3;
  std::vector<T> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(0.5 * i - 2);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<T>(1.0 - 0.25 * i);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<T>(i % 3);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<T> want = NaiveGemm<T>(ta, tb, m, n, k, T(2), a, b, T(0.5), c);
      std::vector<T> got = c;
      Gemm<T>(ta, tb, m, n, k, T(2), a.data(), b.data(), T(0.5), got.data());
      for (int i = 0; i < m * n; ++i) {
        EXPECT_NEAR(got[i], want[i], tolerance) << "ta=" << ta << " tb=" << tb << " i=" << i;
      }
    }
  }
}

TEST(BlasTest, GemmMatchesANaiveProductForEveryTranspose) {
  CheckEveryTranspose<float>(1e-4);
  CheckEveryTranspose<double>(1e-12);
}

TEST(BlasTest, OneThreadMeansOneThreadAndTheKernelsHaveAName) {
  SetBlasThreads(1);
  EXPECT_EQ(BlasThreads(), 1);
  EXPECT_FALSE(BlasCoreName().empty());
  EXPECT_NE(BlasCoreName(), "unknown");
}

}  // namespace
}  // namespace lockstep::engine::cpu
