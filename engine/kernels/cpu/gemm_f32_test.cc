#include "engine/kernels/cpu/gemm_f32.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/kernels/cpu/blas.h"
#include "gtest/gtest.h"

namespace lockstep::engine::cpu {
namespace {

constexpr float kGuard = -12345.0f;

struct Case {
  bool trans_a;  // true: C = alpha A^T B + beta C (A is k x m, B k x n)
                 // false: C = alpha A B^T + beta C (A is m x k, B n x k)
  int64_t m, n, k;
  float alpha, beta;
};

std::vector<float> Random(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs `gemm` on a random case and compares every element of C with a double-precision
// product, within a bound relative to the sum of the magnitudes that make the element up;
// C is followed by guard values the kernel must not touch.
template <typename F>
void Check(const Case& cs, F gemm, std::mt19937& rng) {
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  std::vector<float> a = Random(m * k, rng), b = Random(k * n, rng), c = Random(m * n, rng);
  std::vector<float> got = c;
  got.resize(m * n + 32, kGuard);
  gemm(cs, a.data(), b.data(), got.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = cs.trans_a ? a[p * m + i] : a[i * k + p];
        const double y = cs.trans_a ? b[p * n + j] : b[j * k + p];
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double want = cs.alpha * sum + (cs.beta == 0 ? 0.0 : cs.beta * c[i * n + j]);
      const double bound =
          1e-5 * (std::fabs(cs.alpha) * magnitude + std::fabs(cs.beta * c[i * n + j])) + 1e-6;
      ASSERT_NEAR(got[i * n + j], want, bound)
          << (cs.trans_a ? "A^T B" : "A B^T") << " m=" << m << " n=" << n << " k=" << k
          << " alpha=" << cs.alpha << " beta=" << cs.beta << " at (" << i << ", " << j << ")";
    }
  }
  for (size_t i = m * n; i < got.size(); ++i) {
    ASSERT_EQ(got[i], kGuard) << "wrote past C: m=" << m << " n=" << n << " k=" << k;
  }
}

void Direct(const Case& cs, const float* a, const float* b, float* c) {
  if (cs.trans_a) {
    GemmTransA(cs.m, cs.n, cs.k, cs.alpha, a, b, cs.beta, c);
  } else {
    GemmTransB(cs.m, cs.n, cs.k, cs.alpha, a, b, cs.beta, c);
  }
}

// Every remainder of the 6x16 tile in both directions, k from empty to past one block of
// GemmTransB's k, and the alpha/beta combinations the engine and BLAS callers use.
TEST(GemmF32Test, MatchesADoubleProductForEveryTileRemainder) {
  std::mt19937 rng(7);
  for (bool trans_a : {true, false}) {
    for (int64_t m : {1, 5, 6, 7, 16, 17, 33, 97}) {
      for (int64_t n : {1, 7, 15, 16, 17, 40, 49}) {
        for (int64_t k : {0, 1, 3, 8, 129}) {
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 0.25f}}) {
            Check({trans_a, m, n, k, alpha, beta}, Direct, rng);
          }
        }
      }
    }
  }
}

// Long k and a tall batch are packed a block at a time: more than one block of each, with
// remainders, in both kernels.
TEST(GemmF32Test, ProductsLargerThanOnePackingBlock) {
  std::mt19937 rng(11);
  for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {2.0f, -1.0f}}) {
    Check({false, 19, 13, 2500, alpha, beta}, Direct, rng);  // k: 3 blocks
    Check({false, 300, 13, 70, alpha, beta}, Direct, rng);   // batch: 2 blocks
    Check({true, 19, 21, 1300, alpha, beta}, Direct, rng);   // k: 3 blocks
    Check({true, 200, 21, 40, alpha, beta}, Direct, rng);    // A: 3 blocks of columns
  }
}

TEST(GemmF32Test, BetaZeroDoesNotReadC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool trans_a : {true, false}) {
    const int64_t m = 13, n = 21, k = 9;
    std::vector<float> a(m * k, 0.5f), b(k * n, 2.0f), c(m * n, nan);
    Direct({trans_a, m, n, k, 1.0f, 0.0f}, a.data(), b.data(), c.data());
    for (float x : c) ASSERT_EQ(x, 9.0f) << (trans_a ? "A^T B" : "A B^T");
  }
}

TEST(GemmF32Test, SameInputsGiveBitwiseTheSameOutput) {
  std::mt19937 rng(3);
  for (bool trans_a : {true, false}) {
    const int64_t m = 50, n = 70, k = 300;
    std::vector<float> a = Random(m * k, rng), b = Random(k * n, rng);
    std::vector<float> first(m * n), second(m * n, 1.0f);
    Direct({trans_a, m, n, k, 1.0f, 0.0f}, a.data(), b.data(), first.data());
    Direct({trans_a, m, n, k, 1.0f, 0.0f}, a.data(), b.data(), second.data());
    EXPECT_EQ(first, second);
  }
}

// cpu::Gemm sends a dense layer's backward products of training size here while OpenBLAS
// has one thread, and to OpenBLAS otherwise: the results are right either way.
TEST(GemmF32Test, GemmRoutesTrainingSizedProductsCorrectly) {
  std::mt19937 rng(5);
  auto through_gemm = [](const Case& cs, const float* a, const float* b, float* c) {
    Gemm<float>(cs.trans_a, !cs.trans_a, cs.m, cs.n, cs.k, cs.alpha, a, b, cs.beta, c);
  };
  for (int threads : {1, 2}) {
    SetBlasThreads(threads);
    Check({true, 100, 130, 64, 1.0f, 0.0f}, through_gemm, rng);   // dW = X^T dY
    Check({false, 64, 100, 130, 1.0f, 0.0f}, through_gemm, rng);  // dX = dY W^T
  }
  SetBlasThreads(1);
}

}  // namespace
}  // namespace lockstep::engine::cpu
