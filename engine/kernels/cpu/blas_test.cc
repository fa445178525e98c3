#include "engine/kernels/cpu/blas.h"

#include <vector>

#include "absl/strings/match.h"
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

// The backward-product bounds are a row per OpenBLAS kernel set and CPU vendor, the kernel set
// named in any case; a combination nobody measured gets the default row.
TEST(BlasTest, OwnKernelBoundsArePerKernelSetAndVendorWithADefault) {
  const OwnKernelBounds& fallback = OwnKernelBoundsFor("NoSuchCore", "GenuineIntel");
  EXPECT_STREQ(fallback.core, "");
  EXPECT_EQ(fallback.min_work, int64_t{1} << 21);
  EXPECT_EQ(fallback.max_batch, 255);
  EXPECT_EQ(&OwnKernelBoundsFor("Haswell", "AuthenticAMD"), &fallback);

  const OwnKernelBounds& amd = OwnKernelBoundsFor("Cooperlake", "AuthenticAMD");
  EXPECT_STREQ(amd.core, "cooperlake");
  EXPECT_STREQ(amd.vendor, "AuthenticAMD");
  EXPECT_EQ(amd.max_batch, 255);
  const OwnKernelBounds& intel = OwnKernelBoundsFor("COOPERLAKE", "GenuineIntel");
  EXPECT_STREQ(intel.vendor, "GenuineIntel");
  EXPECT_EQ(intel.max_batch, 0);
  // A row for any vendor.
  for (const char* vendor : {"GenuineIntel", "AuthenticAMD", ""}) {
    const OwnKernelBounds& prescott = OwnKernelBoundsFor("Prescott", vendor);
    EXPECT_STREQ(prescott.core, "prescott") << vendor;
    EXPECT_GT(prescott.max_batch, int64_t{1} << 40) << vendor;
  }
  // This process's row is the one for the kernels OpenBLAS chose here.
  const OwnKernelBounds& here = OwnKernelBoundsHere();
  EXPECT_TRUE(here.core[0] == '\0' || absl::EqualsIgnoreCase(here.core, BlasCoreName()))
      << here.core << " vs " << BlasCoreName();
}

}  // namespace
}  // namespace lockstep::engine::cpu
