#include "engine/kernels/cpu/blas.h"

#include <stdlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine::cpu {
namespace {

// OpenBLAS loads once per process, so each case that looks at the loading runs in a child
// process of its own (a death test, "threadsafe" style: the child re-executes this binary,
// so it starts without the library whatever the parent ran before). The child's checks print
// what failed, then exit non-zero.
#define CHILD_EXPECT(cond)                                   \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "child check failed: %s\n", #cond);    \
      fprintf(stderr, "core: %s\n", BlasCoreName().c_str()); \
      _exit(1);                                              \
    }                                                        \
  } while (0)

TEST(BlasTest, AUsersCoreTypeWinsAndStaysSet) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
        LoadBlas();
        CHILD_EXPECT(BlasCoreName() == "Haswell");
        CHILD_EXPECT(BlasCoreChosen().empty());
        const char* env = getenv("OPENBLAS_CORETYPE");
        CHILD_EXPECT(env != nullptr && std::string(env) == "Haswell");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BlasTest, ZenKernelsOnAmdZenAndTheEnvironmentLeftAsItWas) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("OPENBLAS_CORETYPE");
        LoadBlas();
        if (PreferredBlasCore() != nullptr) {
          CHILD_EXPECT(BlasCoreChosen() == "ZEN");
          CHILD_EXPECT(BlasCoreName() == "Zen");
        } else {
          CHILD_EXPECT(BlasCoreChosen().empty());
        }
        CHILD_EXPECT(getenv("OPENBLAS_CORETYPE") == nullptr);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BlasTest, AnEmptyCoreTypeCountsAsNone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("OPENBLAS_CORETYPE", "", 1);
        LoadBlas();
        CHILD_EXPECT(BlasCoreChosen() == (PreferredBlasCore() ? PreferredBlasCore() : ""));
        const char* env = getenv("OPENBLAS_CORETYPE");
        CHILD_EXPECT(env != nullptr && *env == '\0');
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

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

TEST(BlasTest, GemmThroughTheLoadedLibraryMatchesANaiveProduct) {
  CheckEveryTranspose<float>(1e-4);
  CheckEveryTranspose<double>(1e-12);
  EXPECT_FALSE(BlasCoreName().empty());
  std::printf("OpenBLAS kernels: %s (asked for: %s)\n", BlasCoreName().c_str(),
              BlasCoreChosen().empty() ? "nothing" : BlasCoreChosen().c_str());
}

TEST(BlasTest, OneThreadMeansOneThread) {
  SetBlasThreads(1);
  EXPECT_EQ(BlasThreads(), 1);
}

}  // namespace
}  // namespace lockstep::engine::cpu
